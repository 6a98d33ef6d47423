// matmul.bf16: y[..., N] = x[..., K] · wᵀ with f32 x and bf16 w [N, K] (the PyTorch Linear
// layout), f32 accumulation. Cores split N in chunks of kNSplitAlign rows of w, as matmul.f32
// does: decode is weight-bandwidth bound, and bf16 halves the bytes per weight.
//
// Numerics, per ISA level (identical bits for identical inputs at one level):
//   scalar, avx2, avx512 without BF16: bf16 -> f32 is exact (a shift), so every y element is
//     the f32 dot product of matmul.f32 over the widened weights: `lanes` (8 / 8 / 16) partial
//     sums, lane l taking k = l (mod lanes) in increasing k (FMA except in scalar), then the
//     fixed tree of simd::hsum_lanes.
//   avx512 with AVX512_BF16: x is rounded to bf16 (nearest even, denormals to zero) and
//     VDPBF16PS accumulates pairs: lane l of 16 takes k = 2l, 2l + 1 (mod 32) in increasing k,
//     then hsum_lanes. Rounding x to bf16 costs up to 2^-9 relative per product, which is why
//     the reference tolerance of this kernel is wider than matmul.f32's (see reference.h).
// Tiles and K blocks only change which dot products advance together, never the operations
// inside one, so results do not depend on M, N, the core split or alignment.
#include <algorithm>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

#define SK_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))

namespace sk::kernels {
namespace {

constexpr const char* kName = "matmul.bf16";
enum { kOpX = 0, kOpW = 1, kOpOut = 2 };

// Same blocking as matmul.f32 (see matmul.cc); the x panel holds f32 copies (FMA paths) or bf16
// conversions (VDPBF16PS path) of an (kMBlock x kc) block of x.
constexpr int64_t kMBlock = 16;
constexpr int64_t kNBlock = 32;
constexpr int64_t kKBlock = 256;
// GEMV on the bf16-converting path: K blocks long enough that the per-block conversion of x is
// noise next to streaming 32 weight rows of the block.
constexpr int64_t kGemvKBlock = 2048;
constexpr int kMaxLanes = 16;
constexpr int64_t kPanelBytes = 16384;
static_assert(kMBlock * kKBlock * sizeof(float) <= kPanelBytes, "f32 panel");
static_assert(kMBlock * kKBlock * 2 <= kPanelBytes && kGemvKBlock * 2 <= kPanelBytes, "bf16 panel");

// Accumulates (mr x nr) dot products of x rows [0, mr) (stride sx elements of the panel type)
// and w rows [0, nr) over k in [0, kn) into their lane partial sums at st[(m * ld + j) * lanes].
using TileFn = void (*)(const void* x, int64_t sx, const uint16_t* w, int64_t sw, float* st, int64_t ld, int64_t kn);

struct Bf16Isa {
  int lanes;
  int gemv_nr;
  int mr;
  int nr;
  TileFn (*tile)(int mr, int nr);  // supports (1|mr) x (1|nr|gemv_nr)
  // Converts rows [0, mb) x [0, kn) of x into a bf16 panel with row stride ld (a multiple of 32,
  // zero-padded); null for the paths that read f32 x.
  void (*pack_bf16)(const float* x, int64_t sx, int64_t mb, int64_t kn, uint16_t* panel, int64_t ld);
};

inline float bf16_bits_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <int MR, int NR>
void tile_scalar(const void* xp, int64_t sx, const uint16_t* w, int64_t sw, float* st, int64_t ld, int64_t kn) {
  constexpr int kLanes = 8;
  const float* x = static_cast<const float*>(xp);
  float acc[MR][NR][kLanes];
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) {
      for (int l = 0; l < kLanes; ++l) acc[m][j][l] = st[(m * ld + j) * kLanes + l];
    }
  }
  for (int64_t k = 0; k < kn; k += kLanes) {
    const int len = kn - k < kLanes ? static_cast<int>(kn - k) : kLanes;
    for (int j = 0; j < NR; ++j) {
      float wv[kLanes];
      for (int l = 0; l < len; ++l) wv[l] = bf16_bits_to_f32(w[j * sw + k + l]);
      for (int m = 0; m < MR; ++m) {
        for (int l = 0; l < len; ++l) acc[m][j][l] += x[m * sx + k + l] * wv[l];
      }
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

constexpr Bf16Isa kScalar = {8, 4, 2, 2, tile_scalar_for, nullptr};

#if SK_KERNELS_X86
// See matmul.cc: extra weight streams for the multi-row tiles. Prefetches never fault.
inline void prefetch_ahead(const uint16_t* w_row_k, int64_t sw, int nr) {
  _mm_prefetch(reinterpret_cast<const char*>(w_row_k + 2 * nr * sw), _MM_HINT_T0);
}

// 8 bf16 -> 8 f32: the bf16 bits are the upper half of the f32 bits.
SK_TARGET_AVX2 inline __m256 widen8(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The last n < 8 weights of a row: AVX2 has no 16-bit masked load, so go through a zeroed copy
// (read once per dot product).
SK_TARGET_AVX2 inline __m256 widen8_tail(const uint16_t* p, int64_t n) {
  alignas(16) uint16_t tmp[8] = {};
  for (int64_t i = 0; i < n; ++i) tmp[i] = p[i];
  return widen8(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
}

template <int MR, int NR>
SK_TARGET_AVX2 void tile_avx2(const void* xp, int64_t sx, const uint16_t* w, int64_t sw, float* st, int64_t ld,
                              int64_t kn) {
  const float* x = static_cast<const float*>(xp);
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
      wv[j] = widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j * sw + k)));
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
    for (int j = 0; j < NR; ++j) wv[j] = widen8_tail(w + j * sw + k, kn - k);
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

constexpr Bf16Isa kAvx2 = {8, 8, 4, 2, tile_avx2_for, nullptr};

// ---- AVX-512 without BF16: tile_avx2 with 16 lanes (the same structure, line by line) ----

SK_TARGET_AVX512 inline __m512 widen16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <int MR, int NR>
SK_TARGET_AVX512 void tile_avx512(const void* xp, int64_t sx, const uint16_t* w, int64_t sw, float* st, int64_t ld,
                                  int64_t kn) {
  const float* x = static_cast<const float*>(xp);
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
      wv[j] = widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j * sw + k)));
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
    for (int j = 0; j < NR; ++j) wv[j] = widen16(_mm256_maskz_loadu_epi16(mask, w + j * sw + k));
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

constexpr Bf16Isa kAvx512 = {16, 8, 4, 4, tile_avx512_for, nullptr};

// ---- AVX-512 BF16: x converted to bf16 once per panel, VDPBF16PS on 32 k per step ----

// _mm512_cvtne2ps_pbh(a, b) puts b in the low 16 words and a in the high 16.
SK_TARGET_AVX512_BF16 void pack_bf16_avx512(const float* x, int64_t sx, int64_t mb, int64_t kn, uint16_t* panel,
                                            int64_t ld) {
  for (int64_t m = 0; m < mb; ++m) {
    const float* row = x + m * sx;
    for (int64_t k = 0; k < ld; k += 32) {
      const int64_t lo_n = std::clamp<int64_t>(kn - k, 0, 16);
      const int64_t hi_n = std::clamp<int64_t>(kn - k - 16, 0, 16);
      // Masked-off lanes are neither read nor faulted on, so the row end needs no care.
      const __m512 lo = _mm512_maskz_loadu_ps(simd::mask16(lo_n), row + std::min(k, kn));
      const __m512 hi = _mm512_maskz_loadu_ps(simd::mask16(hi_n), row + std::min(k + 16, kn));
      const __m512bh both = _mm512_cvtne2ps_pbh(hi, lo);
      std::memcpy(panel + m * ld + k, &both, sizeof both);
    }
  }
}

template <int MR, int NR>
SK_TARGET_AVX512_BF16 void tile_avx512_bf16(const void* xp, int64_t sx, const uint16_t* w, int64_t sw, float* st,
                                            int64_t ld, int64_t kn) {
  const uint16_t* x = static_cast<const uint16_t*>(xp);  // zero-padded to a multiple of 32
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_load_ps(st + (m * ld + j) * 16);
  }
  int64_t k = 0;
  for (; k + 32 <= kn; k += 32) {
    __m512bh wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      if constexpr (MR > 1) prefetch_ahead(w + j * sw + k, sw, NR);
      const __m512i raw = _mm512_loadu_si512(w + j * sw + k);
      std::memcpy(&wv[j], &raw, sizeof raw);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xraw = _mm512_loadu_si512(x + m * sx + k);
      __m512bh xv;
      std::memcpy(&xv, &xraw, sizeof xraw);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_dpbf16_ps(acc[m][j], xv, wv[j]);
    }
  }
  if (k < kn) {
    // Zeroed weights past K: the padded x there is zero too, so those pairs add +0 products.
    const auto mask = static_cast<__mmask32>((uint64_t{1} << (kn - k)) - 1u);
    __m512bh wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const __m512i raw = _mm512_maskz_loadu_epi16(mask, w + j * sw + k);
      std::memcpy(&wv[j], &raw, sizeof raw);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xraw = _mm512_loadu_si512(x + m * sx + k);
      __m512bh xv;
      std::memcpy(&xv, &xraw, sizeof xraw);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_dpbf16_ps(acc[m][j], xv, wv[j]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm512_store_ps(st + (m * ld + j) * 16, acc[m][j]);
  }
}

TileFn tile_avx512_bf16_for(int mr, int nr) {
  if (mr == 4) return nr == 4 ? tile_avx512_bf16<4, 4> : tile_avx512_bf16<4, 1>;
  if (nr == 8) return tile_avx512_bf16<1, 8>;
  return nr == 4 ? tile_avx512_bf16<1, 4> : tile_avx512_bf16<1, 1>;
}

constexpr Bf16Isa kAvx512Bf16 = {16, 8, 4, 4, tile_avx512_bf16_for, pack_bf16_avx512};
#endif

const Bf16Isa& select_isa() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return cpu_has_avx512_bf16() ? kAvx512Bf16 : kAvx512;
    case kIsaAvx2:
      return kAvx2;
    default:
      break;
  }
#endif
  return kScalar;
}

void finish_block(const Bf16Isa& g, const float* state, float* y, int64_t sy, int64_t mb, int64_t nb) {
  for (int64_t m = 0; m < mb; ++m) {
    for (int64_t j = 0; j < nb; ++j) y[m * sy + j] = simd::hsum_lanes(state + (m * kNBlock + j) * g.lanes, g.lanes);
  }
}

void gemm(const Bf16Isa& g, const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t M,
          int64_t N, int64_t K) {
  // f32 paths: up to one register tile of rows x is read in place over all of K (a single pass
  // streams every weight tile once, like GEMV); more rows are packed per K block to keep them
  // off the 4 KiB-aliasing L1 sets. The bf16 path always packs (that is the conversion).
  const bool convert = g.pack_bf16 != nullptr;
  const bool block_k = convert || M > g.mr;
  const int64_t kc = !block_k ? K : (M == 1 ? kGemvKBlock : kKBlock);
  const int nr_tile = M == 1 ? g.gemv_nr : g.nr;
  alignas(64) float state[kMBlock * kNBlock * kMaxLanes];
  // f32 panel; the bf16 path stores its words here through memcpy / unaligned vector stores.
  alignas(64) float panel[kPanelBytes / sizeof(float)];
  for (int64_t m0 = 0; m0 < M; m0 += kMBlock) {
    const int64_t mb = std::min(kMBlock, M - m0);
    for (int64_t n0 = 0; n0 < N; n0 += kNBlock) {
      const int64_t nb = std::min(kNBlock, N - n0);
      std::fill(state, state + mb * kNBlock * g.lanes, 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t kn = std::min(kc, K - k0);
        const float* xb = x + m0 * sx + k0;
        const void* xp = xb;
        int64_t xs = sx;
        if (convert) {
          xs = (kn + 31) / 32 * 32;
          g.pack_bf16(xb, sx, mb, kn, reinterpret_cast<uint16_t*>(panel), xs);
          xp = panel;
        } else if (block_k) {
          for (int64_t m = 0; m < mb; ++m) std::copy(xb + m * sx, xb + m * sx + kn, panel + m * kKBlock);
          xp = panel;
          xs = kKBlock;
        }
        const int64_t x_elem = convert ? 2 : 4;
        for (int64_t n = 0; n < nb;) {
          const int nr = nb - n >= nr_tile ? nr_tile : 1;
          for (int64_t m = 0; m < mb;) {
            const int mr = mb - m >= g.mr ? g.mr : 1;
            const void* xt = static_cast<const unsigned char*>(xp) + m * xs * x_elem;
            g.tile(mr, nr)(xt, xs, w + (n0 + n) * sw + k0, sw, state + (m * kNBlock + n) * g.lanes, kNBlock, kn);
            m += mr;
          }
          n += nr;
        }
      }
      finish_block(g, state, y + m0 * sy + n0, sy, mb, nb);
    }
  }
}

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = out
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t w_stride = 0;
  const float* x = nullptr;
  const uint16_t* w = nullptr;
  float* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 1, err) || !check_tensor(w, kName, "w", SK_DTYPE_BF16, 2, err) ||
      !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err) ||
      !plan_linear_rows(x, w, out, kName, "x", &p->rows, err)) {
    return false;
  }
  p->m = p->rows.numel;
  p->k = x.shape[x.rank - 1];
  p->n = w.shape[0];
  p->w_stride = w.stride[0];
  p->x = static_cast<const float*>(x.data);
  p->w = static_cast<const uint16_t*>(w.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

}  // namespace

void gemm_bf16(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
               int64_t k) {
  gemm(select_isa(), x, sx, w, sw, y, sy, m, n, k);
}

int32_t matmul_bf16_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end) return SK_OK;
  if (p.k == 0) {
    // Empty dot products; x and w may then have no storage at all.
    zero_linear_rows(p.rows, p.out, r);
    return SK_OK;
  }
  const Bf16Isa& g = select_isa();
  const int64_t sx = p.rows.inner_stride(0);
  const int64_t sy = p.rows.inner_stride(1);
  for_each_run(p.rows, 0, p.m, [&](const int64_t* off, int64_t len) {
    gemm(g, p.x + off[0], sx, p.w + r.begin * p.w_stride, p.w_stride, p.out + off[1] + r.begin, sy, len,
         r.end - r.begin, p.k);
  });
  return SK_OK;
}

// Warms the first lines of the weight rows this core streams first; touches weights only.
int32_t matmul_bf16_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end || p.k == 0) return SK_OK;
  prefetch_weight_rows(p.w + r.begin * p.w_stride, p.w_stride * 2, std::min<int64_t>(8, r.end - r.begin),
                       std::min<int64_t>(2048, p.k * 2));
  return SK_OK;
}

int32_t matmul_bf16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) return -SK_ERR_INVALID_ARGUMENT;
  RangeList list(ranges, capacity);
  add_linear_access(list, p.rows, p.k, sizeof(float), kOpX, p.w_stride, 2, kOpW, kOpOut,
                    sk_split_range(p.n, core_id, num_cores, kNSplitAlign));
  return list.finish();
}

}  // namespace sk::kernels
