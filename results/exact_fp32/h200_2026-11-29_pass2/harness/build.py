"""Render the fp16-parts pick that the GPU test builds (exact_pick(2048, 1536, 1028), both operands M-major;
its passes serve every layout) and compile passes_check.cu around it for sm90a:

    python results/exact_fp32/h200_2026-11-29_pass2/harness/build.py OUT_DIR    # writes OUT_DIR/passes_check
"""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from fact.compile.toolchain import find_toolchain
from fact.core.enums import Layout
from fact.realize import build_request, render
from tests.gpu_builds import exact_pick

out = Path(sys.argv[1]).resolve()
out.mkdir(parents=True, exist_ok=True)
rendered = render(exact_pick(2048, 1536, 1028, layouts=(Layout.COL, Layout.ROW)))
request = build_request(rendered)
for name, text in request.sources.items():
    (out / name).write_text(text)
command = [str(find_toolchain().nvcc), "-arch=sm_90a", *request.cuda_flags, *(f"-I{d}" for d in request.include_dirs),
           f"-I{out}", f'-DFACT_KERNEL="{out / rendered.kernel_file}"', str(Path(__file__).with_name("passes_check.cu")),
           "-o", str(out / "passes_check")]
print(" ".join(command), flush=True)
sys.exit(subprocess.run(command).returncode)
