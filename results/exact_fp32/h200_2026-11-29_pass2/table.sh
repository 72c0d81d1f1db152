#!/bin/bash
# Issue 11's ten shapes (and three more) at fact's picks with the fixed script (operands laid out once):
#   bash results/exact_fp32/h200_2026-11-29_pass2/table.sh build|check
K=default_square_2048,tf32_square_2048,default_square_4096,tf32_square_4096,default_square_8192,tf32_square_8192,default_batched_128x512x2048x1024,tf32_batched_128x512x2048x1024,default_tensor3d_x_matrix,tf32_tensor3d_x_matrix,default_tensor4d_x_matrix,tf32_tensor4d_x_matrix,default_transposed_a_4096,tf32_transposed_a_4096,default_transposed_b_4096,tf32_transposed_b_4096,default_transposed_both_4096,tf32_transposed_both_4096,default_large_k_524288,presplit_f16_p64,presplit_f16_p128
C=square_2048,square_4096,square_8192,batched_128x512x2048x1024,tensor3d_x_matrix,tensor4d_x_matrix,transposed_a_4096,transposed_b_4096,transposed_both_4096,large_k_524288,outlier_2048,tiny_rows_2048,wide_4096
python scripts/gpu_exact_fp32.py --out $OUT/table --phase $1 --jobs 16 --reps 20 --kernels $K --only $C
