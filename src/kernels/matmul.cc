// matmul.f32: y[..., N] = x[..., K] · wᵀ with w [N, K] row-major (the PyTorch Linear layout).
//
// Cores split N (rows of w) in chunks of 8 rows, so each core streams only its own slice of the
// weights, which is what decode (M = 1, weight-bandwidth bound) needs.
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
#include "kernels/simd.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "matmul.f32";
enum { kOpX = 0, kOpW = 1, kOpOut = 2 };

// Cache blocking for M > 1: a pass keeps the partial sums of kMBlock x rows by kNBlock w rows
// and walks K in kKBlock steps. The x block of a step is packed into a dense panel: with the
// usual power-of-two K, x rows sit a multiple of 4 KiB apart and would all compete for the
// same few L1 sets. Each w vector loaded is then reused across the x rows of a register tile.
constexpr int64_t kMBlock = 16;
constexpr int64_t kNBlock = 32;
constexpr int64_t kKBlock = 256;  // a multiple of every lane count
constexpr int kMaxLanes = 16;

// Accumulates the (mr x nr) dot products of x rows [0, mr) and w rows [0, nr) over
// k in [0, kn) into their lane partial sums at st[(m * ld + j) * lanes].
using TileFn = void (*)(const float* x, int64_t sx, const float* w, int64_t sw, float* st, int64_t ld, int64_t kn);

// Writes y[m * sy + j] = the lane sum of each (m, j) accumulator of a block (see finish_block).
using FinishFn = void (*)(const float* state, float* y, int64_t sy, int64_t mb, int64_t nb);

struct GemmIsa {
  int lanes;
  int gemv_nr;  // register tile (1 x gemv_nr) when M == 1
  int mr;       // register tile (mr x nr) when M > 1
  int nr;
  TileFn (*tile)(int mr, int nr);  // supports (1|mr) x (1|nr|gemv_nr)
  FinishFn finish;
};

// Lane sums of one block's accumulators. All three use the fold tree of simd::hsum_lanes, so
// the ISA-specific ones only move the reduction into registers (same bits as the scalar one for
// the same lane count).
void finish_scalar(const float* state, float* y, int64_t sy, int64_t mb, int64_t nb) {
  for (int64_t m = 0; m < mb; ++m)
    for (int64_t j = 0; j < nb; ++j) y[m * sy + j] = simd::hsum_lanes(state + (m * kNBlock + j) * 8, 8);
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 void finish_avx2(const float* state, float* y, int64_t sy, int64_t mb, int64_t nb) {
  for (int64_t m = 0; m < mb; ++m)
    for (int64_t j = 0; j < nb; ++j) y[m * sy + j] = simd::hsum8(_mm256_load_ps(state + (m * kNBlock + j) * 8));
}

SK_TARGET_AVX512 void finish_avx512(const float* state, float* y, int64_t sy, int64_t mb, int64_t nb) {
  for (int64_t m = 0; m < mb; ++m)
    for (int64_t j = 0; j < nb; ++j) y[m * sy + j] = simd::hsum16(_mm512_load_ps(state + (m * kNBlock + j) * 16));
}
#endif

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
  if (mr == 2) return nr == 2 ? tile_scalar<2, 2> : tile_scalar<2, 1>;
  if (nr == 4) return tile_scalar<1, 4>;
  return nr == 2 ? tile_scalar<1, 2> : tile_scalar<1, 1>;
}

constexpr GemmIsa kGemmScalar = {8, 4, 2, 2, tile_scalar_for, finish_scalar};

#if SK_KERNELS_X86
// A multi-row tile reads only NR weight rows at a time, too few streams to keep the memory
// system busy (GEMV's 8 rows are enough on their own). Touching the rows of the tile after
// next at the same k adds streams without extra instructions in the FMA chains. Prefetching
// past the slice or the tensor is harmless: prefetches never fault.
inline void prefetch_ahead(const float* w_row_k, int64_t sw, int nr) {
  _mm_prefetch(reinterpret_cast<const char*>(w_row_k + 2 * nr * sw), _MM_HINT_T0);
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
  for (; k + 8 <= kn; k += 8) {
    __m256 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      if constexpr (MR > 1) prefetch_ahead(w + j * sw + k, sw, NR);
      wv[j] = _mm256_loadu_ps(w + j * sw + k);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 xv = _mm256_loadu_ps(x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
  if (k < kn) {
    const __m256i mask = simd::mask8(kn - k);
    __m256 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_maskload_ps(w + j * sw + k, mask);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 xv = _mm256_maskload_ps(x + m * sx + k, mask);
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
  if (mr == 4) return nr == 2 ? tile_avx2<4, 2> : tile_avx2<4, 1>;
  if (nr == 8) return tile_avx2<1, 8>;
  return nr == 2 ? tile_avx2<1, 2> : tile_avx2<1, 1>;
}

// 4 x 2 tiles: 8 accumulators + 2 w vectors + 1 x vector fit the 16 YMM registers.
constexpr GemmIsa kGemmAvx2 = {8, 8, 4, 2, tile_avx2_for, finish_avx2};

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
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      if constexpr (MR > 1) prefetch_ahead(w + j * sw + k, sw, NR);
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
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, w + j * sw + k);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * sx + k);
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
  if (mr == 4) return nr == 4 ? tile_avx512<4, 4> : tile_avx512<4, 1>;
  if (nr == 8) return tile_avx512<1, 8>;
  return nr == 4 ? tile_avx512<1, 4> : tile_avx512<1, 1>;
}

// 4 x 4 tiles: 16 accumulators + 4 w vectors + 1 x vector of the 32 ZMM registers.
constexpr GemmIsa kGemmAvx512 = {16, 8, 4, 4, tile_avx512_for, finish_avx512};
#endif

const GemmIsa& select_gemm() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return kGemmAvx512;
    case kIsaAvx2:
      return kGemmAvx2;
    default:
      break;
  }
#endif
  return kGemmScalar;
}

void finish_block(const GemmIsa& g, const float* state, float* y, int64_t sy, int64_t mb, int64_t nb) {
  g.finish(state, y, sy, mb, nb);
}

// GEMV streams every weight once, so K is not blocked: the x row stays in L1 by itself, and
// a 1 x gemv_nr tile keeps gemv_nr weight rows in flight for the memory system.
void gemv(const GemmIsa& g, const float* x, const float* w, int64_t sw, float* y, int64_t n_rows, int64_t k) {
  alignas(64) float state[kNBlock * kMaxLanes];
  for (int64_t n0 = 0; n0 < n_rows; n0 += kNBlock) {
    const int64_t nb = std::min(kNBlock, n_rows - n0);
    std::fill(state, state + nb * g.lanes, 0.0f);
    for (int64_t n = 0; n < nb;) {
      const int nr = nb - n >= g.gemv_nr ? g.gemv_nr : 1;
      g.tile(1, nr)(x, 0, w + (n0 + n) * sw, sw, state + n * g.lanes, kNBlock, k);
      n += nr;
    }
    finish_block(g, state, y + n0, 0, 1, nb);
  }
}

// y[m * sy + n] for m < M, n < N from x rows (stride sx) and w rows (stride sw).
void gemm(const GemmIsa& g, const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t M,
          int64_t N, int64_t K) {
  if (M == 1) {
    gemv(g, x, w, sw, y, N, K);
    return;
  }
  // Up to one register tile of rows, x is read straight from where it is and K is not blocked:
  // a single pass over each weight tile then streams the weights like GEMV does.
  const bool block_k = M > g.mr;
  const int64_t kc = block_k ? kKBlock : K;
  alignas(64) float state[kMBlock * kNBlock * kMaxLanes];
  alignas(64) float panel[kMBlock * kKBlock];
  for (int64_t m0 = 0; m0 < M; m0 += kMBlock) {
    const int64_t mb = std::min(kMBlock, M - m0);
    for (int64_t n0 = 0; n0 < N; n0 += kNBlock) {
      const int64_t nb = std::min(kNBlock, N - n0);
      std::fill(state, state + mb * kNBlock * g.lanes, 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t kn = std::min(kc, K - k0);
        const float* xb = x + m0 * sx + k0;
        int64_t xs = sx;
        if (block_k) {
          for (int64_t m = 0; m < mb; ++m) {
            std::copy(xb + m * sx, xb + m * sx + kn, panel + m * kKBlock);
          }
          xb = panel;
          xs = kKBlock;
        }
        for (int64_t n = 0; n < nb;) {
          const int nr = nb - n >= g.nr ? g.nr : 1;
          for (int64_t m = 0; m < mb;) {
            const int mr = mb - m >= g.mr ? g.mr : 1;
            g.tile(mr, nr)(xb + m * xs, xs, w + (n0 + n) * sw + k0, sw, state + (m * kNBlock + n) * g.lanes, kNBlock,
                           kn);
            m += mr;
          }
          n += nr;
        }
      }
      finish_block(g, state, y + m0 * sy + n0, sy, mb, nb);
    }
  }
}

}  // namespace

void gemm_f32(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
              int64_t k) {
  gemm(select_gemm(), x, sx, w, sw, y, sy, m, n, k);
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
  const GemmIsa& g = select_gemm();
  for_each_run(p.rows, 0, p.m, [&](const int64_t* off, int64_t len) {
    gemm(g, p.x + off[0], sx, p.w + r.begin * p.w_stride, p.w_stride, p.out + off[1] + r.begin, sy, len,
         r.end - r.begin, p.k);
  });
  return SK_OK;
}

// Warms the first lines of the rows this core streams first (a GEMV tile reads 8 rows side by
// side), so that the first tile does not start on cold misses. Touches weights only.
int32_t matmul_f32_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  constexpr int64_t kRows = 8;
  constexpr int64_t kBytesPerRow = 2048;
  if (r.begin < r.end) {
    prefetch_weight_rows(p.w + r.begin * p.w_stride, p.w_stride * static_cast<int64_t>(sizeof(float)),
                         std::min(kRows, r.end - r.begin),
                         std::min<int64_t>(kBytesPerRow, p.k * static_cast<int64_t>(sizeof(float))));
  }
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
