// batched_matmul.f32: y[h] = x[h] · w[h]ᵀ per batch entry (head) h, with
//   x [Hb, M, K], w [Hb, N, K] (each w[h] in the PyTorch Linear layout)  ->  y [Hb, M, N].
// The MLA absorbed projections are per-head matmuls of this shape: q_nope [H, T, Dnope] with
// W_UK [H, R, Dnope] gives q_latent [H, T, R], and the latent output [H, T, R] with
// W_UV [H, Dv, R] gives the per-head values [H, T, Dv].
//
// Cores split the (h, n) rows of w in chunks of 8 rows, so each core streams its own slice of
// the weights (decode is weight-bandwidth bound) and writes columns of y no other core writes.
//
// Determinism: every y[h][m][n] is one dot product accumulated in `lanes` partial sums, where
// lane l sums x[k] * w[k] for k = l (mod lanes) in increasing k with one FMA per step (a ragged
// end of K adds masked zeros), followed by the fixed tree of simd::hsum_lanes. Register tiles
// only change which dot products advance together, so the result depends on (x row, w row, K,
// ISA) only: not on M, N, Hb, the core split or alignment.
#include <algorithm>

#include "kernels/attention_core.h"
#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "batched_matmul.f32";
enum { kOpX = 0, kOpW = 1, kOpOut = 2 };

constexpr int64_t kRowAlign = 8;  // split granularity of the (h, n) rows of w
constexpr int kMr = 2;            // register tile: kMr x rows by kNr w rows
constexpr int kNr = 4;

// y[m * sy + n] = x row m . w row n for m < M, n < N.
using GemmFn = void (*)(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t m,
                        int64_t n, int64_t k);

// The fallback accumulates in double: it is the slow path anyway, and the most accurate level.
void gemm_scalar(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
                 int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t e = 0; e < k; ++e) acc += static_cast<double>(x[i * sx + e]) * w[j * sw + e];
      y[i * sy + j] = static_cast<float>(acc);
    }
  }
}

#if SK_KERNELS_X86
template <int MR, int NR>
SK_TARGET_AVX2 void tile_avx2(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t k) {
  __m256 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  int64_t e = 0;
  for (; e + 8 <= k; e += 8) {
    __m256 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_loadu_ps(w + j * sw + e);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * sx + e);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (e < k) {
    const __m256i mask = simd::mask8(k - e);
    __m256 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_maskload_ps(w + j * sw + e, mask);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_maskload_ps(x + i * sx + e, mask);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) y[i * sy + j] = simd::hsum8(acc[i][j]);
  }
}

template <int MR, int NR>
SK_TARGET_AVX512 void tile_avx512(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy,
                                  int64_t k) {
  __m512 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  int64_t e = 0;
  for (; e + 16 <= k; e += 16) {
    __m512 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_ps(w + j * sw + e);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * sx + e);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (e < k) {
    const __mmask16 mask = simd::mask16(k - e);
    __m512 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, w + j * sw + e);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * sx + e);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) y[i * sy + j] = simd::hsum16(acc[i][j]);
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);

// Walks N in tiles of kNr w rows (outer, so a tile's rows stay in cache across all of M) and M
// in tiles of kMr x rows.
void gemm_tiled(const TileFn (&tiles)[kMr][kNr], const float* x, int64_t sx, const float* w, int64_t sw, float* y,
                int64_t sy, int64_t m, int64_t n, int64_t k) {
  for (int64_t j = 0; j < n; j += kNr) {
    const int64_t nr = std::min<int64_t>(kNr, n - j);
    for (int64_t i = 0; i < m; i += kMr) {
      const int64_t mr = std::min<int64_t>(kMr, m - i);
      tiles[mr - 1][nr - 1](x + i * sx, sx, w + j * sw, sw, y + i * sy + j, sy, k);
    }
  }
}

void gemm_avx2(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
               int64_t k) {
  static constexpr TileFn kTiles[kMr][kNr] = {
      {tile_avx2<1, 1>, tile_avx2<1, 2>, tile_avx2<1, 3>, tile_avx2<1, 4>},
      {tile_avx2<2, 1>, tile_avx2<2, 2>, tile_avx2<2, 3>, tile_avx2<2, 4>},
  };
  gemm_tiled(kTiles, x, sx, w, sw, y, sy, m, n, k);
}

void gemm_avx512(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
                 int64_t k) {
  static constexpr TileFn kTiles[kMr][kNr] = {
      {tile_avx512<1, 1>, tile_avx512<1, 2>, tile_avx512<1, 3>, tile_avx512<1, 4>},
      {tile_avx512<2, 1>, tile_avx512<2, 2>, tile_avx512<2, 3>, tile_avx512<2, 4>},
  };
  gemm_tiled(kTiles, x, sx, w, sw, y, sy, m, n, k);
}
#endif

GemmFn select_gemm() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return gemm_avx512;
    case kIsaAvx2:
      return gemm_avx2;
    default:
      break;
  }
#endif
  return gemm_scalar;
}

struct Plan {
  int64_t hb = 0;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t xs[2] = {};
  int64_t ws[2] = {};
  int64_t ys[2] = {};
  const float* x = nullptr;
  const float* w = nullptr;
  float* y = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[kOpX];
  const sk_tensor_arg& w = args->inputs[kOpW];
  const sk_tensor_arg& y = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 3, err) || !check_tensor(w, kName, "w", SK_DTYPE_F32, 3, err) ||
      !check_tensor(y, kName, "out", SK_DTYPE_F32, 3, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  char s3[96];
  if (x.rank != 3 || w.rank != 3 || y.rank != 3 || w.shape[0] != x.shape[0] || w.shape[2] != x.shape[2] ||
      y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1] || y.shape[2] != w.shape[1]) {
    return invalid(err, "%s: shapes x %s, w %s, out %s are not [Hb, M, K], [Hb, N, K], [Hb, M, N]", kName,
                   format_shape(x, s1, sizeof s1), format_shape(w, s2, sizeof s2), format_shape(y, s3, sizeof s3));
  }
  if (!last_dim_contiguous(x) || !last_dim_contiguous(w) || !last_dim_contiguous(y)) {
    return invalid(err, "%s: the last dimension of x, w and out must have stride 1", kName);
  }
  // Every core reads all of its heads' x rows while others write their columns of out.
  if (attn::views_overlap(x, y) || attn::views_overlap(w, y)) {
    return invalid(err, "%s: out must not overlap x or w", kName);
  }
  p->hb = x.shape[0];
  p->m = x.shape[1];
  p->k = x.shape[2];
  p->n = w.shape[1];
  for (int d = 0; d < 2; ++d) {
    p->xs[d] = x.stride[d];
    p->ws[d] = w.stride[d];
    p->ys[d] = y.stride[d];
  }
  p->x = static_cast<const float*>(x.data);
  p->w = static_cast<const float*>(w.data);
  p->y = static_cast<float*>(y.data);
  return true;
}

// Calls fn(h, n_begin, n_end) for the (h, n) rows of w in [begin, end), one call per head.
template <class Fn>
void for_each_head(const Plan& p, sk_range r, Fn&& fn) {
  for (int64_t i = r.begin; i < r.end;) {
    const int64_t h = i / p.n;
    const int64_t n0 = i % p.n;
    const int64_t n1 = std::min(p.n, n0 + (r.end - i));
    fn(h, n0, n1);
    i += n1 - n0;
  }
}

}  // namespace

int32_t batched_matmul_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  if (p.m == 0) return SK_OK;
  const sk_range r = sk_split_range(p.hb * p.n, core->core_id, core->num_cores, kRowAlign);
  const GemmFn gemm = select_gemm();
  for_each_head(p, r, [&](int64_t h, int64_t n0, int64_t n1) {
    float* y = p.y + h * p.ys[0] + n0;
    if (p.k == 0) {
      // Empty dot products; x and w may then have no storage at all, so do not touch them.
      for (int64_t i = 0; i < p.m; ++i) std::fill(y + i * p.ys[1], y + i * p.ys[1] + (n1 - n0), 0.0f);
      return;
    }
    gemm(p.x + h * p.xs[0], p.xs[1], p.w + h * p.ws[0] + n0 * p.ws[1], p.ws[1], y, p.ys[1], p.m, n1 - n0, p.k);
  });
  return SK_OK;
}

int32_t batched_matmul_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                  sk_access_range* ranges, int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  RangeList list(ranges, capacity);
  if (p.m == 0) return list.finish();
  const sk_range r = sk_split_range(p.hb * p.n, core_id, num_cores, kRowAlign);
  constexpr int64_t kF = sizeof(float);
  // Inputs first, then outputs, as one ordered list per operand kind (adjacent ranges merge).
  if (p.k > 0) {
    for_each_head(p, r, [&](int64_t h, int64_t, int64_t) {
      for (int64_t i = 0; i < p.m; ++i) {
        const int64_t row = h * p.xs[0] + i * p.xs[1];
        list.add(kOpX, SK_ACCESS_READ, row * kF, (row + p.k) * kF);
      }
    });
    for_each_head(p, r, [&](int64_t h, int64_t n0, int64_t n1) {
      const int64_t first = h * p.ws[0] + n0 * p.ws[1];
      const int64_t last = h * p.ws[0] + (n1 - 1) * p.ws[1];
      list.add(kOpW, SK_ACCESS_READ, std::min(first, last) * kF, (std::max(first, last) + p.k) * kF);
    });
  }
  for_each_head(p, r, [&](int64_t h, int64_t n0, int64_t n1) {
    for (int64_t i = 0; i < p.m; ++i) {
      const int64_t row = h * p.ys[0] + i * p.ys[1];
      list.add(kOpOut, SK_ACCESS_WRITE, (row + n0) * kF, (row + n1) * kF);
    }
  });
  return list.finish();
}

}  // namespace sk::kernels
