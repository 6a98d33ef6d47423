// argmax.f32 and sample.f32: token selection from logits [B, V], one row per core at a time.
//
// sample.f32 gives the same token on every ISA and in the reference, so every operation on the
// way is specified (docs/kernels_moe.md, "sample.f32 arithmetic"): a weight is an integer,
// round(2^30 * 2^t) with 2^t from fixed f32 operations (one rounding each, FMAs in the
// polynomial), and every sum of weights is an exact integer sum. No result depends on the order
// of additions, so the SIMD paths sum in any order and sum a block, a bucket or a set in bulk.
// The uniform number is Philox4x32-10 keyed by (seed, step, row).
//
// Selection (top-k, nucleus) ranks logits by value, ties to the lower index, NaN last (see
// moe_topk.h). The nucleus is the shortest prefix of that ranking whose weight reaches
// top_p * S; the draw walks its members in index order. Over the whole vocabulary that needs no
// sort: one pass over V computes S, per 1024-logit block the weight of a hi set inside the
// nucleus, and gathers the band of tokens between two thresholds (guessed from a sampled
// profile, checked by the exact sums) in which the nucleus ends; exact sums above thresholds
// that split the band narrow it down to a few tokens, which are sorted.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/moe_common.h"
#include "kernels/moe_topk.h"
#include "kernels/sampling_exp2.h"
#include "kernels/simd.h"
#include "superkernel/attrs_moe.h"

namespace sk::kernels {
namespace {

// ---------------------------------------------------------------------------------------------
// The specified arithmetic

constexpr int kWeightBits = 30;
constexpr uint32_t kWeightOne = 1u << kWeightBits;  // the weight of the largest logit
constexpr float kMinT = -64.0f;                     // t is clamped here: weight 0
constexpr int64_t kBlock = 1024;                    // logits per block of the block maxima and block weight sums
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// a = log2(e) / temperature, rounded to float: t = (l - lmax) * a.
float weight_scale(float temperature) {
  return static_cast<float>(1.4426950408889634 / static_cast<double>(temperature));
}

// The weight of logit l when the largest logit is lmax (> -inf): 0 for NaN, 2^30 for lmax,
// else round(p(t - k) * 2^(k + 30)) with t = max((l - lmax) * a, -64) and k = t rounded to the
// nearest integer (ties to even), p the polynomial of sampling_exp2.h. Every operation is one
// IEEE f32 operation (the scaling by 2^(k + 30) is exact), so the SIMD forms below, which do the
// same lane by lane, give the same integer.
uint32_t weight_of(float l, float lmax, float a) {
  if (l != l) return 0;
  if (l == lmax) return kWeightOne;
  float t = (l - lmax) * a;
  if (!(t >= kMinT)) t = kMinT;  // NaN too, as the vector max() does
  const float k = std::nearbyint(t);
  const float w = std::ldexp(approx_exp2_poly(t - k), static_cast<int>(k) + kWeightBits);
  return static_cast<uint32_t>(std::nearbyint(w));
}

// Philox4x32-10 (Salmon et al., SC'11): counter (c0..c3), key (k0, k1).
void philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = static_cast<uint32_t>(p1);
    c[2] = n2;
    c[3] = static_cast<uint32_t>(p0);
  }
}

// 53 random bits, a pure function of (seed, step, row): u = u53 / 2^53 is uniform in [0, 1).
uint64_t uniform53(uint64_t seed, int64_t step, int64_t row) {
  const auto st = static_cast<uint64_t>(step);
  uint32_t c[4] = {static_cast<uint32_t>(st), static_cast<uint32_t>(st >> 32), static_cast<uint32_t>(row), 0u};
  philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return (static_cast<uint64_t>(c[0]) << 21) | (c[1] >> 11);
}

__extension__ typedef unsigned __int128 Uint128;  // GCC and Clang; -Wpedantic needs the marker

// floor(u53 * total / 2^53): the draw's point in [0, total), exact.
uint64_t draw_point(uint64_t u53, uint64_t total) {
  return static_cast<uint64_t>((static_cast<Uint128>(u53) * total) >> 53);
}

// tau = top_p * S in double; a running sum c reaches it when (double)c >= tau.
double nucleus_target(float top_p, uint64_t total) { return static_cast<double>(top_p) * static_cast<double>(total); }
bool reaches(uint64_t c, double tau) { return static_cast<double>(c) >= tau; }

// The profile (profile_band): kSampleRun logits of every kSampleEvery, their weights binned by
// bin_of.
constexpr int64_t kSampleEvery = 512;
constexpr int64_t kSampleRun = 16;
constexpr int kBinsPerOctave = 16;
constexpr int kBins = 31 * kBinsPerOctave;
constexpr uint32_t kBinZero = kBins;          // profile_bins: a sample of weight 0
constexpr uint32_t kBinBlockMax = kBins + 1;  // a sample equal to its block's largest logit
// A weight's bin in sixteenths of an octave below 2^30: bin 16 o + e holds [2^(30 - o) (1 + (15 -
// e) / 16), 2^(30 - o) (1 + (16 - e) / 16)), bin 0 up to 2^31. Larger weights, lower bins.
inline int bin_of(uint32_t w) {
  const int lz = __builtin_clz(w);  // w > 0; w < 2^31
  const auto mant = static_cast<int>((static_cast<uint64_t>(w) << (lz + 1) >> 28) & 15);
  return (lz - 1) * kBinsPerOctave + (kBinsPerOctave - 1 - mant);
}

// ---------------------------------------------------------------------------------------------
// The passes over a row, at each register width

// What the pass over all V computes besides the total (see pass_scalar).
struct PassSpec {
  float lam_hi;            // the hi set: l >= lam_hi (NaN: empty)
  float lam_lo;            // the band: lam_lo <= l, outside the hi set, weight > 0 (NaN: empty)
  uint64_t* block_all;     // per kBlock block, the sum of all weights
  uint64_t* block_hi;      // per block, the sum of the hi set's weights
  uint32_t* band_idx;      // the band's indices in increasing order (room for V + 16)
  int64_t* band_start;     // per block, the band's size before it (and the whole size at the end)
  const float* block_max;  // per block, its largest logit (block_maxima)
};

// Whether the token (l, i) ranks at or before the nucleus's last member (lb, ib).
inline bool member(float l, int64_t i, float lb, int64_t ib) { return l > lb || (l == lb && i <= ib); }

// A set of tokens in index order: logits, indices, weights.
struct Tokens {
  float* val;
  uint32_t* idx;
  uint32_t* w;
  int64_t n;
};

constexpr int kSplits = 8;  // thresholds per step of the boundary search

struct Isa {
  // The largest non-NaN logit of l[0, n) (-inf when there is none) and each block's in block_max.
  float (*block_maxima)(const float* l, int64_t n, float* block_max);
  // Fills the PassSpec outputs for blocks [b0, b1) of the row l[0, n) (band indices from 0, the
  // arrays indexed by block); returns the band's size.
  int64_t (*pass)(const float* l, int64_t n, int64_t b0, int64_t b1, float lmax, float a, const PassSpec& spec);
  // w[i] = weight_of(x[i]) for i < n.
  void (*weights)(const float* x, int64_t n, float lmax, float a, uint32_t* w);
  // q[j] = bin_of(w[j]) for the profile's samples x[0, n) (runs of kSampleRun from consecutive
  // blocks, two runs a block, block_max[b] the largest logit of run j's block b), kBinZero for a
  // weight of 0 and kBinBlockMax for a sample equal to its block's largest logit.
  void (*profile_bins)(const float* x, const uint32_t* w, int64_t n, const float* block_max, uint32_t* q);
  // out[j] = the sum of the weights of the tokens with val >= thr[j], for j < kSplits.
  void (*masses_above)(const Tokens& t, const float* thr, uint64_t* out);
  // The tokens with lo <= val < hi, in order, into out (room for t.n + 16); returns their count.
  int64_t (*select_range)(const Tokens& t, float lo, float hi, Tokens& out);
  // The weight of the tokens (an index range [begin, end) of t) ranking at or before (lb, ib).
  uint64_t (*member_mass)(const Tokens& t, int64_t begin, int64_t end, float lb, uint32_t ib);
};

// Band tokens in a block from which the SIMD passes store the next block's band indices from
// every vector, without a branch on an empty band. The branch costs nothing where the band is
// sparse (a peaked row), but on a flat row about half the vectors hold a band token and it
// mispredicts on them: on an Intel core (sk_bench_sample_cpu_time, one core) the flat row took
// 104 us with the branch and 62 without at AVX-512 (152 and 113 at AVX2), while the peaked rows
// took 9% (AVX2: 3%) longer without it. The threshold is an estimate, not a measured optimum: a
// branch mispredicted on 8 of a block's 64 vectors costs about what 64 compresses do.
constexpr int64_t kDenseBand = 8;

// Calls run(with_hi, with_band, every_vector), flags as std::bool_constant, for what block b may
// hold of the hi set and of the band: a block whose largest logit lies below either holds none of
// it (most blocks of a peaked row), and its pass skips that work. every_vector (only with the
// band) when the previous block held at least kDenseBand band tokens (`dense_band`). Always
// inlined, so that `run` (a lambda of the vector pass, with its accumulators) is inlined into that
// pass as well.
template <class Run>
__attribute__((always_inline)) inline void run_block_parts(const PassSpec& s, int64_t b, bool dense_band,
                                                           const Run& run) {
  const bool hi = s.block_max[b] >= s.lam_hi;
  const bool band = s.block_max[b] >= s.lam_lo;
  const auto with_band = [&](auto with_hi) __attribute__((always_inline)) {
    if (dense_band) {
      run(with_hi, std::true_type{}, std::true_type{});
    } else {
      run(with_hi, std::true_type{}, std::false_type{});
    }
  };
  if (hi && band) {
    with_band(std::true_type{});
  } else if (hi) {
    run(std::true_type{}, std::false_type{}, std::false_type{});
  } else if (band) {
    with_band(std::false_type{});
  } else {
    run(std::false_type{}, std::false_type{}, std::false_type{});
  }
}

float block_maxima_scalar(const float* l, int64_t n, float* block_max) {
  float best = -kInf;
  for (int64_t b = 0; b * kBlock < n; ++b) {
    float m = -kInf;
    for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) m = l[i] > m ? l[i] : m;
    block_max[b] = m;
    best = std::max(best, m);
  }
  return best;
}

int64_t pass_scalar(const float* l, int64_t n, int64_t b0, int64_t b1, float lmax, float a, const PassSpec& s) {
  int64_t count = 0;
  for (int64_t b = b0; b < b1; ++b) {
    s.band_start[b] = count;
    uint64_t all = 0;
    uint64_t hi = 0;
    for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
      const uint32_t w = weight_of(l[i], lmax, a);
      all += w;
      if (l[i] >= s.lam_hi) {
        hi += w;
      } else if (l[i] >= s.lam_lo && w != 0) {
        s.band_idx[count++] = static_cast<uint32_t>(i);
      }
    }
    s.block_all[b] = all;
    s.block_hi[b] = hi;
  }
  s.band_start[b1] = count;
  return count;
}

void weights_scalar(const float* x, int64_t n, float lmax, float a, uint32_t* w) {
  for (int64_t i = 0; i < n; ++i) w[i] = weight_of(x[i], lmax, a);
}

constexpr int64_t kRunsPerBlock = kBlock / kSampleEvery;
static_assert(kBlock % kSampleEvery == 0 && kSampleRun <= kSampleEvery);

void profile_bins_scalar(const float* x, const uint32_t* w, int64_t n, const float* block_max, uint32_t* q) {
  for (int64_t j = 0; j < n; ++j) {
    const bool is_max = x[j] == block_max[j / kSampleRun / kRunsPerBlock];
    q[j] = is_max ? kBinBlockMax : w[j] == 0 ? kBinZero : static_cast<uint32_t>(bin_of(w[j]));
  }
}

void masses_above_scalar(const Tokens& t, const float* thr, uint64_t* out) {
  std::fill(out, out + kSplits, uint64_t{0});
  for (int64_t i = 0; i < t.n; ++i) {
    for (int j = 0; j < kSplits; ++j) out[j] += t.val[i] >= thr[j] ? t.w[i] : 0;
  }
}

int64_t select_range_scalar(const Tokens& t, float lo, float hi, Tokens& out) {
  int64_t m = 0;
  for (int64_t i = 0; i < t.n; ++i) {
    if (t.val[i] >= lo && t.val[i] < hi) {
      out.val[m] = t.val[i];
      out.idx[m] = t.idx[i];
      out.w[m++] = t.w[i];
    }
  }
  return out.n = m;
}

uint64_t member_mass_scalar(const Tokens& t, int64_t begin, int64_t end, float lb, uint32_t ib) {
  uint64_t m = 0;
  for (int64_t i = begin; i < end; ++i) m += member(t.val[i], t.idx[i], lb, ib) ? t.w[i] : 0;
  return m;
}

constexpr Isa kScalar = {block_maxima_scalar, pass_scalar,         weights_scalar,    profile_bins_scalar,
                         masses_above_scalar, select_range_scalar, member_mass_scalar};

#if SK_KERNELS_X86
// The polynomial's coefficients times 2^30 (exact): Horner's steps on them give exactly 2^30 times
// the steps on kExp2C, so p * 2^k below is weight_of()'s p * 2^(k + 30).
struct ScaledExp2 {
  float c[kExp2Degree + 1];
};
constexpr ScaledExp2 scaled_exp2() {
  ScaledExp2 s{};
  for (int i = 0; i <= kExp2Degree; ++i) s.c[i] = kExp2C[i] * static_cast<float>(kWeightOne);
  return s;
}
constexpr ScaledExp2 kExp2C30 = scaled_exp2();

// weight_of() of 16 logits, lane by lane: the same f32 operations, for a finite lmax (the largest
// logit then weighs p(0) 2^30 = 2^30 without a special case). NaN lanes need no mask: max(NaN,
// -64) returns its second operand, and t = -64 weighs round(p(0) * 2^-34) = 0.
SK_TARGET_AVX512 inline __m512i weights16(__m512 x, __m512 lm, __m512 a) {
  const __m512 t = _mm512_max_ps(_mm512_mul_ps(_mm512_sub_ps(x, lm), a), _mm512_set1_ps(kMinT));
  const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, k);
  __m512 p = _mm512_set1_ps(kExp2C30.c[kExp2Degree]);
  for (int i = kExp2Degree - 1; i >= 0; --i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2C30.c[i]));
  return _mm512_cvt_roundps_epi32(_mm512_scalef_ps(p, k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

SK_TARGET_AVX512 float block_maxima_avx512(const float* l, int64_t n, float* block_max) {
  const __m512 neg_inf = _mm512_set1_ps(-kInf);
  float best = -kInf;
  for (int64_t b = 0; b * kBlock < n; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    // max(x, m) returns m when x is NaN; four chains hide the latency.
    __m512 m[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    int64_t i = b * kBlock;
    for (; i + 64 <= end; i += 64) {
      for (int q = 0; q < 4; ++q) m[q] = _mm512_max_ps(_mm512_loadu_ps(l + i + 16 * q), m[q]);
    }
    for (; i < end; i += 16) {
      m[0] = _mm512_max_ps(simd::masked_load_ps(neg_inf, simd::mask16(std::min<int64_t>(16, end - i)), l + i), m[0]);
    }
    block_max[b] = simd::hmax16(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
    best = std::max(best, block_max[b]);
  }
  return best;
}

// Weights are summed as 16-bit halves in 32-bit lanes (a block's 64 vectors cannot overflow
// them) and the lanes added once per block: exact, as every sum here must be.
SK_TARGET_AVX512 inline uint64_t lane_total(__m512i lo, __m512i hi) {
  return static_cast<uint64_t>(static_cast<uint32_t>(_mm512_reduce_add_epi32(lo))) +
         (static_cast<uint64_t>(static_cast<uint32_t>(_mm512_reduce_add_epi32(hi))) << 16);
}

// The sums of the weights' lower 16 bits, per lane, from `w` (the sums of the whole weights
// modulo 2^32) and `hi` (the sums of their upper 16 bits): w - hi * 2^16 modulo 2^32, exact while
// the true sum of lower halves stays below 2^32 (a block's 64 vectors: below 2^22). One operation
// per block instead of a mask per vector.
SK_TARGET_AVX512 inline __m512i low_sums(__m512i w, __m512i hi) {
  return _mm512_sub_epi32(w, _mm512_slli_epi32(hi, 16));
}

SK_TARGET_AVX512 int64_t pass_avx512(const float* l, int64_t n, int64_t b0, int64_t b1, float lmax, float a,
                                     const PassSpec& s) {
  const __m512 lm = _mm512_set1_ps(lmax);
  const __m512 av = _mm512_set1_ps(a);
  const __m512 hi_edge = _mm512_set1_ps(s.lam_hi);
  const __m512 lo_edge = _mm512_set1_ps(s.lam_lo);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t count = 0;
  uint32_t* const band_idx = s.band_idx;
  bool dense_band = false;  // see kDenseBand
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    // Per lane: the weights' sum modulo 2^32 and the sum of their upper 16 bits (see low_sums).
    __m512i all_w = _mm512_setzero_si512();
    __m512i all_hi = _mm512_setzero_si512();
    __m512i sel_w = _mm512_setzero_si512();
    __m512i sel_hi = _mm512_setzero_si512();
    const int64_t start = count;
    s.band_start[b] = start;
    const auto step = [&](int64_t i, __mmask16 valid, __m512 x, auto with_hi, auto with_band,
                          auto every_vector) SK_TARGET_AVX512 {
      const __m512i w = _mm512_maskz_mov_epi32(valid, weights16(x, lm, av));
      const __m512i wh = _mm512_srli_epi32(w, 16);
      all_w = _mm512_add_epi32(all_w, w);
      all_hi = _mm512_add_epi32(all_hi, wh);
      __mmask16 in_hi = 0;
      if constexpr (decltype(with_hi)::value) {
        in_hi = _mm512_mask_cmp_ps_mask(valid, x, hi_edge, _CMP_GE_OQ);
        sel_w = _mm512_mask_add_epi32(sel_w, in_hi, sel_w, w);
        sel_hi = _mm512_mask_add_epi32(sel_hi, in_hi, sel_hi, wh);
      }
      if constexpr (decltype(with_band)::value) {
        const __mmask16 band = _mm512_mask_cmp_ps_mask(static_cast<__mmask16>(_mm512_test_epi32_mask(w, w) & ~in_hi), x,
                                                       lo_edge, _CMP_GE_OQ);
        // Only the indices (the caller reads the band's logits back by index), compressed in a
        // register and stored as 16 lanes (there is room): a compressing store to memory is
        // microcoded and slow on some cores.
        if constexpr (!decltype(every_vector)::value) {
          if (band == 0) return;
        }
        const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i)));
        _mm512_storeu_si512(band_idx + count, _mm512_maskz_compress_epi32(band, ids));
        count += __builtin_popcount(static_cast<unsigned>(band));
      }
    };
    const auto run = [&](auto with_hi, auto with_band, auto every_vector) SK_TARGET_AVX512 {
      int64_t i = b * kBlock;
      for (; i + 16 <= end; i += 16) step(i, 0xFFFF, _mm512_loadu_ps(l + i), with_hi, with_band, every_vector);
      if (i < end) {
        const __mmask16 valid = simd::mask16(end - i);
        step(i, valid, simd::masked_load_ps(valid, l + i), with_hi, with_band, every_vector);
      }
    };
    run_block_parts(s, b, dense_band, run);
    dense_band = count - start >= kDenseBand;
    s.block_all[b] = lane_total(low_sums(all_w, all_hi), all_hi);
    s.block_hi[b] = lane_total(low_sums(sel_w, sel_hi), sel_hi);
  }
  s.band_start[b1] = count;
  return count;
}

// The per-threshold sums in 16-bit halves, as in the pass, over chunks of kLaneChunk tokens: a
// chunk's 32-bit lanes (and their 16-lane total) cannot overflow, whatever the band's size.
constexpr int64_t kLaneChunk = 65536;

SK_TARGET_AVX512 void masses_above_avx512(const Tokens& t, const float* thr, uint64_t* out) {
  __m512 edge[kSplits];
  for (int j = 0; j < kSplits; ++j) {
    edge[j] = _mm512_set1_ps(thr[j]);
    out[j] = 0;
  }
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (int64_t c = 0; c < t.n; c += kLaneChunk) {
    const int64_t end = std::min(t.n, c + kLaneChunk);
    __m512i lo[kSplits];
    __m512i hi[kSplits];
    for (int j = 0; j < kSplits; ++j) {
      lo[j] = _mm512_setzero_si512();
      hi[j] = _mm512_setzero_si512();
    }
    for (int64_t i = c; i < end; i += 16) {
      const __mmask16 valid = simd::mask16(std::min<int64_t>(16, end - i));
      const __m512 x = simd::masked_load_ps(valid, t.val + i);
      const __m512i w = _mm512_maskz_loadu_epi32(valid, t.w + i);
      const __m512i wl = _mm512_and_si512(w, low16);
      const __m512i wh = _mm512_srli_epi32(w, 16);
      for (int j = 0; j < kSplits; ++j) {
        const __mmask16 m = _mm512_cmp_ps_mask(x, edge[j], _CMP_GE_OQ);
        lo[j] = _mm512_mask_add_epi32(lo[j], m, lo[j], wl);
        hi[j] = _mm512_mask_add_epi32(hi[j], m, hi[j], wh);
      }
    }
    for (int j = 0; j < kSplits; ++j) out[j] += lane_total(lo[j], hi[j]);
  }
}

SK_TARGET_AVX512 int64_t select_range_avx512(const Tokens& t, float lo, float hi, Tokens& out) {
  const __m512 lo_v = _mm512_set1_ps(lo);
  const __m512 hi_v = _mm512_set1_ps(hi);
  int64_t m = 0;
  for (int64_t i = 0; i < t.n; i += 16) {
    const __mmask16 valid = simd::mask16(std::min<int64_t>(16, t.n - i));
    const __m512 x = simd::masked_load_ps(valid, t.val + i);
    const __mmask16 in =
        _mm512_mask_cmp_ps_mask(_mm512_mask_cmp_ps_mask(valid, x, lo_v, _CMP_GE_OQ), x, hi_v, _CMP_LT_OQ);
    if (in == 0) continue;
    _mm512_storeu_ps(out.val + m, _mm512_maskz_compress_ps(in, x));
    _mm512_storeu_si512(out.idx + m, _mm512_maskz_compress_epi32(in, _mm512_maskz_loadu_epi32(valid, t.idx + i)));
    _mm512_storeu_si512(out.w + m, _mm512_maskz_compress_epi32(in, _mm512_maskz_loadu_epi32(valid, t.w + i)));
    m += __builtin_popcount(static_cast<unsigned>(in));
  }
  return out.n = m;
}

SK_TARGET_AVX512 uint64_t member_mass_avx512(const Tokens& t, int64_t begin, int64_t end, float lb, uint32_t ib) {
  const __m512 lb_v = _mm512_set1_ps(lb);
  const __m512i ib_v = _mm512_set1_epi32(static_cast<int>(ib));
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  __m512i lo = _mm512_setzero_si512();
  __m512i hi = _mm512_setzero_si512();
  for (int64_t i = begin; i < end; i += 16) {
    const __mmask16 valid = simd::mask16(std::min<int64_t>(16, end - i));
    const __m512 x = simd::masked_load_ps(valid, t.val + i);
    const __m512i w = _mm512_maskz_loadu_epi32(valid, t.w + i);
    // Indices are below 2^31, so a signed compare orders them.
    const __mmask16 in = _mm512_mask_cmp_ps_mask(valid, x, lb_v, _CMP_GT_OQ) |
                         _mm512_mask_cmple_epi32_mask(_mm512_mask_cmp_ps_mask(valid, x, lb_v, _CMP_EQ_OQ),
                                                      _mm512_maskz_loadu_epi32(valid, t.idx + i), ib_v);
    lo = _mm512_mask_add_epi32(lo, in, lo, _mm512_and_si512(w, low16));
    hi = _mm512_mask_add_epi32(hi, in, hi, _mm512_srli_epi32(w, 16));
  }
  return lane_total(lo, hi);
}

SK_TARGET_AVX512 void weights_avx512(const float* x, int64_t n, float lmax, float a, uint32_t* w) {
  const __m512 lm = _mm512_set1_ps(lmax);
  const __m512 av = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_si512(w + i, weights16(_mm512_loadu_ps(x + i), lm, av));
  if (i < n) {
    const __mmask16 m = simd::mask16(n - i);
    _mm512_mask_storeu_epi32(w + i, m, weights16(simd::masked_load_ps(m, x + i), lm, av));
  }
}

// One run (16 samples) per vector. A weight below 2^31 with its low 8 bits cleared from 2^24 on
// converts to float exactly, and then its biased exponent e and top 4 mantissa bits m (the float's
// bits >> 19 are 16 e + m) are bin_of's octave and sixteenth: for w in [2^k, 2^(k + 1)), e = 127 + k
// and bin_of(w) = 16 (30 - k) + 15 - m = kFloatBinBase - (bits >> 19).
constexpr int32_t kFloatBinBase = (127 + 30) * kBinsPerOctave + kBinsPerOctave - 1;
SK_TARGET_AVX512 void profile_bins_avx512(const float* x, const uint32_t* w, int64_t n, const float* block_max,
                                          uint32_t* q) {
  static_assert(kSampleRun == 16);
  const __m512i from24 = _mm512_set1_epi32(1 << 24);
  const __m512i top = _mm512_set1_epi32(~0xFF);
  const __m512i base = _mm512_set1_epi32(kFloatBinBase);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 valid = simd::mask16(std::min<int64_t>(16, n - j));
    const __m512 xv = simd::masked_load_ps(valid, x + j);
    const __m512i wv = _mm512_maskz_loadu_epi32(valid, w + j);
    const __m512i exact = _mm512_mask_and_epi32(wv, _mm512_cmpge_epu32_mask(wv, from24), wv, top);
    __m512i qv = _mm512_sub_epi32(base, _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(exact)), 19));
    qv = _mm512_mask_mov_epi32(qv, _mm512_testn_epi32_mask(wv, wv), _mm512_set1_epi32(kBinZero));
    const __m512 m = _mm512_set1_ps(block_max[j / kSampleRun / kRunsPerBlock]);
    qv = _mm512_mask_mov_epi32(qv, _mm512_cmp_ps_mask(xv, m, _CMP_EQ_OQ), _mm512_set1_epi32(kBinBlockMax));
    _mm512_mask_storeu_epi32(q + j, valid, qv);
  }
}

// weight_of() of 8 logits: as weights16, with 2^k built from its exponent bits (k >= -64).
SK_TARGET_AVX2 inline __m256i weights8(__m256 x, __m256 lm, __m256 a) {
  const __m256 t = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(x, lm), a), _mm256_set1_ps(kMinT));
  const __m256 k = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, k);
  __m256 p = _mm256_set1_ps(kExp2C30.c[kExp2Degree]);
  for (int i = kExp2Degree - 1; i >= 0; --i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2C30.c[i]));
  const __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(k), _mm256_set1_epi32(127));
  return _mm256_cvtps_epi32(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23))));  // rounds to nearest
}

SK_TARGET_AVX2 float block_maxima_avx2(const float* l, int64_t n, float* block_max) {
  const __m256 neg_inf = _mm256_set1_ps(-kInf);
  float best = -kInf;
  for (int64_t b = 0; b * kBlock < n; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    __m256 m[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    int64_t i = b * kBlock;
    for (; i + 32 <= end; i += 32) {
      for (int q = 0; q < 4; ++q) m[q] = _mm256_max_ps(_mm256_loadu_ps(l + i + 8 * q), m[q]);
    }
    for (; i < end; i += 8) {
      const __m256i valid = simd::mask8(std::min<int64_t>(8, end - i));
      const __m256 x = _mm256_blendv_ps(neg_inf, simd::maskload_ps(l + i, valid), _mm256_castsi256_ps(valid));
      m[0] = _mm256_max_ps(x, m[0]);
    }
    block_max[b] = simd::hmax8(_mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3])));
    best = std::max(best, block_max[b]);
  }
  return best;
}

// For each 8-bit mask, the positions of its set bits in order, one per byte (the lanes a
// compress keeps).
constexpr std::array<uint64_t, 256> make_compress_table() {
  std::array<uint64_t, 256> t{};
  for (int m = 0; m < 256; ++m) {
    uint64_t packed = 0;
    int out = 0;
    for (int b = 0; b < 8; ++b) {
      if ((m >> b) & 1) packed |= static_cast<uint64_t>(b) << (8 * out++);
    }
    t[static_cast<size_t>(m)] = packed;
  }
  return t;
}
constexpr std::array<uint64_t, 256> kCompress = make_compress_table();

SK_TARGET_AVX2 inline uint64_t lane_total8(__m256i lo, __m256i hi) {
  alignas(32) uint32_t a[8];
  alignas(32) uint32_t b[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(a), lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(b), hi);
  uint64_t s = 0;
  for (int q = 0; q < 8; ++q) s += a[q] + (static_cast<uint64_t>(b[q]) << 16);
  return s;
}

SK_TARGET_AVX2 int64_t pass_avx2(const float* l, int64_t n, int64_t b0, int64_t b1, float lmax, float a,
                                 const PassSpec& s) {
  const __m256 lm = _mm256_set1_ps(lmax);
  const __m256 av = _mm256_set1_ps(a);
  const __m256 hi_edge = _mm256_set1_ps(s.lam_hi);
  const __m256 lo_edge = _mm256_set1_ps(s.lam_lo);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t count = 0;
  uint32_t* const band_idx = s.band_idx;
  bool dense_band = false;  // see kDenseBand
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    __m256i all_w = _mm256_setzero_si256();  // as in pass_avx512
    __m256i all_hi = _mm256_setzero_si256();
    __m256i sel_w = _mm256_setzero_si256();
    __m256i sel_hi = _mm256_setzero_si256();
    const int64_t start = count;
    s.band_start[b] = start;
    const auto step = [&](int64_t i, __m256i valid, __m256 x, auto with_hi, auto with_band,
                          auto every_vector) SK_TARGET_AVX2 {
      const __m256i w = _mm256_and_si256(valid, weights8(x, lm, av));
      const __m256i wh = _mm256_srli_epi32(w, 16);
      all_w = _mm256_add_epi32(all_w, w);
      all_hi = _mm256_add_epi32(all_hi, wh);
      __m256i in_hi = _mm256_setzero_si256();
      if constexpr (decltype(with_hi)::value) {
        in_hi = _mm256_and_si256(valid, _mm256_castps_si256(_mm256_cmp_ps(x, hi_edge, _CMP_GE_OQ)));
        sel_w = _mm256_add_epi32(sel_w, _mm256_and_si256(in_hi, w));
        sel_hi = _mm256_add_epi32(sel_hi, _mm256_and_si256(in_hi, wh));
      }
      if constexpr (decltype(with_band)::value) {
        const __m256i nonzero = _mm256_xor_si256(_mm256_cmpeq_epi32(w, _mm256_setzero_si256()), _mm256_set1_epi32(-1));
        const __m256i band = _mm256_andnot_si256(
            in_hi, _mm256_and_si256(nonzero, _mm256_castps_si256(_mm256_cmp_ps(x, lo_edge, _CMP_GE_OQ))));
        const auto bits = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(band)));
        if constexpr (!decltype(every_vector)::value) {
          if (bits == 0) return;
        }
        const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(kCompress[bits])));
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(band_idx + count),
            _mm256_permutevar8x32_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int>(i))), perm));
        count += __builtin_popcount(bits);
      }
    };
    const auto run = [&](auto with_hi, auto with_band, auto every_vector) SK_TARGET_AVX2 {
      int64_t i = b * kBlock;
      for (; i + 8 <= end; i += 8) {
        step(i, _mm256_set1_epi32(-1), _mm256_loadu_ps(l + i), with_hi, with_band, every_vector);
      }
      if (i < end) {
        const __m256i valid = simd::mask8(end - i);
        step(i, valid, simd::maskload_ps(l + i, valid), with_hi, with_band, every_vector);
      }
    };
    run_block_parts(s, b, dense_band, run);
    dense_band = count - start >= kDenseBand;
    s.block_all[b] = lane_total8(_mm256_sub_epi32(all_w, _mm256_slli_epi32(all_hi, 16)), all_hi);
    s.block_hi[b] = lane_total8(_mm256_sub_epi32(sel_w, _mm256_slli_epi32(sel_hi, 16)), sel_hi);
  }
  s.band_start[b1] = count;
  return count;
}

SK_TARGET_AVX2 void masses_above_avx2(const Tokens& t, const float* thr, uint64_t* out) {
  std::fill(out, out + kSplits, uint64_t{0});
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  const int64_t whole = t.n / 8 * 8;
  for (int64_t c = 0; c < whole; c += kLaneChunk) {
    const int64_t end = std::min(whole, c + kLaneChunk);
    __m256i lo[kSplits];
    __m256i hi[kSplits];
    for (int j = 0; j < kSplits; ++j) {
      lo[j] = _mm256_setzero_si256();
      hi[j] = _mm256_setzero_si256();
    }
    for (int64_t i = c; i < end; i += 8) {
      const __m256 x = _mm256_loadu_ps(t.val + i);
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.w + i));
      const __m256i wl = _mm256_and_si256(w, low16);
      const __m256i wh = _mm256_srli_epi32(w, 16);
      for (int j = 0; j < kSplits; ++j) {
        const __m256i m = _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_set1_ps(thr[j]), _CMP_GE_OQ));
        lo[j] = _mm256_add_epi32(lo[j], _mm256_and_si256(m, wl));
        hi[j] = _mm256_add_epi32(hi[j], _mm256_and_si256(m, wh));
      }
    }
    for (int j = 0; j < kSplits; ++j) out[j] += lane_total8(lo[j], hi[j]);
  }
  for (int j = 0; j < kSplits; ++j) {
    for (int64_t r = whole; r < t.n; ++r) out[j] += t.val[r] >= thr[j] ? t.w[r] : 0;
  }
}

SK_TARGET_AVX2 int64_t select_range_avx2(const Tokens& t, float lo, float hi, Tokens& out) {
  const __m256 lo_v = _mm256_set1_ps(lo);
  const __m256 hi_v = _mm256_set1_ps(hi);
  int64_t m = 0;
  int64_t i = 0;
  for (; i + 8 <= t.n; i += 8) {
    const __m256 x = _mm256_loadu_ps(t.val + i);
    const auto bits = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(x, lo_v, _CMP_GE_OQ), _mm256_cmp_ps(x, hi_v, _CMP_LT_OQ))));
    if (bits == 0) continue;
    const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(kCompress[bits])));
    _mm256_storeu_ps(out.val + m, _mm256_permutevar8x32_ps(x, perm));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out.idx + m),
        _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.idx + i)), perm));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out.w + m),
        _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.w + i)), perm));
    m += __builtin_popcount(bits);
  }
  for (; i < t.n; ++i) {
    if (t.val[i] >= lo && t.val[i] < hi) {
      out.val[m] = t.val[i];
      out.idx[m] = t.idx[i];
      out.w[m++] = t.w[i];
    }
  }
  return out.n = m;
}

SK_TARGET_AVX2 void weights_avx2(const float* x, int64_t n, float lmax, float a, uint32_t* w) {
  const __m256 lm = _mm256_set1_ps(lmax);
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + i), weights8(_mm256_loadu_ps(x + i), lm, av));
  }
  for (; i < n; ++i) w[i] = weight_of(x[i], lmax, a);
}

// member_mass runs on short ranges (a block's share of the band): the scalar loop does.
// (The AVX2 level bins the profile in the scalar loop: a guess, so any level may.)
constexpr Isa kAvx2 = {block_maxima_avx2, pass_avx2,         weights_avx2,      profile_bins_scalar,
                       masses_above_avx2, select_range_avx2, member_mass_scalar};
constexpr Isa kAvx512 = {block_maxima_avx512, pass_avx512,         weights_avx512,    profile_bins_avx512,
                         masses_above_avx512, select_range_avx512, member_mass_avx512};
#endif

const Isa& select_isa() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return kAvx512;
    case kIsaAvx2:
      return kAvx2;
    default:
      break;
  }
#endif
  return kScalar;
}

// ---------------------------------------------------------------------------------------------
// Scratch

// What the profile gathers from a range of blocks, per bin: the sampled weights (scaled up by the
// sampling rate later) and their count, and the exact weights of the blocks' largest logits.
// Cores that share a row each profile their own blocks; band_of sums their profiles.
struct Profile {
  uint64_t sampled[kBins + 2];  // bins kBinZero and kBinBlockMax: the samples not binned
  uint32_t count[kBins + 2];
  uint64_t block_max_w[kBins];
  int64_t taken;  // samples other than a block's largest logit
  // The bins [first_bin, end_bin) hold every sample and block maximum of a nonzero weight:
  // band_of reads (and prefetches) only those (371 of the 496 on sk_bench_kernels' flat row).
  int32_t first_bin;
  int32_t end_bin;
};

// A fixed-capacity array in the core's workspace slice. Capacities come from the vocabulary
// size, which bounds every length here.
template <class T>
class Bounded {
 public:
  Bounded() = default;
  Bounded(T* data, int64_t capacity) : data_(data), capacity_(capacity) {}
  T* data() const { return data_; }
  // The first n elements; n beyond the capacity is a sizing bug in carve_sample_scratch.
  T* first(int64_t n) {
    if (n > capacity_) __builtin_trap();
    return data_;
  }
  T& operator[](int64_t i) { return data_[i]; }

 private:
  T* data_ = nullptr;
  int64_t capacity_ = 0;
};

struct Ranked {  // a token: its rank key (topk::pack), weight and logit
  uint64_t key;
  uint32_t w;
  float l;
};

constexpr int64_t kSortBelow = 48;  // the boundary search sorts a set this small
constexpr int64_t kPad = 16;        // the vector passes store whole vectors past the end

// One core's scratch for sampling a row of V logits, carved from its workspace slice.
struct SampleScratch {
  Bounded<float> block_max;
  Bounded<uint64_t> block_all;
  Bounded<uint64_t> block_hi;
  Bounded<int64_t> band_start;
  Bounded<uint32_t> block_w;  // one block's weights (the draw's last walk)
  Bounded<float> val[3];      // the band, and two sets of the boundary search
  Bounded<uint32_t> idx[3];
  Bounded<uint32_t> w[3];
  Bounded<float> sample;
  Bounded<uint32_t> sample_w;
  Bounded<uint32_t> sample_bin;
  Bounded<Profile> profile;  // one
  Bounded<Ranked> ranked;    // top-k candidates, or the tokens the boundary search sorts
  Bounded<uint64_t> keys;    // topk::select's output
  Bounded<float> cand;       // top-k candidates' logits
  Bounded<uint32_t> cand_w;  // and weights
  uint64_t bytes = 0;        // of the slice it occupies
};

int64_t blocks_of(int64_t v) { return (v + kBlock - 1) / kBlock; }
int64_t samples_of(int64_t v) { return (v + kSampleEvery - 1) / kSampleEvery * kSampleRun; }

// Sized for the one path sample_row takes with these attributes: nothing for temperature 0
// (argmax), k candidates for top-k, block sums for every index a candidate, and the band,
// profile and search buffers only for top-p over the whole vocabulary.
SampleScratch carve_sample_scratch(int64_t v, const sk_sample_attrs& a, void* base) {
  const bool argmax = a.temperature == 0.0f;
  const bool top_k = !argmax && a.top_k > 0 && a.top_k < v;
  const bool all = !argmax && !top_k;
  const bool nucleus = all && a.top_p < 1.0f;
  const int64_t blocks = all ? blocks_of(v) : 0;
  const int64_t band = nucleus ? v + kPad : 0;
  const int64_t k = top_k ? a.top_k : 0;
  ScratchCarver c(base);
  SampleScratch s;
  const auto take = [&c](auto& field, int64_t n) {
    using T = std::remove_reference_t<decltype(field[0])>;
    field = Bounded<T>(c.take<T>(n), n);
  };
  take(s.block_max, blocks);
  take(s.block_all, blocks);
  take(s.block_hi, blocks);
  take(s.band_start, all ? blocks + 1 : 0);
  take(s.block_w, all ? kBlock + kPad : 0);
  for (int q = 0; q < 3; ++q) {
    take(s.val[q], band);
    take(s.idx[q], band);
    take(s.w[q], band);
  }
  take(s.sample, nucleus ? samples_of(v) + kPad : 0);
  take(s.sample_w, nucleus ? std::max(samples_of(v), blocks) + kPad : 0);
  take(s.sample_bin, nucleus ? samples_of(v) + kPad : 0);
  take(s.profile, nucleus ? 1 : 0);
  take(s.ranked, top_k ? k : nucleus ? v : 0);
  take(s.keys, k);
  take(s.cand, k > 0 ? k + kPad : 0);
  take(s.cand_w, k > 0 ? k + kPad : 0);
  s.bytes = c.bytes();
  return s;
}

// ---------------------------------------------------------------------------------------------
// The draw

// The draw over every index whose token passes `in` (a prefix of the ranking): the first
// member in index order whose running sum exceeds r. block_w(b) is the members' weight in block
// b, whose sum over all blocks exceeds r (asked for the blocks up to the one where r falls only).
template <class BlockWeight, class In>
int64_t walk_blocks(const Isa& isa, const float* l, int64_t v, float lmax, float a, const BlockWeight& block_w,
                    uint64_t r, SampleScratch& sc, In in) {
  uint64_t acc = 0;
  const int64_t blocks = blocks_of(v);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t wb = block_w(b);
    if (acc + wb <= r) {
      acc += wb;
      continue;
    }
    const int64_t begin = b * kBlock;
    const int64_t n = std::min(kBlock, v - begin);
    uint32_t* w = sc.block_w.first(n + kPad);
    isa.weights(l + begin, n, lmax, a, w);
    for (int64_t i = 0; i < n; ++i) {
      if (!in(l[begin + i], begin + i)) continue;
      acc += w[i];
      if (acc > r) return begin + i;
    }
    __builtin_trap();  // block_w disagrees with the weights: a bug, never input-driven
  }
  __builtin_trap();
}

// Every index is a candidate and top_p is 1: the draw over all of them.
int64_t sample_dense(const Isa& isa, const float* l, int64_t v, float lmax, float a, uint64_t u53, SampleScratch& sc) {
  const int64_t blocks = blocks_of(v);
  const PassSpec spec{kNaN,
                      kNaN,
                      sc.block_all.first(blocks),
                      sc.block_hi.first(blocks),
                      nullptr,
                      sc.band_start.first(blocks + 1),
                      sc.block_max.data()};
  isa.pass(l, v, 0, blocks, lmax, a, spec);
  uint64_t total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += spec.block_all[b];
  return walk_blocks(
      isa, l, v, lmax, a, [&spec](int64_t b) { return spec.block_all[b]; }, draw_point(u53, total), sc,
      [](float, int64_t) { return true; });
}

// Every index a candidate and only the logits equal to lmax weigh (2^30 each, the others 0): when
// lmax = +inf, or when a = log2(e) / T is +inf in float (T subnormal). The vector passes take a
// finite lmax and a finite a (they get the largest logit's 2^30 from t = 0, which (l - lmax) * a
// is not then). The nucleus is the first m of those logits, the draw the (r / 2^30)-th member in
// index order.
int64_t sample_max_ties(const float* l, int64_t v, float lmax, float top_p, uint64_t u53) {
  int64_t count = 0;
  for (int64_t i = 0; i < v; ++i) count += l[i] == lmax ? 1 : 0;
  int64_t m = count;
  if (top_p < 1.0f) {
    const double tau = nucleus_target(top_p, static_cast<uint64_t>(count) * kWeightOne);
    for (m = 1; m < count && !reaches(static_cast<uint64_t>(m) * kWeightOne, tau); ++m) {
    }
  }
  uint64_t left = draw_point(u53, static_cast<uint64_t>(m) * kWeightOne) >> kWeightBits;
  for (int64_t i = 0; i < v; ++i) {
    if (l[i] == lmax && left-- == 0) return i;
  }
  __builtin_trap();  // left < m <= count
}

// The top_k best candidates, with a nucleus when top_p < 1.
int64_t sample_top_k(const Isa& isa, const float* l, int64_t v, int64_t k, float a, float top_p, uint64_t u53,
                     SampleScratch& sc) {
  uint64_t* keys = sc.keys.first(k);
  topk::select(l, v, k, keys);
  const float lmax = l[topk::index_of(keys[0])];
  // No probability mass at all (every logit -inf or NaN): the argmax.
  if (!(lmax > -kInf)) return topk::index_of(keys[0]);
  float* x = sc.cand.first(k + kPad);
  uint32_t* w = sc.cand_w.first(k + kPad);
  for (int64_t j = 0; j < k; ++j) x[j] = l[topk::index_of(keys[j])];
  // The vector weights take a finite lmax and a finite a (see sample_max_ties).
  (lmax < kInf && a < kInf ? isa.weights : weights_scalar)(x, k, lmax, a, w);
  Ranked* c = sc.ranked.first(k);
  uint64_t total = 0;
  for (int64_t j = 0; j < k; ++j) {
    c[j] = {keys[j], w[j], x[j]};
    total += w[j];
  }
  int64_t m = k;
  uint64_t mass = total;
  if (top_p < 1.0f) {
    const double tau = nucleus_target(top_p, total);
    uint64_t run = 0;
    for (m = 0; m < k;) {
      run += c[m++].w;
      if (reaches(run, tau)) break;
    }
    mass = run;
  }
  // The members in index order (a larger key is a lower index among equal logits, so sort by
  // the index itself).
  std::sort(c, c + m, [](const Ranked& p, const Ranked& q) { return topk::index_of(p.key) < topk::index_of(q.key); });
  const uint64_t r = draw_point(u53, mass);
  uint64_t acc = 0;
  for (int64_t j = 0; j < m; ++j) {
    acc += c[j].w;
    if (acc > r) return topk::index_of(c[j].key);
  }
  __builtin_trap();  // acc reaches mass > r
}

// ---------------------------------------------------------------------------------------------
// The nucleus over the whole vocabulary

// The thresholds of one pass: the hi set {l >= lam_hi} lies wholly in the nucleus and the band
// {lam_lo <= l < lam_hi} holds its last member; a guess, checked by the exact sums.
struct Band {
  float lam_lo;
  float lam_hi;
};

// 1 + the mantissa of bin q's lower edge, and log2 of that edge relative to 2^30: every token
// with a weight in a bin up to q has a logit at or above the logit of that weight (up to the
// weight's own rounding, which the margins of the caller cover).
inline double edge_mantissa(int q) {
  return 1.0 + (kBinsPerOctave - 1 - q % kBinsPerOctave) / static_cast<double>(kBinsPerOctave);
}
inline double log2_edge(int q) {
  static const std::array<double, kBinsPerOctave> kFrac = [] {
    std::array<double, kBinsPerOctave> f{};
    for (int e = 0; e < kBinsPerOctave; ++e) f[e] = std::log2(edge_mantissa(e));
    return f;
  }();
  return -(q / kBinsPerOctave) + kFrac[q % kBinsPerOctave];
}
inline float logit_at(float lmax, float a, double t, bool round_down) {
  const double x = static_cast<double>(lmax) + t / static_cast<double>(a);
  const double clamped = std::clamp(x, static_cast<double>(std::numeric_limits<float>::lowest()),
                                    static_cast<double>(std::numeric_limits<float>::max()));
  return std::nextafter(static_cast<float>(clamped), round_down ? -kInf : kInf);
}

// The profile of blocks [b0, b1) of a row of v logits into `out`.
void profile_blocks(const Isa& isa, const float* l, int64_t v, int64_t b0, int64_t b1, float lmax, float a,
                    SampleScratch& sc, Profile& out) {
  std::memset(&out, 0, sizeof out);
  const int64_t begin = b0 * kBlock;
  const int64_t end = std::min(v, b1 * kBlock);
  float* x = sc.sample.first(samples_of(v) + kPad);
  int64_t ns = 0;
  for (int64_t s = begin; s < end; s += kSampleEvery) {
    const int64_t len = std::min(kSampleRun, v - s);
    // A whole run as one fixed-size copy (a call to memmove per run cost more than the run).
    if (len == kSampleRun) {
      std::memcpy(x + ns, l + s, sizeof(float) * kSampleRun);
    } else {
      std::copy_n(l + s, len, x + ns);
    }
    ns += len;
  }
  uint32_t* w = sc.sample_w.first(std::max(samples_of(v), blocks_of(v)) + kPad);
  isa.weights(x, ns, lmax, a, w);
  uint32_t* q = sc.sample_bin.first(samples_of(v) + kPad);
  isa.profile_bins(x, w, ns, sc.block_max.data() + b0, q);
  uint64_t* sampled = out.sampled;
  uint32_t* count = out.count;
  for (int64_t j = 0; j < ns; ++j) {
    sampled[q[j]] += w[j];
    ++count[q[j]];
  }
  out.taken = ns - count[kBinBlockMax];
  isa.weights(sc.block_max.data() + b0, b1 - b0, lmax, a, w);
  for (int64_t b = 0; b < b1 - b0; ++b) {
    if (w[b] != 0) out.block_max_w[bin_of(w[b])] += w[b];
  }
  const auto touched = [&out](int bin) { return out.count[bin] != 0 || out.block_max_w[bin] != 0; };
  int32_t first_bin = 0;
  while (first_bin < kBins && !touched(first_bin)) ++first_bin;
  int32_t end_bin = kBins;
  while (end_bin > first_bin && !touched(end_bin - 1)) --end_bin;
  out.first_bin = first_bin;
  out.end_bin = end_bin;
}

// A guess at the band from a profile of all V: 16 logits of every 512 (scaled up by the
// sampling rate) and the exact weight of each block's largest logit (which catches the few strong
// tokens of a trained model's row that a sample mostly misses; a sampled logit equal to its
// block's largest is left to that count). The band's edges are where the estimated fraction of S
// above a bin edge passes top_p minus and plus 3.5 standard deviations of that fraction, plus a
// bin.
// part(j) for j < n_parts: the profiles of the row's block ranges.
template <class Part>
Band band_of(const Part& part, int n_parts, int64_t v, float lmax, float a, float top_p) {
  const int64_t blocks = blocks_of(v);
  int64_t taken = 0;
  for (int j = 0; j < n_parts; ++j) taken += part(j).taken;
  // Per bin: the estimated mass, and the variance of the sampled part (each sampled weight taken
  // at its bin's middle).
  const double rate = taken > 0 ? static_cast<double>(v - blocks) / static_cast<double>(taken) : 0.0;
  // The square of each bin's middle weight.
  static const std::array<double, kBins> kMidSquared = [] {
    std::array<double, kBins> m{};
    for (int q = 0; q < kBins; ++q) {
      const double mid = std::ldexp(edge_mantissa(q) + 0.5 / kBinsPerOctave, kWeightBits - q / kBinsPerOctave);
      m[q] = mid * mid;
    }
    return m;
  }();
  // Bins outside every part's touched range add exact zeros to every sum below, and the search
  // ends by the last touched bin (its running sum is the total): skipping them changes no result.
  // (Below the first touched bin the search cannot stop either: top_p > 0, checked with the
  // attributes.)
  int first = kBins;
  int end = 0;
  for (int j = 0; j < n_parts; ++j) {
    if (part(j).first_bin >= part(j).end_bin) continue;
    first = std::min(first, static_cast<int>(part(j).first_bin));
    end = std::max(end, static_cast<int>(part(j).end_bin));
  }
  // Another core's profile was just written in its cache: asking for all of its lines at once
  // lets them arrive together rather than as the loop reaches each.
  for (int j = 0; j < n_parts; ++j) {
    const Profile& p = part(j);
    const auto fetch = [first, end](const auto* bins) {
      const char* lo = reinterpret_cast<const char*>(bins + first);
      const char* hi = reinterpret_cast<const char*>(bins + end);
      for (const char* c = lo; c < hi; c += 64) __builtin_prefetch(c);
    };
    fetch(p.block_max_w);
    fetch(p.sampled);
    fetch(p.count);
  }
  double mass[kBins];
  double var[kBins];
  double total = 0.0;
  double total_var = 0.0;
  for (int q = first; q < end; ++q) {
    uint64_t exact = 0;
    uint64_t sampled = 0;
    uint64_t count = 0;
    for (int j = 0; j < n_parts; ++j) {
      const Profile& p = part(j);
      exact += p.block_max_w[q];
      sampled += p.sampled[q];
      count += p.count[q];
    }
    mass[q] = static_cast<double>(exact) + rate * static_cast<double>(sampled);
    var[q] = rate * rate * static_cast<double>(count) * kMidSquared[q];
    total += mass[q];
    total_var += var[q];
  }
  // 3.5 standard deviations: a band that misses the boundary costs a second pass, a wider band
  // costs its tokens on every row (a flat row's band holds thousands).
  constexpr double kSigmas = 3.5;
  int lo = kBins - 1;
  int hi = -1;
  double run = 0.0;
  double run_var = 0.0;
  // The fraction f above a bin edge against top_p -+ kSigmas sd, compared squared (sd^2 = x /
  // total^4): no square root per bin.
  const double k2 = kSigmas * kSigmas;
  const double total4 = total * total * total * total;
  for (int q = first; q < end && total > 0.0; ++q) {
    run += mass[q];
    run_var += var[q];
    const double rest = total - run;
    const double x = rest * rest * run_var + run * run * (total_var - run_var);
    const double below = static_cast<double>(top_p) - run / total;         // f >= top_p - k sd
    const double above = run / total - static_cast<double>(top_p) - 1e-4;  // f >= top_p + k sd + 1e-4
    if (hi < 0 && (below <= 0.0 || below * below * total4 <= k2 * x)) hi = q;
    if (above >= 0.0 && above * above * total4 >= k2 * x) {
      lo = q;
      break;
    }
  }
  Band band;
  band.lam_lo = lo + 1 >= kBins ? -kInf : logit_at(lmax, a, log2_edge(lo + 1), true);
  // The hi set ends a bin above the first bin that may hold the last member.
  band.lam_hi = hi >= 2 ? logit_at(lmax, a, log2_edge(hi - 2), false) : kNaN;
  return band;
}

// The band guessed by one core from all V.
Band profile_band(const Isa& isa, const float* l, int64_t v, float lmax, float a, float top_p, SampleScratch& sc) {
  profile_blocks(isa, l, v, 0, blocks_of(v), lmax, a, sc, sc.profile[0]);
  return band_of([&sc](int) -> const Profile& { return sc.profile[0]; }, 1, v, lmax, a, top_p);
}

// Where the nucleus ends: its last member (lb, ib) and the nucleus's weight.
struct Boundary {
  float lb;
  int64_t ib;
  uint64_t mass;
};

// The boundary among t (every token of it with a weight, values in [lo, hi) up to the float
// rounding of the edges), given the weight `run` of every token ranking before all of t:
// kSplits thresholds split [lo, hi) evenly, their exact sums say which part holds the token where
// the running sum reaches tau, and that part is searched next, until a few tokens are left (or
// the split makes no progress: equal logits), which are sorted and walked.
bool find_boundary(const Isa& isa, Tokens t, float lo, float hi, uint64_t run, double tau, SampleScratch& sc,
                   Boundary* out) {
  for (int level = 0;; ++level) {
    Tokens next{sc.val[1 + level % 2].data(), sc.idx[1 + level % 2].data(), sc.w[1 + level % 2].data(), 0};
    if (t.n > kSortBelow) {
      float thr[kSplits];
      const double step = (static_cast<double>(hi) - static_cast<double>(lo)) / kSplits;
      for (int j = 0; j + 1 < kSplits; ++j) thr[j] = static_cast<float>(static_cast<double>(hi) - (j + 1) * step);
      thr[kSplits - 1] = -kInf;
      uint64_t above[kSplits];
      isa.masses_above(t, thr, above);
      int j = 0;
      while (j < kSplits && !reaches(run + above[j], tau)) ++j;
      if (j == kSplits) return false;
      const float part_hi = j == 0 ? kInf : thr[j - 1];
      const float part_lo = thr[j];
      isa.select_range(t, part_lo, part_hi, next);
      if (next.n < t.n) {
        run += j == 0 ? 0 : above[j - 1];
        t = next;
        hi = j == 0 ? hi : thr[j - 1];
        lo = j + 1 == kSplits ? lo : thr[j];
        continue;
      }
    }
    Ranked* r = sc.ranked.first(t.n);
    for (int64_t i = 0; i < t.n; ++i) r[i] = {topk::pack(t.val[i], t.idx[i]), t.w[i], t.val[i]};
    std::sort(r, r + t.n, [](const Ranked& x, const Ranked& y) { return x.key > y.key; });
    for (int64_t i = 0; i < t.n; ++i) {
      run += r[i].w;
      if (reaches(run, tau)) {
        *out = {r[i].l, topk::index_of(r[i].key), run};
        return true;
      }
    }
    return false;
  }
}

// The nucleus for the band `band` from profile_band. `first_count` >= 0: the pass over all V with
// that band is done already (its outputs in sc, the band's size first_count, with the band's
// logits and weights), by the cores together (SampleTogether).
int64_t sample_nucleus(const Isa& isa, const float* l, int64_t v, float lmax, float a, float top_p, uint64_t u53,
                       SampleScratch& sc, Band band, int64_t first_count) {
  const int64_t blocks = blocks_of(v);
  PassSpec spec{0.0f,
                0.0f,
                sc.block_all.first(blocks),
                sc.block_hi.first(blocks),
                sc.idx[0].first(v + kPad),
                sc.band_start.first(blocks + 1),
                sc.block_max.data()};
  // No token with a weight lies below this (t > -32 for a weight of at least 1).
  const float floor_l = logit_at(lmax, a, -32.0, true);
  // At most: the guess, the hi set (when it reaches tau), the bound, every token. More would be
  // a bug in the exact sums; the caller reports it instead of looping.
  bool bound_tried = false;
  for (int attempt = 0;; ++attempt) {
    if (attempt == 5) return -1;
    spec.lam_hi = band.lam_hi;
    spec.lam_lo = band.lam_lo;
    const bool done = attempt == 0 && first_count >= 0;
    const Tokens t{sc.val[0].first(v + kPad), spec.band_idx, sc.w[0].first(v + kPad),
                   done ? first_count : isa.pass(l, v, 0, blocks, lmax, a, spec)};
    if (!done) {
      for (int64_t j = 0; j < t.n; ++j) t.val[j] = l[t.idx[j]];
      isa.weights(t.val, t.n, lmax, a, t.w);
    }
    uint64_t total = 0;
    uint64_t hi_mass = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      total += spec.block_all[b];
      hi_mass += spec.block_hi[b];
    }
    const double tau = nucleus_target(top_p, total);
    if (reaches(hi_mass, tau)) {
      // The nucleus ends inside the hi set: take all of it as the band.
      band = {band.lam_hi, kNaN};
      continue;
    }
    Boundary end{};
    const float hi = band.lam_hi == band.lam_hi ? band.lam_hi : lmax;
    if (!find_boundary(isa, t, std::max(band.lam_lo, floor_l), hi, hi_mass, tau, sc, &end)) {
      // The nucleus ends below the band: lower lam_lo to where every token left out weighs at
      // most (1 - top_p) S / V (then the tokens above it hold tau), or, failing that, to -inf.
      const double slack = (1.0 - static_cast<double>(top_p)) * static_cast<double>(total);
      const double lt = std::log2(slack / (static_cast<double>(v) * kWeightOne)) - 0.05;
      const float lam = !bound_tried && lt > kMinT ? logit_at(lmax, a, lt, true) : -kInf;
      band.lam_lo = lam < band.lam_lo ? lam : -kInf;
      bound_tried = true;
      continue;
    }
    // The draw over the members in index order: per block, the hi set and the band's members.
    // (A block's members' weight is only summed when the walk reaches it.)
    const auto members = [&](int64_t b) {
      return spec.block_hi[b] +
             isa.member_mass(t, spec.band_start[b], spec.band_start[b + 1], end.lb, static_cast<uint32_t>(end.ib));
    };
    return walk_blocks(isa, l, v, lmax, a, members, draw_point(u53, end.mass), sc,
                       [&end](float x, int64_t i) { return member(x, i, end.lb, end.ib); });
  }
}

// ---------------------------------------------------------------------------------------------
// Plans

constexpr const char* kArgmax = "argmax.f32";
constexpr const char* kSample = "sample.f32";

struct RowsPlan {
  moe::View2<const float> logits;
  int32_t* ids = nullptr;
  int64_t ids_stride = 0;
  int64_t b = 0;
  int64_t v = 0;
  sk_sample_attrs attrs{};
  const int64_t* step = nullptr;
};

bool plan_rows(const sk_kernel_args* args, bool sample, RowsPlan* p, ErrorSink err) {
  const char* name = sample ? kSample : kArgmax;
  if (!check_arity(args, name, sample ? 2 : 1, 1, err)) return false;
  const sk_tensor_arg& logits = args->inputs[0];
  const sk_tensor_arg& ids = args->outputs[0];
  if (!moe::check_2d(logits, name, "logits", SK_DTYPE_F32, moe::Layout::kRowsDense, err) ||
      !check_tensor(ids, name, "ids", SK_DTYPE_I32, 1, err)) {
    return false;
  }
  p->b = logits.shape[0];
  p->v = logits.shape[1];
  char s1[96];
  char s2[96];
  if (ids.rank != 1 || ids.shape[0] != p->b) {
    return invalid(err, "%s: ids shape %s is not [%lld] (the rows of logits %s)", name,
                   format_shape(ids, s1, sizeof s1), static_cast<long long>(p->b), format_shape(logits, s2, sizeof s2));
  }
  if (p->b > 1 && ids.stride[0] == 0) return invalid(err, "%s: ids is a view whose elements overlap", name);
  if (p->v < 1 || p->v >= (int64_t{1} << 31)) {
    return invalid(err, "%s: vocabulary size V = %lld is outside [1, 2^31)", name, static_cast<long long>(p->v));
  }
  if (sample) {
    const sk_tensor_arg& step = args->inputs[1];
    if (!check_tensor(step, name, "step", SK_DTYPE_I64, 0, err)) return false;
    if (sk_tensor_numel(&step) != 1) {
      return invalid(err, "%s: step shape %s must hold exactly one i64", name, format_shape(step, s1, sizeof s1));
    }
    p->step = static_cast<const int64_t*>(step.data);
    if (!moe::read_attrs(args, &p->attrs)) {
      return invalid(err, "%s: attributes must be one sk_sample_attrs (%zu bytes), got %u bytes", name,
                     sizeof(sk_sample_attrs), args->attrs_size);
    }
    const sk_sample_attrs& a = p->attrs;
    if (!(a.temperature >= 0.0f) || !std::isfinite(a.temperature)) {
      return invalid(err, "%s: temperature = %g must be finite and >= 0", name, static_cast<double>(a.temperature));
    }
    if (!(a.top_p > 0.0f && a.top_p <= 1.0f)) {
      return invalid(err, "%s: top_p = %g is outside (0, 1]", name, static_cast<double>(a.top_p));
    }
    if (a.top_k < 0) return invalid(err, "%s: top_k = %d is negative", name, a.top_k);
    if (a.reserved != 0) return invalid(err, "%s: reserved attribute field is %d, must be 0", name, a.reserved);
  } else if (args->attrs_size != 0) {
    return invalid(err, "%s: takes no attributes, got %u bytes", name, args->attrs_size);
  }
  p->logits = moe::view2<const float>(logits);
  p->ids = static_cast<int32_t*>(ids.data);
  p->ids_stride = ids.stride[0];
  return true;
}

int64_t sample_row(const RowsPlan& p, const float* l, int64_t row, SampleScratch& sc) {
  const sk_sample_attrs& at = p.attrs;
  if (at.temperature == 0.0f) return topk::argmax(l, p.v);
  const uint64_t u53 = uniform53(at.seed, *p.step, row);
  const float a = weight_scale(at.temperature);
  const Isa& isa = select_isa();
  if (at.top_k > 0 && at.top_k < p.v) return sample_top_k(isa, l, p.v, at.top_k, a, at.top_p, u53, sc);
  const float lmax = isa.block_maxima(l, p.v, sc.block_max.first(blocks_of(p.v)));
  // No probability mass at all (every logit -inf or NaN): the argmax.
  if (!(lmax > -kInf)) return topk::argmax(l, p.v);
  if (lmax == kInf || a == kInf) return sample_max_ties(l, p.v, lmax, at.top_p, u53);
  if (at.top_p < 1.0f) {
    return sample_nucleus(isa, l, p.v, lmax, a, at.top_p, u53, sc, profile_band(isa, l, p.v, lmax, a, at.top_p, sc),
                          -1);
  }
  return sample_dense(isa, l, p.v, lmax, a, u53, sc);
}

// One row sampled by all cores of the call (more cores than rows, and a runtime that gives
// sync_cores): each core takes a contiguous range of the 1024-logit blocks for the block maxima
// and for the pass over V, and core 0 combines their exact block sums and bands and finishes
// (the boundary search and the draw). Every sum is exact, so the token is the one core's token.
// Each core's results stay in its own workspace slice; the others read a core's block maxima and
// profile after the first and second syncs, core 0 its block sums and band after the last (the
// compiler counts every slice as touched by every core of such a kernel for this reason). The
// paths are chosen from the attributes and the shared block maxima, so every core makes the same
// sync_cores calls: after the block maxima, after the profile (nucleus only) and after the pass,
// or, where core 0 samples alone, a second one before it does. Before the next row's first sync
// a core writes only its block maxima, which the others read before this row's second sync; core
// 0 reads the others' block sums and bands after the last one, and nothing rewrites those before
// the next row's pass.
class SampleTogether {
 public:
  SampleTogether(const RowsPlan& p, const sk_kernel_args* args, const sk_core_ctx* core)
      : p_(p),
        args_(args),
        core_(core),
        n_(core->num_cores),
        id_(core->core_id),
        own_(slice(id_)),
        profile0_(slice(0).profile.data()) {}

  // The token of row `row`, on core 0; -2 on the other cores; -1 for an internal error;
  // -3 when a sync_cores call failed (another core's error: return SK_ERR_ABORTED).
  int64_t row(const float* l, int64_t row) {
    const sk_sample_attrs& at = p_.attrs;
    const int64_t v = p_.v;
    // Paths that do not read all V with a weight: core 0 alone.
    if (at.temperature == 0.0f || (at.top_k > 0 && at.top_k < v)) return id_ == 0 ? sample_row(p_, l, row, own()) : -2;
    const Isa& isa = select_isa();
    const int64_t blocks = blocks_of(v);
    const sk_range mine = range_of(id_);
    float* bm = own().block_max.first(blocks);
    if (mine.begin < mine.end) isa.block_maxima(l + mine.begin * kBlock, extent(mine), bm + mine.begin);
    if (!sync()) return -3;
    float lmax = -kInf;
    for (int32_t j = 0; j < n_; ++j) {
      const sk_range r = range_of(j);
      if (j != id_) {
        SampleScratch other = slice(j);
        std::copy(other.block_max.data() + r.begin, other.block_max.data() + r.end, bm + r.begin);
      }
    }
    for (int64_t b = 0; b < blocks; ++b) lmax = std::max(lmax, bm[b]);
    const float a = weight_scale(at.temperature);
    const uint64_t u53 = uniform53(at.seed, *p_.step, row);
    // No probability mass, or only the largest logits weigh: core 0 alone, as sample_row does.
    // The sync first: once every core has passed it, every core has read the others' block
    // maxima, which the next row's then overwrite (every other path syncs again later).
    if (!(lmax > -kInf) || lmax == kInf || a == kInf) {
      if (!sync()) return -3;
      if (id_ != 0) return -2;
      return !(lmax > -kInf) ? topk::argmax(l, v) : sample_max_ties(l, v, lmax, at.top_p, u53);
    }
    const bool nucleus = at.top_p < 1.0f;
    SampleScratch& sc = own();
    Band band{kNaN, kNaN};
    if (nucleus) {
      // Each core profiles its blocks; every core then adds up the same profiles in the same
      // order and guesses the same band.
      profile_blocks(isa, l, v, mine.begin, mine.end, lmax, a, sc, sc.profile[0]);
      if (!sync()) return -3;
      const auto part = [this](int j) -> const Profile& { return *profile_of(j); };
      band = band_of(part, n_, v, lmax, a, at.top_p);
    }
    const PassSpec spec{band.lam_hi,
                        band.lam_lo,
                        sc.block_all.first(blocks),
                        sc.block_hi.first(blocks),
                        nucleus ? sc.idx[0].first(v + kPad) : nullptr,
                        sc.band_start.first(blocks + 1),
                        bm};
    // Band positions count from 0 in each core's band (band_start[mine.begin] = 0).
    const int64_t count = isa.pass(l, v, mine.begin, mine.end, lmax, a, spec);
    if (count > 0) {
      // The band's logits and weights, for core 0's boundary search.
      float* val = sc.val[0].first(v + kPad);
      for (int64_t i = 0; i < count; ++i) val[i] = l[spec.band_idx[i]];
      isa.weights(val, count, lmax, a, sc.w[0].first(v + kPad));
    }
    if (!sync()) return -3;
    if (id_ != 0) return -2;
    // Core 0: the other cores' block sums and bands after its own.
    int64_t total_band = count;
    for (int32_t j = 1; j < n_; ++j) {
      const sk_range r = range_of(j);
      SampleScratch other = slice(j);
      std::copy(other.block_all.data() + r.begin, other.block_all.data() + r.end, sc.block_all.data() + r.begin);
      std::copy(other.block_hi.data() + r.begin, other.block_hi.data() + r.end, sc.block_hi.data() + r.begin);
      if (!nucleus) continue;
      const int64_t n = other.band_start[r.end];
      std::copy(other.idx[0].data(), other.idx[0].data() + n, sc.idx[0].data() + total_band);
      std::copy(other.val[0].data(), other.val[0].data() + n, sc.val[0].data() + total_band);
      std::copy(other.w[0].data(), other.w[0].data() + n, sc.w[0].data() + total_band);
      for (int64_t b = r.begin; b < r.end; ++b) sc.band_start[b] = other.band_start[b] + total_band;
      total_band += n;
    }
    sc.band_start[blocks] = total_band;
    if (nucleus) return sample_nucleus(isa, l, v, lmax, a, at.top_p, u53, sc, band, total_band);
    uint64_t total = 0;
    for (int64_t b = 0; b < blocks; ++b) total += sc.block_all[b];
    return walk_blocks(
        isa, l, v, lmax, a, [&sc](int64_t b) { return sc.block_all[b]; }, draw_point(u53, total), sc,
        [](float, int64_t) { return true; });
  }

 private:
  sk_range range_of(int32_t core) const { return sk_split_range(blocks_of(p_.v), core, n_, 1); }
  int64_t extent(const sk_range& r) const { return std::min(p_.v, r.end * kBlock) - r.begin * kBlock; }
  SampleScratch& own() { return own_; }
  // Core `core`'s scratch: the same layout in its workspace slice.
  SampleScratch slice(int32_t core) const {
    return carve_sample_scratch(
        p_.v, p_.attrs, static_cast<char*>(args_->workspace) + static_cast<uint64_t>(core) * args_->workspace_size);
  }
  bool sync() { return core_->sync_cores(core_) == SK_OK; }
  // Core `core`'s profile: one workspace slice after core core - 1's (band_of asks for it per bin,
  // so no carving here).
  const Profile* profile_of(int32_t core) const {
    return reinterpret_cast<const Profile*>(reinterpret_cast<const char*>(profile0_) +
                                            static_cast<uint64_t>(core) * args_->workspace_size);
  }

  const RowsPlan& p_;
  const sk_kernel_args* args_;
  const sk_core_ctx* core_;
  int32_t n_;
  int32_t id_;
  SampleScratch own_;
  const Profile* profile0_;
};

// Whether the cores of a sample call share each row (more cores than rows) instead of taking
// whole rows each.
bool together(const RowsPlan& p, int32_t num_cores) { return p.b < num_cores; }

// The rows core `core_id` samples alone and whose ids it writes: its share of them, or, where the
// cores share rows, all of them on core 0.
sk_range own_rows(const RowsPlan& p, bool sample, int32_t core_id, int32_t num_cores) {
  if (sample && together(p, num_cores)) return core_id == 0 ? sk_range{0, p.b} : sk_range{0, 0};
  return sk_split_range(p.b, core_id, num_cores, 1);
}

int32_t rows_run(const sk_kernel_args* args, const sk_core_ctx* core, bool sample) {
  const ErrorSink err = sink_of(core);
  RowsPlan p;
  if (!check_core(core, sample ? kSample : kArgmax, err) || !plan_rows(args, sample, &p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  SampleScratch scratch;  // argmax needs none
  if (sample) {
    scratch = carve_sample_scratch(p.v, p.attrs, nullptr);
    if (scratch.bytes > 0 && (args->workspace == nullptr || args->workspace_size < scratch.bytes)) {
      return workspace_too_small(err, kSample, args, scratch.bytes);
    }
  }
  const auto no_boundary = [&](int64_t b) {
    invalid(err, "%s: internal error: no nucleus boundary found in row %lld (its exact sums disagree)", kSample,
            static_cast<long long>(b));
    return SK_ERR_INTERNAL;
  };
  if (sample && together(p, core->num_cores) && core->sync_cores != nullptr) {
    SampleTogether shared(p, args, core);
    for (int64_t b = 0; b < p.b; ++b) {
      const int64_t id = shared.row(p.logits.row(b), b);
      if (id == -3) return SK_ERR_ABORTED;
      if (id == -1) return no_boundary(b);
      if (id >= 0) p.ids[b * p.ids_stride] = static_cast<int32_t>(id);
    }
    return SK_OK;
  }
  // Whole rows per core. Sharing rows without sync_cores (a context built by hand, cores run one
  // at a time), core 0 samples every row alone, as the access callback declares.
  const sk_range r = own_rows(p, sample, core->core_id, core->num_cores);
  if (r.begin >= r.end) return SK_OK;
  if (sample) scratch = carve_sample_scratch(p.v, p.attrs, core_slice(args, core));
  for (int64_t b = r.begin; b < r.end; ++b) {
    const float* l = p.logits.row(b);
    const int64_t id = sample ? sample_row(p, l, b, scratch) : topk::argmax(l, p.v);
    if (id < 0) return no_boundary(b);
    p.ids[b * p.ids_stride] = static_cast<int32_t>(id);
  }
  return SK_OK;
}

int32_t rows_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                    int32_t capacity, bool sample) {
  RowsPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_rows(args, sample, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  // Rows shared by the cores: each reads all of them (core 0's boundary search and draw read any
  // logit); every core writes the ids of own_rows.
  const bool shared = sample && together(p, num_cores);
  const sk_range r = own_rows(p, sample, core_id, num_cores);
  const sk_range read = shared ? sk_range{0, p.b} : r;
  RangeList list(ranges, capacity);
  if (read.begin >= read.end) return list.finish();
  moe::add_block(list, 0, SK_ACCESS_READ, args->inputs[0], read.begin, read.end, 0, p.v);
  if (sample) moe::add_whole(list, 1, SK_ACCESS_READ, args->inputs[1]);
  const int32_t out = sample ? 2 : 1;
  for (int64_t b = r.begin; b < r.end; ++b) {
    const int64_t off = b * p.ids_stride * static_cast<int64_t>(sizeof(int32_t));
    list.add(out, SK_ACCESS_WRITE, off, off + static_cast<int64_t>(sizeof(int32_t)));
  }
  return list.finish();
}

}  // namespace

int32_t argmax_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) { return rows_run(args, core, false); }
int32_t argmax_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                          int32_t capacity) {
  return rows_access(args, core_id, num_cores, ranges, capacity, false);
}
int32_t sample_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) { return rows_run(args, core, true); }
// From shapes and attributes only (operands have no address yet). Arguments run will reject need
// no scratch: it reports them before touching any.
uint64_t sample_f32_workspace(const sk_kernel_args* args) {
  sk_sample_attrs a{};
  if (args->num_inputs < 1 || args->inputs[0].rank != 2 || !moe::read_attrs(args, &a) || a.top_k < 0 ||
      args->inputs[0].shape[1] < 0) {
    return 0;
  }
  return carve_sample_scratch(args->inputs[0].shape[1], a, nullptr).bytes;
}
int32_t sample_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                          int32_t capacity) {
  return rows_access(args, core_id, num_cores, ranges, capacity, true);
}

}  // namespace sk::kernels
