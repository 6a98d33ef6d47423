// matmul.f32: y[..., N] = x[..., K] · wᵀ with w [N, K] row-major (the PyTorch Linear layout).
//
// Cores split N (rows of w) in chunks of kNSplitAlign rows, so each core streams only its own
// slice of the weights, which is what decode (M = 1, weight-bandwidth bound) needs. The loops are
// the matmul family's one GEMM driver (matmul_driver.h); this file has the f32 tiles.
//
// Determinism: every y[m][n] is one dot product accumulated in `lanes` partial sums, where
// lane l sums x[k] * w[k] for k = l (mod lanes) in increasing k with one FMA per step (a
// ragged end of K adds masked zeros), followed by the fixed tree of simd::hsum_lanes. Register
// tiles and cache blocking only change which dot products advance together, never the
// sequence of operations inside one, so the result depends on (x row, w row, K, ISA) only:
// not on M, N, the core split, the tile shape or alignment.
#include <algorithm>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/matmul_driver.h"
#include "kernels/simd.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "matmul.f32";
enum { kOpX = 0, kOpW = 1, kOpOut = 2 };

using F32Tiles = gemm::Tiles<float, float, float>;
using TileFn = gemm::TileFn<float, float, float>;

template <int MR, int NR>
void tile_scalar(const float* x, int64_t sx, const float* w, int64_t sw, float* st, int64_t ld, int64_t kn) {
  constexpr int kLanes = 8;
  float acc[MR][NR][kLanes];
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) {
      for (int l = 0; l < kLanes; ++l) acc[m][j][l] = st[(m * ld + j) * kLanes + l];
    }
  }
  int64_t k = 0;
  for (; k + kLanes <= kn; k += kLanes) {
    for (int m = 0; m < MR; ++m) {
      for (int j = 0; j < NR; ++j) {
        for (int l = 0; l < kLanes; ++l) acc[m][j][l] += x[m * sx + k + l] * w[j * sw + k + l];
      }
    }
  }
  for (int l = 0; k + l < kn; ++l) {
    for (int m = 0; m < MR; ++m) {
      for (int j = 0; j < NR; ++j) acc[m][j][l] += x[m * sx + k + l] * w[j * sw + k + l];
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) {
      for (int l = 0; l < kLanes; ++l) st[(m * ld + j) * kLanes + l] = acc[m][j][l];
    }
  }
}

TileFn tile_scalar_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_scalar<MR, NR>; };
  if (mr == 2) return gemm::tile_of<TileFn, 2>(nr, std::make_integer_sequence<int, 2>(), make);
  return gemm::tile_of<TileFn, 1>(nr, std::make_integer_sequence<int, 4>(), make);
}

constexpr F32Tiles kTilesScalar = {8, 4, 2, 2, 256, 2, 2, tile_scalar_for};

#if SK_KERNELS_X86

// One 8-k step of an MR x NR tile: NR weight vectors, MR activation vectors, MR * NR FMAs.
template <int MR, int NR>
SK_TARGET_AVX2 inline void step_avx2(const float* x, int64_t sx, const float* w, int64_t sw, int64_t k,
                                     __m256 (&acc)[MR][NR]) {
  __m256 wv[NR];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) wv[j] = _mm256_loadu_ps(w + j * sw + k);
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
    const __m256 xv = _mm256_loadu_ps(x + m * sx + k);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
  }
}

template <int MR, int NR>
SK_TARGET_AVX2 void tile_avx2(const float* x, int64_t sx, const float* w, int64_t sw, float* st, int64_t ld,
                              int64_t kn) {
  __m256 acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_load_ps(st + (m * ld + j) * 8);
  }
  int64_t k = 0;
  // Two steps per iteration: one prefetch per weight row and cache line.
  for (; k + 16 <= kn; k += 16) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      gemm::prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      gemm::prefetch_next_tile_short_rows<MR, NR>(w + j * sw + k, sw, k);
    }
    step_avx2<MR, NR>(x, sx, w, sw, k, acc);
    step_avx2<MR, NR>(x, sx, w, sw, k + 8, acc);
  }
  if (k + 8 <= kn) {
    step_avx2<MR, NR>(x, sx, w, sw, k, acc);
    k += 8;
  }
  if (k < kn) {
    const __m256i mask = simd::mask8(kn - k);
    __m256 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = simd::maskload_ps(w + j * sw + k, mask);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 xv = simd::maskload_ps(x + m * sx + k, mask);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm256_store_ps(st + (m * ld + j) * 8, acc[m][j]);
  }
}

TileFn tile_avx2_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_avx2<MR, NR>; };
  if (mr == 4) return gemm::tile_of<TileFn, 4>(nr, std::make_integer_sequence<int, 3>(), make);
  if (mr == 2) return gemm::tile_of<TileFn, 2>(nr, std::make_integer_sequence<int, 4>(), make);
  return gemm::tile_of<TileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}

// 4 x 3 tiles: 12 accumulators + 3 w vectors + 1 x vector fill the 16 YMM registers; 12
// independent FMA chains cover the FMA latency (4 cycles at 2 per cycle), where 4 x 2 tiles' 8
// chains did not, and 7 loads feed 12 FMAs instead of 6 loads 8. Blocks of 2-3 rows take 2 x 4
// tiles (one pass over K), GEMV 1 x 8.
constexpr F32Tiles kTilesAvx2 = {8, 8, 4, 3, 256, 2, 4, tile_avx2_for};

// GEMV tiles prefetch the weights this far ahead (gemm::prefetch_block_ahead), rows of any
// length. Measured on Zen 4, Llama decode, f32 weights, alternated rounds, tokens/s: 8 layers /
// hidden 1024 (4 KiB rows), 1 thread: none 27-32, 32 KiB 31-34, 64 KiB 32-35, 128 KiB 32-35;
// 2 threads: none 45-49, 64 KiB 50-58, 128 KiB 48-53; 16 layers / hidden 2048 (8 and 22 KiB
// rows), 1 thread: none 5.5-6.2, 64 KiB 6.7-7.5, 128 KiB 6.6-6.9; 2 threads: none 7.7-8.7,
// 64 KiB 8.8-9.1, 128 KiB 8.5-11.6.
constexpr int64_t kF32AheadBytes = 65536;

template <int MR, int NR>
SK_TARGET_AVX512 void tile_avx512(const float* x, int64_t sx, const float* w, int64_t sw, float* st, int64_t ld,
                                  int64_t kn) {
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_load_ps(st + (m * ld + j) * 16);
  }
  int64_t k = 0;
  for (; k + 16 <= kn; k += 16) {
    gemm::prefetch_block_ahead<MR, NR, 16, kF32AheadBytes>(w, sw, k);
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      gemm::prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      wv[j] = _mm512_loadu_ps(w + j * sw + k);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = _mm512_loadu_ps(x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
  if (k < kn) {
    const __mmask16 mask = simd::mask16(kn - k);
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = simd::masked_load_ps(mask, w + j * sw + k);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = simd::masked_load_ps(mask, x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm512_store_ps(st + (m * ld + j) * 16, acc[m][j]);
  }
}

TileFn tile_avx512_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_avx512<MR, NR>; };
  if (mr == 4) return gemm::tile_of<TileFn, 4>(nr, std::make_integer_sequence<int, 4>(), make);
  if (mr == 2) return gemm::tile_of<TileFn, 2>(nr, std::make_integer_sequence<int, 8>(), make);
  return gemm::tile_of<TileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}

// 4 x 4 tiles: 16 accumulators + 4 w vectors + 1 x vector of the 32 ZMM registers; K steps of
// 4096 for them (16 rows of x: 256 KiB, in L2), so each weight row is one long stream (measured
// on Zen 4 at M = 16: 25% faster than steps of 256, whose 1 KiB pieces of 32 rows the memory
// system fetched poorly).
constexpr F32Tiles kTilesAvx512 = {16, 8, 4, 4, 4096, 2, 8, tile_avx512_for};
#endif

// matmul.f32's tiles at the selected level: the f32 FMA tiles need nothing beyond AVX-512 F.
const F32Tiles& select_tiles() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return kTilesAvx512;
    case kIsaAvx2:
      return kTilesAvx2;
    default:
      break;
  }
#endif
  return kTilesScalar;
}

using F32Rows = gemm::F32ActivationRows<float, F32Tiles>;

}  // namespace

void gemm_f32(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
              int64_t k) {
  gemm::run(F32Rows{select_tiles(), x, sx}, w, sw, y, sy, m, n, k);
}

namespace {

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = out; one row of x / out per index
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t w_stride = 0;
  const float* x = nullptr;
  const float* w = nullptr;
  float* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 1, err) || !check_tensor(w, kName, "w", SK_DTYPE_F32, 2, err) ||
      !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err)) {
    return false;
  }
  if (!plan_linear_rows(x, w, out, kName, "x", &p->rows, err)) return false;
  p->m = p->rows.numel;
  p->k = x.shape[x.rank - 1];
  p->n = w.shape[0];
  p->w_stride = w.stride[0];
  p->x = static_cast<const float*>(x.data);
  p->w = static_cast<const float*>(w.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

}  // namespace

int32_t matmul_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end) return SK_OK;
  const int64_t sx = p.rows.inner_stride(0);
  const int64_t sy = p.rows.inner_stride(1);
  if (p.k == 0) {
    // Empty dot products; x and w may then have no storage at all, so do not touch them.
    zero_linear_rows(p.rows, p.out, r);
    return SK_OK;
  }
  const F32Tiles& tiles = select_tiles();
  for_each_run(p.rows, 0, p.m, [&](const int64_t* off, int64_t len) {
    gemm::run(F32Rows{tiles, p.x + off[0], sx}, p.w + r.begin * p.w_stride, p.w_stride, p.out + off[1] + r.begin, sy,
              len, r.end - r.begin, p.k);
  });
  return SK_OK;
}

// Warms this core's weight slice (prefetch_weight_slice). Touches weights only.
int32_t matmul_f32_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  constexpr int64_t kElem = sizeof(float);
  if (r.begin < r.end)
    prefetch_weight_slice(p.w + r.begin * p.w_stride, p.w_stride * kElem, r.end - r.begin, p.k * kElem, core);
  return SK_OK;
}

int32_t matmul_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                          int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.n, core_id, num_cores, kNSplitAlign);
  RangeList list(ranges, capacity);
  add_linear_access(list, p.rows, p.k, sizeof(float), kOpX, p.w_stride, sizeof(float), kOpW, kOpOut, r);
  return list.finish();
}

}  // namespace sk::kernels
