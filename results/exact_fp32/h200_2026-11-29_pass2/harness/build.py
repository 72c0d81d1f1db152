"""Build the bit-exact check of the fp16 passes that call_f ran (tests/cpp/f16_passes_main.cu, then here as
harness/passes_check.cu; test_exact_fp32.py now builds and runs it among the GPU tests):

    python results/exact_fp32/h200_2026-11-29_pass2/harness/build.py OUT_DIR    # writes OUT_DIR/f16_passes_check
"""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from tests.gpu_builds import f16_passes_check_command

command = f16_passes_check_command(Path(sys.argv[1]).resolve())
print(" ".join(command), flush=True)
sys.exit(subprocess.run(command).returncode)
