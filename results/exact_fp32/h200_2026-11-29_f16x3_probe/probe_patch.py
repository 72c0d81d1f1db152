"""Timing probe: the presplit mainloop's three products on fp16 wgmma (k16), each stage's tf32 bytes read as
fp16 twice as deep, and both accumulators folded with an FMA at every promotion (as a scaled route would)."""
import sys
src = open(sys.argv[1]).read()
old = '''    Tensor tCrBs = thread_mma.make_fragment_B(thread_mma.partition_B(sBs));

    Tensor big = make_fragment_like(accum);    // P: big.big since the last promotion'''
new = '''    Tensor tCrBs = thread_mma.make_fragment_B(thread_mma.partition_B(sBs));
    using F16 = cutlass::half_t;
    using F16Mma = decltype(cute::make_tiled_mma(
        cute::GMMA::ss_op_selector<F16, F16, float, Shape<_128, _128, _32>, cute::GMMA::Major::K, cute::GMMA::Major::K>(),
        Layout<Shape<_2, _1, _1>>{}));
    F16Mma mma16;
    mma16.accumulate_ = GMMA::ScaleOut::One;
    using SL16 = decltype(tile_to_shape(GMMA::Layout_K_SW64_Atom<F16>{}, make_shape(Int<128>{}, Int<32>{}, Int<Stages_>{})));
    static_assert(cute::cosize_v<SL16> * 2 == cute::cosize_v<SmemLayoutA> * 4, "same bytes");
    static_assert(cute::is_same_v<SmemLayoutAtomA, GMMA::Layout_K_SW64_Atom<cutlass::tfloat32_t>>, "SW64 tf32 tiles");
    auto slice16 = mma16.get_slice(warp_group * cutlass::NumThreadsPerWarpGroup);
    auto view16 = [&](auto* words) { return make_tensor(make_smem_ptr(reinterpret_cast<F16*>(words)), SL16{}); };
    Tensor tCrA16 = slice16.make_fragment_A(slice16.partition_A(view16(storage.a.data())));
    Tensor tCrB16 = slice16.make_fragment_B(slice16.partition_B(view16(storage.b.data())));
    Tensor tCrAs16 = slice16.make_fragment_A(slice16.partition_A(view16(storage.a_small.data())));
    Tensor tCrBs16 = slice16.make_fragment_B(slice16.partition_B(view16(storage.b_small.data())));

    Tensor big = make_fragment_like(accum);    // P: big.big since the last promotion'''
assert old in src; src = src.replace(old, new)
old = '''      for (int k = 0; k < size<2>(tCrA); ++k) {
        cute::gemm(tiled_mma, tCrA(_, _, k, stage), tCrB(_, _, k, stage), big);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < size<2>(tCrA); ++k) {
        cute::gemm(tiled_mma, tCrA(_, _, k, stage), tCrBs(_, _, k, stage), small);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < size<2>(tCrA); ++k) {
        cute::gemm(tiled_mma, tCrAs(_, _, k, stage), tCrB(_, _, k, stage), small);
      }'''
new = '''      for (int k = 0; k < size<2>(tCrA16); ++k) {
        cute::gemm(mma16, tCrA16(_, _, k, stage), tCrB16(_, _, k, stage), big);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < size<2>(tCrA16); ++k) {
        cute::gemm(mma16, tCrA16(_, _, k, stage), tCrBs16(_, _, k, stage), small);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < size<2>(tCrA16); ++k) {
        cute::gemm(mma16, tCrAs16(_, _, k, stage), tCrB16(_, _, k, stage), small);
      }'''
assert old in src; src = src.replace(old, new)
old = '''    for (int i = 0; i < size(accum); ++i) {
      accum(i) += big(i);
      big(i) = 0.f;
    }'''
new = '''    float const scale = __shfl_sync(0xffffffff, 1.0f, 0);  // a block scale's product, not folded away
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accum); ++i) {
      accum(i) = fmaf(big(i), scale, accum(i));
      big(i) = 0.f;
      accum(i) = fmaf(small(i), scale, accum(i));
      small(i) = 0.f;
    }'''
assert src.count(old) == 1; src = src.replace(old, new)
open(sys.argv[2], 'w').write(src)
