#!/bin/bash
# Run 2026-11-30 on an H200: the device call, best on an H100 (issue 11's targets are the H100's; no H100 has run the fp16
# parts or the fix-up yet), else on an H200 to check again. The exact family's GPU tests, then issue 11's table at
# fact's picks (h200_2026-11-29_pass2/table.sh: the ten shapes and three more). Packed into $OUT/next.tgz; commit it
# under a folder of its own with a README (GPU, date, versions, command).
#   run: bash results/exact_fp32/h200_2026-11-30_issue_table/call.sh   (carry .whl)
source results/exact_fp32/device_call.sh next
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
R=results/exact_fp32/h200_2026-11-29_pass2
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(OUT=$W bash $R/table.sh build > $W/table_build.txt 2>&1; echo "rc $?" >> $W/table_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
exact_tests 330
OUT=$W timeout $(left 585) bash $R/table.sh check > $W/table.txt 2>&1; echo "rc $?" >> $W/table.txt
echo "table $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
