// sm90 exact fp32 batched GEMM (L mode) on wgmma: 3xTF32 with promoted accumulation, 128x64x32 tile.
// The split-TF32 mainloop of sm90_gemm_3xtf32_promoted over a batch of independent GEMMs (torch.bmm, a
// 3-D tensor times a matrix): A [L, M, K] and B stored [L, N, K] (both K-major), D [L, M, N].
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/pipeline/pipeline.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

using namespace cute;

using ElementAB = float;
using ElementC = void;
using ElementD = float;
using TileShape = Shape<_128, _64, _32>;
using ClusterShape = Shape<_1, _1, _1>;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, cutlass::layout::RowMajor, 4, ElementD, cutlass::layout::RowMajor, 4,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

// The wgmma atoms, shared-memory layout atoms and TMA atoms CUTLASS picks for a TF32 mainloop of this tile.
using Tf32Reference = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    float, cutlass::layout::RowMajor, 4, float, cutlass::layout::ColumnMajor, 4, float,
    TileShape, ClusterShape, cutlass::gemm::collective::StageCount<2>, cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

// big = rna_tf32(x), small = rna_tf32(x - big): x == big + small up to the last bit of small.
CUTLASS_DEVICE uint32_t fact_rna_tf32(float x) {
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return bits;
}

CUTLASS_DEVICE void fact_split_word(uint32_t& word, uint32_t& small) {
  float const x = __uint_as_float(word);
  uint32_t big = fact_rna_tf32(x);
  if (isinf(__uint_as_float(big)) && !isinf(x)) big = word & 0xffffe000u;  // above the largest TF32
  float const rest = isinf(x) ? 0.f : x - __uint_as_float(big);  // NaN stays NaN in both parts
  small = fact_rna_tf32(rest);
  word = big;
}

template <class Reference, int Stages_, int PromotionTiles_>
struct FactSplitTf32Mainloop {
  struct DispatchPolicy {
    static constexpr int Stages = Stages_;
    using ClusterShape = typename Reference::DispatchPolicy::ClusterShape;
    using ArchTag = cutlass::arch::Sm90;
    using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  };
  using TileShape = typename Reference::TileShape;
  using ElementA = float;
  using StrideA = typename Reference::StrideA;
  using ElementB = float;
  using StrideB = typename Reference::StrideB;
  using TiledMma = typename Reference::TiledMma;
  using ElementAccumulator = float;
  using ArchTag = cutlass::arch::Sm90;
  using TransformA = cute::identity;
  using TransformB = cute::identity;
  using GmemTiledCopyA = typename Reference::GmemTiledCopyA;
  using GmemTiledCopyB = typename Reference::GmemTiledCopyB;
  using SmemLayoutAtomA = typename Reference::SmemLayoutAtomA;
  using SmemLayoutAtomB = typename Reference::SmemLayoutAtomB;
  using ClusterShape = typename DispatchPolicy::ClusterShape;
  using MainloopPipeline = cutlass::PipelineTmaAsync<Stages_>;
  using PipelineState = cutlass::PipelineState<Stages_>;
  using PipelineParams = typename MainloopPipeline::Params;
  static constexpr int NumProducerThreadEvents = 1;
  static constexpr int PromotionTiles = PromotionTiles_;

  static_assert(cutlass::gemm::detail::is_k_major<StrideA>() && cutlass::gemm::detail::is_k_major<StrideB>(),
                "TF32 wgmma reads K-major operands only");
  static_assert(Stages_ >= 2, "shared memory holds fewer than two stages of raw and small tiles");
  static_assert(PromotionTiles_ >= 1, "promote at least every k-tile's worth of K");

  using SmemLayoutA = decltype(tile_to_shape(SmemLayoutAtomA{},
      make_shape(shape<0>(TileShape{}), shape<2>(TileShape{}), Int<Stages_>{}), Step<_1, _2, _3>{}));
  using SmemLayoutB = decltype(tile_to_shape(SmemLayoutAtomB{},
      make_shape(shape<1>(TileShape{}), shape<2>(TileShape{}), Int<Stages_>{}), Step<_1, _2, _3>{}));
  static constexpr int kStageWordsA = size<0>(TileShape{}) * size<2>(TileShape{});
  static constexpr int kStageWordsB = size<1>(TileShape{}) * size<2>(TileShape{});
  // The split walks a stage's storage as one flat range: each stage must be one dense block.
  static_assert(cute::cosize_v<SmemLayoutA> == kStageWordsA * Stages_, "A stages are not dense");
  static_assert(cute::cosize_v<SmemLayoutB> == kStageWordsB * Stages_, "B stages are not dense");
  static_assert(SmemLayoutA{}(0, 0, 1) == kStageWordsA && SmemLayoutB{}(0, 0, 1) == kStageWordsB,
                "a stage must start where the previous one ends");
  static_assert(kStageWordsA % 4 == 0 && kStageWordsB % 4 == 0, "the split moves 16-byte vectors");

  struct SharedStorage {
    struct TensorStorage : cute::aligned_struct<128, _0> {
      // x as TMA wrote it, then its big part (rounded in place); and the small parts
      cute::array_aligned<uint32_t, cute::cosize_v<SmemLayoutA>> a;
      cute::array_aligned<uint32_t, cute::cosize_v<SmemLayoutB>> b;
      cute::array_aligned<uint32_t, cute::cosize_v<SmemLayoutA>> a_small;
      cute::array_aligned<uint32_t, cute::cosize_v<SmemLayoutB>> b_small;
    } tensors;
    using PipelineStorage = typename MainloopPipeline::SharedStorage;
    PipelineStorage pipeline;
  };
  using TensorStorage = typename SharedStorage::TensorStorage;
  using PipelineStorage = typename SharedStorage::PipelineStorage;

  struct Arguments {
    ElementA const* ptr_A;
    StrideA dA;
    ElementB const* ptr_B;
    StrideB dB;
  };

  // Raw 32-bit words: a TF32 tensor map would round x on the way in.
  using TmaWord = uint32_t;
  static constexpr uint32_t TmaTransactionBytes = (kStageWordsA + kStageWordsB) * sizeof(TmaWord);

  struct Params {
    using TMA_A = decltype(make_tma_copy_A_sm90(GmemTiledCopyA{},
        make_tensor(static_cast<TmaWord const*>(nullptr), repeat_like(StrideA{}, int32_t(0)), StrideA{}),
        SmemLayoutA{}(_, _, cute::Int<0>{}), TileShape{}, ClusterShape{}));
    using TMA_B = decltype(make_tma_copy_B_sm90(GmemTiledCopyB{},
        make_tensor(static_cast<TmaWord const*>(nullptr), repeat_like(StrideB{}, int32_t(0)), StrideB{}),
        SmemLayoutB{}(_, _, cute::Int<0>{}), TileShape{}, ClusterShape{}));
    TMA_A tma_load_a;
    TMA_B tma_load_b;
    uint32_t tma_transaction_bytes = TmaTransactionBytes;
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void*) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    auto a = make_tensor(reinterpret_cast<TmaWord const*>(args.ptr_A), make_layout(make_shape(M, K, L), args.dA));
    auto b = make_tensor(reinterpret_cast<TmaWord const*>(args.ptr_B), make_layout(make_shape(N, K, L), args.dB));
    return {make_tma_copy_A_sm90(GmemTiledCopyA{}, a, SmemLayoutA{}(_, _, cute::Int<0>{}), TileShape{}, ClusterShape{}),
            make_tma_copy_B_sm90(GmemTiledCopyB{}, b, SmemLayoutB{}(_, _, cute::Int<0>{}), TileShape{}, ClusterShape{}),
            TmaTransactionBytes};
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const&) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    // TMA: 16-byte aligned rows (4 floats); the base pointers are checked by the binding
    return cutlass::detail::check_alignment<4>(cute::make_shape(M, K, L), StrideA{}) &&
           cutlass::detail::check_alignment<4>(cute::make_shape(N, K, L), StrideB{});
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& params) {
    cute::prefetch_tma_descriptor(params.tma_load_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_b.get_tma_descriptor());
  }

  // (BLK_M, BLK_K, m, k, l) and (BLK_N, BLK_K, n, k, l) views of the operands, for the kernel and load()
  template <class ProblemShape_MNKL>
  CUTLASS_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL, Params const& params) const {
    auto [M, N, K, L] = problem_shape_MNKL;
    Tensor mA = params.tma_load_a.get_tma_tensor(make_shape(M, K, L));
    Tensor mB = params.tma_load_b.get_tma_tensor(make_shape(N, K, L));
    Tensor gA = local_tile(mA, TileShape{}, make_coord(_, _, _), Step<_1, Underscore, _1>{});
    Tensor gB = local_tile(mB, TileShape{}, make_coord(_, _, _), Step<Underscore, _1, _1>{});
    return cute::make_tuple(gA, gB);
  }

  // Producer warp: one elected thread issues the TMA loads of each k-tile into the next free stage.
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState write_state,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int, uint32_t block_rank_in_cluster,
                           TensorStorage& storage) {
    if (!cute::elect_one_sync()) return;
    Tensor sA = make_tensor(make_smem_ptr(reinterpret_cast<TmaWord*>(storage.a.data())), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(reinterpret_cast<TmaWord*>(storage.b.data())), SmemLayoutB{});
    constexpr uint32_t cluster_x = size<0>(ClusterShape{});
    uint32_t const block_x = block_rank_in_cluster % cluster_x, block_y = block_rank_in_cluster / cluster_x;
    auto tma_a = params.tma_load_a.get_slice(block_y);
    auto tma_b = params.tma_load_b.get_slice(block_x);
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
    Tensor tAgA = tma_a.partition_S(get<0>(load_inputs)(_, _, m_coord, _, l_coord));  // (TMA, TMA_M, TMA_K, k)
    Tensor tAsA = tma_a.partition_D(sA);                                                // (TMA, TMA_M, TMA_K, PIPE)
    Tensor tBgB = tma_b.partition_S(get<1>(load_inputs)(_, _, n_coord, _, l_coord));
    Tensor tBsB = tma_b.partition_D(sB);
    // A tile is shared along the cluster's N dimension, a B tile along its M dimension
    uint16_t mcast_a = 0, mcast_b = 0;
    auto cluster = Layout<ClusterShape>{};
    if constexpr (cute::is_same_v<GmemTiledCopyA, SM90_TMA_LOAD_MULTICAST>) {
      for (int n = 0; n < size<1>(cluster); ++n) mcast_a |= uint16_t(1) << cluster(block_x, n, Int<0>{});
    }
    if constexpr (cute::is_same_v<GmemTiledCopyB, SM90_TMA_LOAD_MULTICAST>) {
      for (int m = 0; m < size<0>(cluster); ++m) mcast_b |= uint16_t(1) << cluster(m, block_y, Int<0>{});
    }
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      pipeline.producer_acquire(write_state);
      auto* barrier = pipeline.producer_get_barrier(write_state);
      int const stage = write_state.index();
      copy(params.tma_load_a.with(*barrier, mcast_a), tAgA(_, _, _, *k_tile_iter), tAsA(_, _, _, stage));
      copy(params.tma_load_b.with(*barrier, mcast_b), tBgB(_, _, _, *k_tile_iter), tBsB(_, _, _, stage));
      ++k_tile_iter;
      ++write_state;
    }
  }

  // Keeps a block of the cluster from leaving while its peers may still multicast into it.
  CUTLASS_DEVICE void load_tail(MainloopPipeline pipeline, PipelineState write_state) {
    if (cute::elect_one_sync()) pipeline.producer_tail(write_state);
  }

  // Split one landed stage: x -> (big in place, small alongside), over both consumer warpgroups.
  CUTLASS_DEVICE static void split_stage(TensorStorage& storage, int stage, int thread_idx) {
    constexpr int kThreads = size(TiledMma{});
    auto run = [&](uint32_t* words, uint32_t* smalls, int count) {
      uint4* w = reinterpret_cast<uint4*>(words);
      uint4* s = reinterpret_cast<uint4*>(smalls);
      CUTLASS_PRAGMA_UNROLL
      for (int i = thread_idx; i < count / 4; i += kThreads) {
        uint4 x = w[i], small;
        fact_split_word(x.x, small.x);
        fact_split_word(x.y, small.y);
        fact_split_word(x.z, small.z);
        fact_split_word(x.w, small.w);
        w[i] = x;
        s[i] = small;
      }
    };
    run(storage.a.data() + stage * kStageWordsA, storage.a_small.data() + stage * kStageWordsA, kStageWordsA);
    run(storage.b.data() + stage * kStageWordsB, storage.b_small.data() + stage * kStageWordsB, kStageWordsB);
  }

  // Consumer warpgroups: split each stage, then (big, big) -> P, (big, small) + (small, big) -> S;
  // P is promoted into `accum` every PromotionTiles k-tiles; at the end accum = (accum + P) + S.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState read_state, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& storage, Params const&) {
    static_assert(is_rmem<FrgTensorC>::value, "the accumulator lives in registers");
    using Tf32 = cutlass::tfloat32_t;
    Tensor sA = make_tensor(make_smem_ptr(reinterpret_cast<Tf32*>(storage.a.data())), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(reinterpret_cast<Tf32*>(storage.b.data())), SmemLayoutB{});
    Tensor sAs = make_tensor(make_smem_ptr(reinterpret_cast<Tf32*>(storage.a_small.data())), SmemLayoutA{});
    Tensor sBs = make_tensor(make_smem_ptr(reinterpret_cast<Tf32*>(storage.b_small.data())), SmemLayoutB{});

    TiledMma tiled_mma;
    // every thread of a warpgroup issues the same wgmma: slice by warpgroup
    int const warp_group = __shfl_sync(0xffffffff, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    auto thread_mma = tiled_mma.get_slice(warp_group * cutlass::NumThreadsPerWarpGroup);
    Tensor tCrA = thread_mma.make_fragment_A(thread_mma.partition_A(sA));    // (MMA, MMA_M, MMA_K, PIPE)
    Tensor tCrB = thread_mma.make_fragment_B(thread_mma.partition_B(sB));    // (MMA, MMA_N, MMA_K, PIPE)
    Tensor tCrAs = thread_mma.make_fragment_A(thread_mma.partition_A(sAs));
    Tensor tCrBs = thread_mma.make_fragment_B(thread_mma.partition_B(sBs));

    Tensor big = make_fragment_like(accum);    // P: big.big since the last promotion
    Tensor small = make_fragment_like(accum);  // S: the residual products over all of K
    clear(accum);
    clear(big);
    clear(small);
    tiled_mma.accumulate_ = GMMA::ScaleOut::One;  // the accumulators are zeroed in registers instead
    cutlass::arch::NamedBarrier split_done(size(TiledMma{}), 0);

    PipelineState release_state = read_state;
    bool pending = false;  // a stage whose wgmma may still run and that is not yet released
    int since_promotion = 0;
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      pipeline.consumer_wait(read_state, pipeline.consumer_try_wait(read_state));
      int const stage = read_state.index();
      split_stage(storage, stage, thread_idx);  // overlaps the previous k-tile's wgmma
      cutlass::arch::fence_view_async_shared();  // the generic-proxy writes, seen by wgmma
      split_done.arrive_and_wait();

      warpgroup_fence_operand(big);
      warpgroup_fence_operand(small);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < size<2>(tCrA); ++k) {
        cute::gemm(tiled_mma, tCrA(_, _, k, stage), tCrB(_, _, k, stage), big);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < size<2>(tCrA); ++k) {
        cute::gemm(tiled_mma, tCrA(_, _, k, stage), tCrBs(_, _, k, stage), small);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < size<2>(tCrA); ++k) {
        cute::gemm(tiled_mma, tCrAs(_, _, k, stage), tCrB(_, _, k, stage), small);
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();  // the previous k-tile's batch is done: release its stage
      warpgroup_fence_operand(big);
      warpgroup_fence_operand(small);
      if (pending) {
        pipeline.consumer_release(release_state);
        ++release_state;
      }
      pending = true;
      ++read_state;

      if (++since_promotion == PromotionTiles) {
        warpgroup_wait<0>();
        warpgroup_fence_operand(big);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(accum); ++i) {
          accum(i) += big(i);
          big(i) = 0.f;
        }
        warpgroup_fence_operand(big);
        since_promotion = 0;
      }
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(big);
    warpgroup_fence_operand(small);
    if (pending) pipeline.consumer_release(release_state);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accum); ++i) {
      accum(i) = (accum(i) + big(i)) + small(i);
    }
  }

  // mma() waited for its last wgmma and released every stage it read.
  CUTLASS_DEVICE void mma_tail(MainloopPipeline, PipelineState, int) {}
};

// Stages: as many as fit in shared memory (raw and small tiles each) next to the epilogue, at most 4.
template <int Stages>
using FactKernelWithStages = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, FactSplitTf32Mainloop<Tf32Reference, Stages, 4>, CollectiveEpilogue,
    cutlass::gemm::PersistentScheduler>;
template <int Stages>
constexpr bool kFactFits = sizeof(typename FactKernelWithStages<Stages>::SharedStorage) <=
                           static_cast<size_t>(cutlass::gemm::collective::detail::sm90_smem_capacity_bytes);
constexpr int kSplitStages = kFactFits<4> ? 4 : kFactFits<3> ? 3 : 2;
static_assert(kFactFits<kSplitStages>, "two stages of raw and small tiles do not fit in shared memory");
using CollectiveMainloop = FactSplitTf32Mainloop<Tf32Reference, kSplitStages, 4>;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int main() {
  int const L = 6, M = 320, N = 256, K = 768;
  fact_vet::Buffer<float> a(size_t(L) * M * K), b(size_t(L) * N * K), d(size_t(L) * M * N);
  fact_vet::fill_uniform(a, 271);
  fact_vet::fill_uniform(b, 272);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, L));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, L));
  auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, L));
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                       {M, N, K, L},
                       {a.get(), stride_a, b.get(), stride_b},
                       {{}, nullptr, stride_d, d.get(), stride_d}};
  args.epilogue.thread.alpha = 1.f;
  args.epilogue.thread.beta = 0.f;
  Gemm gemm;
  fact_vet::run(gemm, args);

  fact_vet::View b_view{1, K, int64_t(N) * K};  // B stored [L, N, K]
  auto ref = fact_vet::reference_gemm(M, N, K, L, a.get(), fact_vet::row_major(M, K), b.get(), b_view,
                                      d.get(), fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, L);
  return fact_vet::report("sm90_gemm_batched_3xtf32_promoted", err, 2e-6);
}
