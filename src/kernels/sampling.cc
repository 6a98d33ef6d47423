// argmax.f32 and sample.f32: token selection from logits [B, V], one row per core at a time.
//
// sample.f32 must give the same token on every ISA and in the reference, and a token depends on
// where a uniform number falls in a cumulative sum of up to V = 128k probabilities, so every
// operation on the way is specified exactly (docs/kernels_moe.md, "sample.f32 arithmetic"):
// weights are computed in double with exp_spec() below (a fixed Cody-Waite reduction and
// degree-11 Taylor polynomial, no fused multiply-add), summed in a fixed order, and compared
// against a uniform number from Philox4x32-10 keyed by (seed, step, row). The scalar, AVX2 and
// AVX-512 paths perform the identical IEEE operations, so they agree bit for bit; the SIMD
// paths exist for the pass over all V logits (max, weights, block sums).
//
// Selection (top-k, nucleus) ranks logits by value, ties to the lower index, NaN last (see
// moe_topk.h); top-k is a partial selection (a k-heap behind a SIMD threshold filter) and the
// nucleus sorts only the key-order prefix it needs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

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

constexpr double kLog2e = 1.4426950408889634;
constexpr double kMagic = 6755399441055744.0;          // 1.5 * 2^52: adding it rounds to an integer
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 21 significant bits: n * kLn2Hi is exact
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kMinX = -708.0;  // exp_spec(x) = 0 below (2^n stays a normal number above)
constexpr double kC[12] = {1.0,         1.0,          1.0 / 2.0,     1.0 / 6.0,      1.0 / 24.0,      1.0 / 120.0,
                           1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0};
constexpr int kBlock = 8;  // weights are summed in blocks of 8 indices (dense path)

// Hides a product from the optimiser so it cannot be fused with the following addition: GCC
// contracts a * b + c into an FMA by default in C++ wherever the target has FMA, which would
// change the bits of the AVX2/AVX-512 paths (and of the scalar path in -march=native builds).
inline double opaque(double v) {
#if SK_KERNELS_X86
  __asm__("" : "+x"(v));
  return v;
#else
  volatile double t = v;
  return t;
#endif
}

inline int64_t bits_of(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

double exp_spec(double x) {
  if (!(x >= kMinX)) return 0.0;
  const double t = opaque(x * kLog2e) + kMagic;
  const double n = t - kMagic;
  const int64_t ni = bits_of(t) - bits_of(kMagic);
  const double r = (x - opaque(n * kLn2Hi)) - opaque(n * kLn2Lo);
  double p = kC[11];
  for (int i = 10; i >= 0; --i) p = opaque(p * r) + kC[i];
  const uint64_t sb = static_cast<uint64_t>(ni + 1023) << 52;
  double s;
  std::memcpy(&s, &sb, sizeof s);
  // Opaque too: the weight is summed next, and that sum must not absorb this product.
  return opaque(p * s);
}

// Unnormalised probability of logit l when the largest logit is lmax (> -inf).
double weight(float l, float lmax, double inv_t) {
  if (l != l) return 0.0;
  if (l == lmax) return 1.0;
  return exp_spec((static_cast<double>(l) - static_cast<double>(lmax)) * inv_t);
}

// Weights of l[0, count) (count <= 8; missing ones are 0) summed as
// ((w0 + w4) + (w2 + w6)) + ((w1 + w5) + (w3 + w7)), the order a 4-lane fold gives. The weights
// also go to w_out[0, count) when it is not null.
double block_scalar(const float* l, int64_t count, float lmax, double inv_t, double* w_out) {
  double w[kBlock] = {};
  for (int64_t e = 0; e < count; ++e) w[e] = weight(l[e], lmax, inv_t);
  if (w_out != nullptr) std::copy(w, w + count, w_out);
  const double v0 = w[0] + w[4];
  const double v1 = w[1] + w[5];
  const double v2 = w[2] + w[6];
  const double v3 = w[3] + w[7];
  return (v0 + v2) + (v1 + v3);
}

// beta[j] = block sum of indices [8j, 8j + 8); w (when not null) receives every weight. Returns
// the sum of the betas, added one after the other from 0.
using BlocksFn = double (*)(const float* l, int64_t v, float lmax, double inv_t, double* beta, double* w);

double blocks_scalar(const float* l, int64_t v, float lmax, double inv_t, double* beta, double* w) {
  double s = 0.0;
  for (int64_t j = 0; j * kBlock < v; ++j) {
    beta[j] = block_scalar(l + j * kBlock, std::min<int64_t>(kBlock, v - j * kBlock), lmax, inv_t,
                           w != nullptr ? w + j * kBlock : nullptr);
    s += beta[j];
  }
  return s;
}

#if SK_KERNELS_X86
// The SIMD paths evaluate kLanes vectors side by side: each lane performs exactly the scalar
// operations, and interleaving independent lanes hides the polynomial's latency.
constexpr int kLanes = 4;

SK_TARGET_AVX2 inline __m256d opaque4(__m256d v) {
  __asm__("" : "+x"(v));
  return v;
}

// weight() of 4 x 4 consecutive logits l[0, 16) into w[0..3] (lanes of 4 doubles).
SK_TARGET_AVX2 inline void weights_avx2(const float* l, __m256d lm, __m256d inv_t, __m256d* w) {
  const __m256d min_x = _mm256_set1_pd(kMinX);
  const __m256d magic = _mm256_set1_pd(kMagic);
  __m256d lv[kLanes], xc[kLanes], n[kLanes], r[kLanes], p[kLanes];
  __m256i ni[kLanes];
  for (int v = 0; v < kLanes; ++v) {
    lv[v] = _mm256_cvtps_pd(_mm_loadu_ps(l + 4 * v));
    // Equal to x in every lane where x >= kMinX; keeps the others in range (zeroed below).
    xc[v] = _mm256_max_pd(_mm256_mul_pd(_mm256_sub_pd(lv[v], lm), inv_t), min_x);
  }
  for (int v = 0; v < kLanes; ++v) {
    const __m256d t = _mm256_add_pd(opaque4(_mm256_mul_pd(xc[v], _mm256_set1_pd(kLog2e))), magic);
    n[v] = _mm256_sub_pd(t, magic);
    ni[v] = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(magic));
  }
  for (int v = 0; v < kLanes; ++v) {
    r[v] = _mm256_sub_pd(_mm256_sub_pd(xc[v], opaque4(_mm256_mul_pd(n[v], _mm256_set1_pd(kLn2Hi)))),
                         opaque4(_mm256_mul_pd(n[v], _mm256_set1_pd(kLn2Lo))));
    p[v] = _mm256_set1_pd(kC[11]);
  }
  for (int i = 10; i >= 0; --i) {
    for (int v = 0; v < kLanes; ++v) p[v] = _mm256_add_pd(opaque4(_mm256_mul_pd(p[v], r[v])), _mm256_set1_pd(kC[i]));
  }
  for (int v = 0; v < kLanes; ++v) {
    const __m256d x = _mm256_mul_pd(_mm256_sub_pd(lv[v], lm), inv_t);
    const __m256d s = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(ni[v], _mm256_set1_epi64x(1023)), 52));
    const __m256d e = _mm256_and_pd(_mm256_mul_pd(p[v], s), _mm256_cmp_pd(x, min_x, _CMP_GE_OQ));
    const __m256d one = _mm256_blendv_pd(e, _mm256_set1_pd(1.0), _mm256_cmp_pd(lv[v], lm, _CMP_EQ_OQ));
    // Opaque like exp_spec's result: the fold adds these next.
    w[v] = opaque4(_mm256_andnot_pd(_mm256_cmp_pd(lv[v], lv[v], _CMP_UNORD_Q), one));
  }
}

// ((w0 + w4) + (w2 + w6)) + ((w1 + w5) + (w3 + w7)) of lo = w0..w3, hi = w4..w7.
SK_TARGET_AVX2 inline double fold_avx2(__m256d lo, __m256d hi) {
  const __m256d q = _mm256_add_pd(lo, hi);
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd(q, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

SK_TARGET_AVX2 double blocks_avx2(const float* l, int64_t v, float lmax, double inv_t, double* beta, double* w) {
  constexpr int64_t kStep = 4 * kLanes;  // two blocks
  const __m256d lm = _mm256_set1_pd(lmax);
  const __m256d it = _mm256_set1_pd(inv_t);
  double s = 0.0;
  int64_t i = 0;
  for (; i + kStep <= v; i += kStep) {
    __m256d wv[kLanes];
    weights_avx2(l + i, lm, it, wv);
    if (w != nullptr) {
      for (int q = 0; q < kLanes; ++q) _mm256_storeu_pd(w + i + 4 * q, wv[q]);
    }
    beta[i / kBlock] = fold_avx2(wv[0], wv[1]);
    s += beta[i / kBlock];
    beta[i / kBlock + 1] = fold_avx2(wv[2], wv[3]);
    s += beta[i / kBlock + 1];
  }
  for (; i < v; i += kBlock) {
    beta[i / kBlock] =
        block_scalar(l + i, std::min<int64_t>(kBlock, v - i), lmax, inv_t, w != nullptr ? w + i : nullptr);
    s += beta[i / kBlock];
  }
  return s;
}

SK_TARGET_AVX512 inline __m512d opaque8(__m512d v) {
  __asm__("" : "+v"(v));
  return v;
}

// weight() of 4 x 8 consecutive logits l[0, 32) into w[0..3] (one block of 8 each).
SK_TARGET_AVX512 inline void weights_avx512(const float* l, __m512d lm, __m512d inv_t, __m512d* w) {
  const __m512d min_x = _mm512_set1_pd(kMinX);
  const __m512d magic = _mm512_set1_pd(kMagic);
  __m512d lv[kLanes], xc[kLanes], n[kLanes], r[kLanes], p[kLanes];
  __m512i ni[kLanes];
  for (int v = 0; v < kLanes; ++v) {
    lv[v] = _mm512_cvtps_pd(_mm256_loadu_ps(l + 8 * v));
    xc[v] = _mm512_max_pd(_mm512_mul_pd(_mm512_sub_pd(lv[v], lm), inv_t), min_x);
  }
  for (int v = 0; v < kLanes; ++v) {
    const __m512d t = _mm512_add_pd(opaque8(_mm512_mul_pd(xc[v], _mm512_set1_pd(kLog2e))), magic);
    n[v] = _mm512_sub_pd(t, magic);
    ni[v] = _mm512_sub_epi64(_mm512_castpd_si512(t), _mm512_castpd_si512(magic));
  }
  for (int v = 0; v < kLanes; ++v) {
    r[v] = _mm512_sub_pd(_mm512_sub_pd(xc[v], opaque8(_mm512_mul_pd(n[v], _mm512_set1_pd(kLn2Hi)))),
                         opaque8(_mm512_mul_pd(n[v], _mm512_set1_pd(kLn2Lo))));
    p[v] = _mm512_set1_pd(kC[11]);
  }
  for (int i = 10; i >= 0; --i) {
    for (int v = 0; v < kLanes; ++v) p[v] = _mm512_add_pd(opaque8(_mm512_mul_pd(p[v], r[v])), _mm512_set1_pd(kC[i]));
  }
  for (int v = 0; v < kLanes; ++v) {
    const __m512d x = _mm512_mul_pd(_mm512_sub_pd(lv[v], lm), inv_t);
    const __m512d s = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(ni[v], _mm512_set1_epi64(1023)), 52));
    const __m512d e = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, min_x, _CMP_GE_OQ), _mm512_mul_pd(p[v], s));
    const __m512d one = _mm512_mask_mov_pd(e, _mm512_cmp_pd_mask(lv[v], lm, _CMP_EQ_OQ), _mm512_set1_pd(1.0));
    w[v] = opaque8(_mm512_maskz_mov_pd(_mm512_cmp_pd_mask(lv[v], lv[v], _CMP_ORD_Q), one));
  }
}

SK_TARGET_AVX512 double blocks_avx512(const float* l, int64_t v, float lmax, double inv_t, double* beta, double* w) {
  constexpr int64_t kStep = 8 * kLanes;  // four blocks
  const __m512d lm = _mm512_set1_pd(lmax);
  const __m512d it = _mm512_set1_pd(inv_t);
  double s = 0.0;
  int64_t i = 0;
  for (; i + kStep <= v; i += kStep) {
    __m512d wv[kLanes];
    weights_avx512(l + i, lm, it, wv);
    for (int q = 0; q < kLanes; ++q) {
      if (w != nullptr) _mm512_storeu_pd(w + i + 8 * q, wv[q]);
      // Folded as in fold_avx2: (w0..w3) + (w4..w7), then the two 128-bit halves.
      const __m256d h4 = _mm256_add_pd(_mm512_castpd512_pd256(wv[q]), _mm512_extractf64x4_pd(wv[q], 1));
      const __m128d h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
      beta[i / kBlock + q] = _mm_cvtsd_f64(_mm_add_sd(h2, _mm_unpackhi_pd(h2, h2)));
      s += beta[i / kBlock + q];
    }
  }
  for (; i < v; i += kBlock) {
    beta[i / kBlock] =
        block_scalar(l + i, std::min<int64_t>(kBlock, v - i), lmax, inv_t, w != nullptr ? w + i : nullptr);
    s += beta[i / kBlock];
  }
  return s;
}
#endif

BlocksFn select_blocks() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return blocks_avx512;
    case kIsaAvx2:
      return blocks_avx2;
    default:
      break;
  }
#endif
  return blocks_scalar;
}

// Writes to idx every i in [0, n) with l[i] >= lambda (never NaN), in increasing order; returns
// their count. idx needs room for n. Branch-free: about half the elements pass in a flat
// distribution, and a branch per element would mispredict.
using GatherFn = int64_t (*)(const float* l, int64_t n, float lambda, uint32_t* idx);

// Indices [begin, end) into idx[0, ...).
int64_t gather_range(const float* l, int64_t begin, int64_t end, float lambda, uint32_t* idx) {
  int64_t count = 0;
  for (int64_t i = begin; i < end; ++i) {
    idx[count] = static_cast<uint32_t>(i);
    count += l[i] >= lambda ? 1 : 0;
  }
  return count;
}

int64_t gather_scalar(const float* l, int64_t n, float lambda, uint32_t* idx) {
  return gather_range(l, 0, n, lambda, idx);
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 int64_t gather_avx2(const float* l, int64_t n, float lambda, uint32_t* idx) {
  const __m256 lam = _mm256_set1_ps(lambda);
  int64_t count = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const auto bits = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(l + i), lam, _CMP_GE_OQ)));
    if (bits == 0) continue;
    for (int b = 0; b < 8; ++b) {
      idx[count] = static_cast<uint32_t>(i + b);
      count += (bits >> b) & 1u;
    }
  }
  return count + gather_range(l, i, n, lambda, idx + count);
}

SK_TARGET_AVX512 int64_t gather_avx512(const float* l, int64_t n, float lambda, uint32_t* idx) {
  const __m512 lam = _mm512_set1_ps(lambda);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t count = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(l + i), lam, _CMP_GE_OQ);
    if (m == 0) continue;
    const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i)));
    // Compress in a register and store all 16 lanes (count <= i, so they fit in idx): a
    // compressing store to memory is microcoded and slow on some cores.
    _mm512_storeu_si512(idx + count, _mm512_maskz_compress_epi32(m, ids));
    count += __builtin_popcount(static_cast<unsigned>(m));
  }
  return count + gather_range(l, i, n, lambda, idx + count);
}
#endif

GatherFn select_gather() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return gather_avx512;
    case kIsaAvx2:
      return gather_avx2;
    default:
      break;
  }
#endif
  return gather_scalar;
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

// Uniform in [0, 1) with 53 random bits, a pure function of (seed, step, row).
double uniform(uint64_t seed, int64_t step, int64_t row) {
  const auto st = static_cast<uint64_t>(step);
  uint32_t c[4] = {static_cast<uint32_t>(st), static_cast<uint32_t>(st >> 32), static_cast<uint32_t>(row), 0u};
  philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t u53 = (static_cast<uint64_t>(c[0]) << 21) | (c[1] >> 11);
  return static_cast<double>(u53) * 0x1.0p-53;
}

// ---------------------------------------------------------------------------------------------
// Sampling from a ranked sequence c_0, c_1, ... (best first)

// A fixed-capacity array in the core's workspace slice, with the few vector operations the
// sampler uses. Capacities come from the vocabulary size, which bounds every length here.
template <class T>
class Bounded {
 public:
  Bounded() = default;
  Bounded(T* data, int64_t capacity) : data_(data), capacity_(static_cast<size_t>(capacity)) {}
  void resize(size_t n) {
    if (n > capacity_) __builtin_trap();  // a sizing bug in sample_workspace, never input-driven
    size_ = n;
  }
  void assign(size_t n, T value) {
    resize(n);
    std::fill(data_, data_ + n, value);
  }
  void swap(Bounded& other) { std::swap(*this, other); }
  T* data() { return data_; }
  size_t size() const { return size_; }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

struct Sequence {
  Bounded<uint32_t> idx;
  Bounded<double> w;
  Bounded<double> cum;
};

// Weights (from `table` when given, else computed) and running sums of the first n entries.
void cumulate(const float* l, const double* table, Sequence& s, int64_t n, float lmax, double inv_t) {
  s.w.resize(static_cast<size_t>(n));
  s.cum.resize(static_cast<size_t>(n));
  double c = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t i = s.idx[j];
    s.w[j] = table != nullptr ? table[i] : weight(l[i], lmax, inv_t);
    c += s.w[j];
    s.cum[j] = c;
  }
}

// 1 + the first j with cum_j >= tau, or 0 when none.
int64_t nucleus_size(const Sequence& s, int64_t n, double tau) {
  for (int64_t j = 0; j < n; ++j) {
    if (s.cum[j] >= tau) return j + 1;
  }
  return 0;
}

// The first j < m with cum_j > u * cum_{m-1}, else the last j < m with a positive weight.
int64_t pick(const Sequence& s, int64_t m, double u) {
  const double r = u * s.cum[m - 1];
  for (int64_t j = 0; j < m; ++j) {
    if (s.cum[j] > r) return s.idx[j];
  }
  for (int64_t j = m; j-- > 0;) {
    if (s.w[j] > 0.0) return s.idx[j];
  }
  return s.idx[0];
}

// Orders idx[0, n) (increasing on entry) by logit, largest first: a stable LSD radix sort on
// the order-preserving bits (3 digits of 11 bits), so equal logits keep the lower index first,
// exactly the ranking of moe_topk.h. Digits in which every key agrees are skipped.
constexpr int kDigits = 3;
constexpr int kBits = 11;
constexpr int kRadix = 1 << kBits;

void rank_indices(const float* l, Bounded<uint32_t>& idx, int64_t n, Bounded<uint64_t>& a, Bounded<uint64_t>& b,
                  Bounded<int64_t>& count) {
  if (n <= 1) return;
  a.resize(static_cast<size_t>(n));
  b.resize(static_cast<size_t>(n));
  count.assign(static_cast<size_t>(kDigits * (kRadix + 1)), 0);
  const auto digit = [](uint64_t v, int d) { return static_cast<int64_t>((v >> (32 + kBits * d)) & (kRadix - 1)); };
  for (int64_t j = 0; j < n; ++j) {
    a[j] = (static_cast<uint64_t>(~topk::order_bits(l[idx[j]])) << 32) | idx[j];
    for (int d = 0; d < kDigits; ++d) ++count[d * (kRadix + 1) + digit(a[j], d) + 1];
  }
  for (int d = 0; d < kDigits; ++d) {
    int64_t* c = &count[static_cast<size_t>(d * (kRadix + 1))];
    if (c[digit(a[0], d) + 1] == n) continue;
    for (int q = 0; q < kRadix; ++q) c[q + 1] += c[q];
    for (int64_t j = 0; j < n; ++j) b[c[digit(a[j], d)]++] = a[j];
    a.swap(b);
  }
  for (int64_t j = 0; j < n; ++j) idx[j] = static_cast<uint32_t>(a[j]);
}

// A smaller c for the gather than the worst-case bound: the weights of the n gathered tokens
// (index order, from the table) binned by quarter octave; the first bin edge above which they
// hold tau (with a margin for this sum's rounding) gives c = -ln(edge), plus a margin for
// exp_spec's deviation from exp. Only a guess: the exact sums still decide.
double refine_c(const double* table, const uint32_t* idx, int64_t n, double tau) {
  constexpr int kBins = 256;
  double mass[kBins] = {};
  for (int64_t j = 0; j < n; ++j) {
    const double w = table[idx[j]];
    if (!(w > 0.0)) continue;
    // Exponent and the top two mantissa bits: 4 bins per octave, bin 3 holds w = 1.
    const int64_t q = 4095 - (bits_of(w) >> 50);
    mass[std::clamp<int64_t>(q, 0, kBins - 1)] += w;
  }
  double acc = 0.0;
  for (int q = 0; q < kBins - 1; ++q) {
    acc += mass[q];
    if (acc >= tau * (1.0 + 1e-9)) {
      const uint64_t edge_bits = static_cast<uint64_t>(4095 - q) << 50;
      double edge;
      std::memcpy(&edge, &edge_bits, sizeof edge);
      return -std::log(edge) + 0.01;
    }
  }
  return std::numeric_limits<double>::infinity();
}

constexpr int64_t kFastChunk = 32;  // weights per step of the fast nucleus path (4 AVX-512 vectors)
// Logits per block of the fast nucleus path's maximum pass, which records each block's largest
// logit so that a gather skips the blocks that hold no candidate (most of a peaked row's).
constexpr int64_t kGatherBlock = 1024;

// One core's scratch for sampling a row of V logits, carved from its workspace slice.
struct SampleScratch {
  Sequence seq;
  Bounded<float> vals;       // gathered logits (fast nucleus path)
  Bounded<float> block_max;  // the largest logit of each gather block (fast nucleus path)
  Bounded<uint64_t> keys;
  Bounded<double> beta;
  Bounded<double> w;
  Bounded<uint64_t> sort_a;
  Bounded<uint64_t> sort_b;
  Bounded<int64_t> sort_count;
  uint64_t bytes = 0;  // of the slice it occupies
};

// Sized for the one path sample_row takes with these attributes: nothing for temperature 0
// (argmax), k entries for top-k, the block sums for the dense walk, and V-long ranking, weight
// and radix-sort buffers only for top-p over the whole vocabulary.
SampleScratch carve_sample_scratch(int64_t v, const sk_sample_attrs& a, void* base) {
  const bool argmax = a.temperature == 0.0f;
  const bool top_k = !argmax && a.top_k > 0 && a.top_k < v;
  const bool nucleus_all = !argmax && !top_k && a.top_p < 1.0f;
  const int64_t k = top_k ? a.top_k : 0;
  const int64_t seq = top_k ? k : nucleus_all ? v : 0;
  const int64_t blocks = argmax || top_k ? 0 : (v + kBlock - 1) / kBlock;
  const int64_t full = nucleus_all ? v : 0;
  const int64_t bins = nucleus_all ? kDigits * (kRadix + 1) : 0;
  ScratchCarver c(base);
  SampleScratch s;
  // The fast nucleus path evaluates weights 32 at a time past the end of the gathered tokens.
  const int64_t padded = nucleus_all ? v + kFastChunk : seq;
  s.seq.idx = Bounded<uint32_t>(c.take<uint32_t>(seq), seq);
  s.seq.w = Bounded<double>(c.take<double>(padded), padded);
  s.vals = Bounded<float>(c.take<float>(nucleus_all ? padded : 0), nucleus_all ? padded : 0);
  const int64_t gather_blocks = nucleus_all ? (v + kGatherBlock - 1) / kGatherBlock : 0;
  s.block_max = Bounded<float>(c.take<float>(gather_blocks), gather_blocks);
  s.seq.cum = Bounded<double>(c.take<double>(seq), seq);
  s.keys = Bounded<uint64_t>(c.take<uint64_t>(k), k);
  s.beta = Bounded<double>(c.take<double>(blocks), blocks);
  s.w = Bounded<double>(c.take<double>(full), full);
  s.sort_a = Bounded<uint64_t>(c.take<uint64_t>(full), full);
  s.sort_b = Bounded<uint64_t>(c.take<uint64_t>(full), full);
  s.sort_count = Bounded<int64_t>(c.take<int64_t>(bins), bins);
  s.bytes = c.bytes();
  return s;
}

// Every index [0, V) is a candidate and there is no nucleus: walk the block sums.
int64_t sample_dense(const float* l, int64_t v, float lmax, double inv_t, double u, SampleScratch& sc) {
  const int64_t blocks = (v + kBlock - 1) / kBlock;
  sc.beta.resize(static_cast<size_t>(blocks));
  const double total = select_blocks()(l, v, lmax, inv_t, sc.beta.data(), nullptr);
  const double r = u * total;
  double run = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const double next = run + sc.beta[j];
    if (next > r) {
      double acc = run;
      int64_t last = -1;
      for (int64_t i = j * kBlock; i < std::min(v, (j + 1) * kBlock); ++i) {
        const double w = weight(l[i], lmax, inv_t);
        if (w > 0.0) last = i;
        acc += w;
        if (acc > r) return i;
      }
      return last;
    }
    run = next;
  }
  // u * total rounded up to total: the last index with a positive weight.
  for (int64_t j = blocks; j-- > 0;) {
    if (sc.beta[j] > 0.0) {
      for (int64_t i = std::min(v, (j + 1) * kBlock); i-- > j * kBlock;) {
        if (weight(l[i], lmax, inv_t) > 0.0) return i;
      }
    }
  }
  return 0;  // unreachable: the maximum has weight 1
}

// Every index is a candidate, with a nucleus: tau = top_p * (the dense block total). The
// nucleus is a prefix of the ranking, so only a prefix needs ranking: {l >= lambda} for a
// threshold lambda = lmax - c * temperature. c0 comes from the bound "each of the V tokens left
// out weighs below e^-c" (V e^-c0 <= the slack (1 - top_p) * total); when that gathers many
// tokens, refine_c() guesses a tighter c from their weights. The exact running sums then decide;
// when they fall short, c grows (c0, then doubling), and past c = 708 every token is gathered.
int64_t sample_nucleus_all(const float* l, int64_t v, float lmax, double inv_t, double top_p, double u,
                           SampleScratch& sc) {
  constexpr int64_t kRefineAbove = 2048;
  const int64_t blocks = (v + kBlock - 1) / kBlock;
  sc.beta.resize(static_cast<size_t>(blocks));
  sc.w.resize(static_cast<size_t>(v));
  const double total = select_blocks()(l, v, lmax, inv_t, sc.beta.data(), sc.w.data());
  const double tau = top_p * total;
  const double c0 = std::max(0.5, std::log(static_cast<double>(v) / ((1.0 - top_p) * total)) + 0.01);
  sc.seq.idx.resize(static_cast<size_t>(v));
  uint32_t* idx = sc.seq.idx.data();
  const GatherFn gather = select_gather();
  const auto threshold = [&](double c) {
    // Any threshold gathers a prefix of the ranking; with lmax = +inf the +inf tokens hold all
    // the mass.
    if (c >= -kMinX) return -std::numeric_limits<float>::infinity();
    return std::isinf(lmax) ? lmax : static_cast<float>(static_cast<double>(lmax) - c / inv_t);
  };
  double c = c0;
  int64_t n = gather(l, v, threshold(c), idx);
  if (n > kRefineAbove && !std::isinf(lmax)) {
    const double c1 = refine_c(sc.w.data(), idx, n, tau);
    if (c1 < c0) {
      // Keeps index order, which the ranking's tie-break relies on.
      const float lambda = threshold(c1);
      int64_t kept = 0;
      for (int64_t j = 0; j < n; ++j) {
        const uint32_t i = idx[j];
        idx[kept] = i;
        kept += l[i] >= lambda ? 1 : 0;
      }
      n = kept;
      c = c1;
    }
  }
  for (;;) {
    rank_indices(l, sc.seq.idx, n, sc.sort_a, sc.sort_b, sc.sort_count);
    cumulate(l, sc.w.data(), sc.seq, n, lmax, inv_t);
    int64_t m = nucleus_size(sc.seq, n, tau);
    // Every token with a weight is in: no prefix reaches tau, so all of them take part.
    if (m == 0 && c >= -kMinX) m = n;
    if (m > 0) return pick(sc.seq, m, u);
    c = std::isinf(lmax) ? -kMinX : c < c0 ? c0 : 2.0 * c;
    n = gather(l, v, threshold(c), idx);
  }
}

#if SK_KERNELS_X86
// ---------------------------------------------------------------------------------------------
// The nucleus over the whole vocabulary without the exact pass over all V weights (AVX2, AVX-512).
//
// The exact total S decides only through tau = top_p * S, and the nucleus size only through
// which running sum first reaches tau. So: an f32 pass gives approximate weights with a rigorous
// error bound; a prefix of the ranking {l >= lambda} (heavy tokens first, else lambda from a
// sampled mass profile) is weighed exactly, which bounds S by that exact sum plus the
// approximate rest, and its running sums are formed exactly where they matter (bucket_prefix); when the first running
// sums reaching the lowest and the highest possible tau are the same entry, that is the nucleus, with the identical
// running sums and hence the identical token. Otherwise (rare: tau falls within the bound of a running sum) the exact S
// decides; a prefix too short, or lmax = +inf, goes to the exact path above.

// The thresholds of the sampled mass profile, in log2 units below the largest weight.
// Quarter steps up to 7: a coarser step makes the guess overshoot by a large factor of tokens
// whenever the sampled mass falls just short of a step (measured on flat rows: c = 8 instead of
// about 4.5, twice the tokens).
constexpr float kProfile[] = {0.25f, 0.5f,  0.75f, 1.0f,  1.25f, 1.5f,  1.75f, 2.0f,  2.25f, 2.5f,  2.75f,
                              3.0f,  3.25f, 3.5f,  3.75f, 4.0f,  4.25f, 4.5f,  4.75f, 5.0f,  5.25f, 5.5f,
                              5.75f, 6.0f,  6.25f, 6.5f,  6.75f, 7.0f,  8.0f,  10.0f, 13.0f, 16.0f, 24.0f};
constexpr int kProfileSize = sizeof kProfile / sizeof kProfile[0];
constexpr int kProfileStride = 16;  // the profile samples every 16th vector of 16 logits
constexpr double kHeavy = 1024.0;   // heavy tokens weigh at least S~ / kHeavy

// Approximate weights of 16 logits: 2^t with t = (l - lmax) * a, a = log2(e) / temperature,
// clamped below at -150 (NaN included: max() returns its second operand), so NaN and -inf give
// a weight below 2^-149. t_out receives t.
SK_TARGET_AVX512 inline __m512 approx_weights16(__m512 l, __m512 lm, __m512 a, __m512* t_out) {
  const __m512 t = _mm512_max_ps(_mm512_mul_ps(_mm512_sub_ps(l, lm), a), _mm512_set1_ps(-150.0f));
  const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, k);
  __m512 p = _mm512_set1_ps(kExp2C[kExp2Degree]);
  for (int i = kExp2Degree - 1; i >= 0; --i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2C[i]));
  *t_out = t;
  return _mm512_scalef_ps(p, k);
}

// Lanes 8..15 (AVX-512F has no 256-bit float extract).
SK_TARGET_AVX512 inline __m256 high_half(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

struct ApproxTotal {
  double sum = 0.0;                   // S~
  double tsum = 0.0;                  // sum of w~ |t| (the part of the error that grows with |t|)
  double profile[kProfileSize] = {};  // sampled mass with t >= -kProfile[j]
  double sampled = 0.0;               // sampled mass in all
};

SK_TARGET_AVX512 ApproxTotal approx_total_avx512(const float* l, int64_t v, float lmax, double inv_t) {
  const __m512 lm = _mm512_set1_ps(lmax);
  const __m512 a = _mm512_set1_ps(static_cast<float>(inv_t * kLog2e));
  __m512d acc0 = _mm512_setzero_pd();
  __m512d acc1 = _mm512_setzero_pd();
  __m512 tacc = _mm512_setzero_ps();
  __m512 prof[kProfileSize];
  for (__m512& q : prof) q = _mm512_setzero_ps();
  __m512 sampled = _mm512_setzero_ps();
  int64_t i = 0;
  int64_t vec = 0;
  for (; i + 64 <= v; i += 64, vec += 4) {
    __m512 t[4];
    __m512 w[4];
    for (int q = 0; q < 4; ++q) {
      w[q] = approx_weights16(_mm512_loadu_ps(l + i + 16 * q), lm, a, &t[q]);
      tacc = _mm512_fnmadd_ps(w[q], t[q], tacc);  // t <= 0: adds w |t|
    }
    // Pairwise in f32 first (two roundings per weight, 2^-23 relative), then in double.
    const __m512 w4 = _mm512_add_ps(_mm512_add_ps(w[0], w[1]), _mm512_add_ps(w[2], w[3]));
    acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(w4)));
    acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(high_half(w4)));
    if (vec % kProfileStride == 0) {
      sampled = _mm512_add_ps(sampled, w[0]);
      for (int j = 0; j < kProfileSize; ++j) {
        const __mmask16 m = _mm512_cmp_ps_mask(t[0], _mm512_set1_ps(-kProfile[j]), _CMP_GE_OQ);
        prof[j] = _mm512_mask_add_ps(prof[j], m, prof[j], w[0]);
      }
    }
  }
  for (; i < v; i += 16) {
    const __mmask16 m = simd::mask16(std::min<int64_t>(16, v - i));
    __m512 t;
    const __m512 w = _mm512_maskz_mov_ps(m, approx_weights16(simd::masked_load_ps(m, l + i), lm, a, &t));
    tacc = _mm512_fnmadd_ps(w, t, tacc);
    acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(w)));
    acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(high_half(w)));
  }
  ApproxTotal r;
  alignas(64) double d[8];
  _mm512_store_pd(d, _mm512_add_pd(acc0, acc1));
  for (double x : d) r.sum += x;
  r.tsum = simd::hsum16(tacc);
  r.sampled = simd::hsum16(sampled);
  for (int j = 0; j < kProfileSize; ++j) r.profile[j] = simd::hsum16(prof[j]);
  return r;
}

// Approximate mass of n logits, with the same per-token weights as approx_total_avx512.
SK_TARGET_AVX512 ApproxTotal approx_mass_avx512(const float* vals, int64_t n, float lmax, double inv_t) {
  const __m512 lm = _mm512_set1_ps(lmax);
  const __m512 a = _mm512_set1_ps(static_cast<float>(inv_t * kLog2e));
  __m512d acc = _mm512_setzero_pd();
  __m512 tacc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = simd::mask16(std::min<int64_t>(16, n - i));
    __m512 t;
    const __m512 w = _mm512_maskz_mov_ps(m, approx_weights16(simd::masked_load_ps(m, vals + i), lm, a, &t));
    tacc = _mm512_fnmadd_ps(w, t, tacc);
    acc = _mm512_add_pd(acc, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(w)), _mm512_cvtps_pd(high_half(w))));
  }
  ApproxTotal r;
  alignas(64) double d[8];
  _mm512_store_pd(d, acc);
  for (double x : d) r.sum += x;
  r.tsum = simd::hsum16(tacc);
  return r;
}

// The largest non-NaN logit of l[0, n) (-inf when there is none, like topk::max_value), and that
// of each kGatherBlock block of it in block_max.
SK_TARGET_AVX512 float block_maxima_avx512(const float* l, int64_t n, float* block_max) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b * kGatherBlock < n; ++b) {
    const int64_t end = std::min(n, (b + 1) * kGatherBlock);
    // max(x, m) returns m when x is NaN; four chains hide the latency.
    __m512 m[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    int64_t i = b * kGatherBlock;
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

// Gathers {i : l[i] >= lambda} in index order: indices to idx, logits to vals; returns the count.
// Blocks whose largest logit (block_max, from block_maxima_avx512) is below lambda are skipped.
SK_TARGET_AVX512 int64_t gather_values_avx512(const float* l, int64_t n, float lambda, const float* block_max,
                                              uint32_t* idx, float* vals) {
  const __m512 lam = _mm512_set1_ps(lambda);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t count = 0;
  for (int64_t i = 0; i < n; i += 16) {
    if (i % kGatherBlock == 0 && !(block_max[i / kGatherBlock] >= lambda)) {
      i += kGatherBlock - 16;
      continue;
    }
    const __mmask16 valid = simd::mask16(std::min<int64_t>(16, n - i));
    const __m512 x = simd::masked_load_ps(valid, l + i);
    const __mmask16 m = _mm512_mask_cmp_ps_mask(valid, x, lam, _CMP_GE_OQ);
    if (m == 0) continue;
    const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i)));
    const __mmask16 out = simd::mask16(__builtin_popcount(static_cast<unsigned>(m)));
    // Compress in registers, then a masked store: a compressing store to memory is microcoded
    // and slow on some cores.
    simd::masked_store_epi32(idx + count, out, _mm512_maskz_compress_epi32(m, ids));
    simd::masked_store_ps(vals + count, out, _mm512_maskz_compress_ps(m, x));
    count += __builtin_popcount(static_cast<unsigned>(m));
  }
  return count;
}

// The ranked prefix without a full sort. While the running sum c stays in one binade
// [2^(E-1), 2^E), every double there is a multiple of u = ulp(c), so c + w rounds to
// c + round(w / u) u, whatever the order of the additions, unless w / u is exactly halfway
// (then the last bit of c decides). So the prefix is bucketed by value (a stable counting sort
// on the top bits of the rank key; buckets are in rank order, tokens inside in index order), and
// a bucket is added in bulk as the exact integer sum of round(w / u) when no weight in it is a
// tie and its sum leaves c in its binade and below tau_lo; every other bucket (the first ones,
// where c changes binade, where tau is reached) is sorted and added one token at a time. The
// running sums are then exactly the specified ones at every token of a sorted bucket and at
// every bucket boundary, which is all that the nucleus size and the draw look at.
constexpr int kBucketBits = 10;
constexpr int64_t kBuckets = int64_t{1} << kBucketBits;

struct Buckets {
  uint64_t* keys = nullptr;       // (rank key << 32) | index, by bucket
  float* vals = nullptr;          // the logit of each entry
  double* w = nullptr;            // its specified weight
  double* cum = nullptr;          // running sums, valid in sorted buckets
  uint64_t* order = nullptr;      // add_sorted's scratch: (rank key, position in bucket)
  uint32_t* spare_idx = nullptr;  // add_sorted's scratch
  double* spare_w = nullptr;      // add_sorted's scratch
  int64_t start[kBuckets + 1] = {};
  double cum_before[kBuckets + 1] = {};  // exact running sum before each bucket (walked ones)
  bool sorted[kBuckets] = {};
  int64_t walked = 0;  // buckets whose cum_before is known
  uint32_t lo = 0;     // rank key of lmax
};

// Logit of a rank key relative to lo (inverse of order_bits; no NaN here, and both zeros come
// back as +0, which weighs the same).
inline float logit_of(uint64_t key, uint32_t lo) {
  const uint32_t o = ~(static_cast<uint32_t>(key >> 32) + lo);
  const uint32_t bits_v = o >= 0x80000000u ? (o & 0x7FFFFFFFu) : ~o;
  float f;
  std::memcpy(&f, &bits_v, sizeof f);
  return f;
}

// The specified weights of vals[0, n) into w[0, n) (vals padded to a multiple of kFastChunk).
SK_TARGET_AVX512 void exact_weights_avx512(const float* vals, int64_t n, float lmax, double inv_t, double* w) {
  const __m512d lm = _mm512_set1_pd(lmax);
  const __m512d it = _mm512_set1_pd(inv_t);
  for (int64_t j0 = 0; j0 < n; j0 += kFastChunk) {
    __m512d wv[kLanes];
    weights_avx512(vals + j0, lm, it, wv);
    for (int q = 0; q < kLanes; ++q) _mm512_storeu_pd(w + j0 + 8 * q, wv[q]);
  }
}

SK_TARGET_AVX2 void exact_weights_avx2(const float* vals, int64_t n, float lmax, double inv_t, double* w) {
  const __m256d lm = _mm256_set1_pd(lmax);
  const __m256d it = _mm256_set1_pd(inv_t);
  for (int64_t j0 = 0; j0 < n; j0 += 4 * kLanes) {
    __m256d wv[kLanes];
    weights_avx2(vals + j0, lm, it, wv);
    for (int q = 0; q < kLanes; ++q) _mm256_storeu_pd(w + j0 + 4 * q, wv[q]);
  }
}

using ExactWeightsFn = void (*)(const float* vals, int64_t n, float lmax, double inv_t, double* w);

// Buckets the gathered (vals, idx)[0, n) (index order) and evaluates every weight.
void bucket_prefix(const float* vals, uint32_t* idx, int64_t n, float lmax, double inv_t, SampleScratch& sc,
                   Buckets& bk, ExactWeightsFn exact_weights) {
  sc.sort_a.resize(static_cast<size_t>(n));
  sc.sort_b.resize(static_cast<size_t>(n));
  sc.seq.w.resize(static_cast<size_t>(n + kFastChunk));
  sc.seq.cum.resize(static_cast<size_t>(n));
  sc.w.resize(static_cast<size_t>(n));
  uint64_t* tmp = sc.sort_a.data();
  bk.keys = sc.sort_b.data();
  bk.w = sc.seq.w.data();
  bk.cum = sc.seq.cum.data();
  // Once bucketed, tmp, the gathered indices and the full-V weight table (which this path does
  // not use) are add_sorted's scratch.
  bk.order = tmp;
  bk.spare_idx = idx;
  bk.spare_w = sc.w.data();
  bk.lo = ~topk::order_bits(lmax);
  uint32_t span = 0;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t key = ~topk::order_bits(vals[j]) - bk.lo;
    span |= key;
    tmp[j] = (static_cast<uint64_t>(key) << 32) | idx[j];
  }
  const int bits = span == 0 ? 0 : 32 - __builtin_clz(span);
  const int shift = 32 + std::max(0, bits - kBucketBits);
  int64_t count[kBuckets + 1] = {};
  for (int64_t j = 0; j < n; ++j) ++count[(tmp[j] >> shift) + 1];
  for (int64_t q = 0; q < kBuckets; ++q) count[q + 1] += count[q];
  std::copy(count, count + kBuckets + 1, bk.start);
  for (int64_t j = 0; j < n; ++j) bk.keys[count[tmp[j] >> shift]++] = tmp[j];
  // Logits in bucket order (vals is free now), padded with NaN for the 32-wide weight steps.
  bk.vals = sc.vals.data();
  for (int64_t j = 0; j < n; ++j) bk.vals[j] = logit_of(bk.keys[j], bk.lo);
  std::fill(bk.vals + n, bk.vals + n + kFastChunk, std::numeric_limits<float>::quiet_NaN());
  exact_weights(bk.vals, n, lmax, inv_t, bk.w);
}

// Sorts bucket q by rank and adds it token by token from c, recording the running sums.
// Returns the sum after the bucket. Inside a bucket tokens sit in index order, so sorting on
// (rank key, position) keeps equal logits in index order; the weights move with their tokens.
double add_sorted(Buckets& bk, int64_t q, double c) {
  const int64_t s = bk.start[q];
  const int64_t e = bk.start[q + 1];
  for (int64_t j = s; j < e; ++j) {
    bk.spare_idx[j] = static_cast<uint32_t>(bk.keys[j]);
    bk.spare_w[j] = bk.w[j];
    bk.order[j] = (bk.keys[j] & ~uint64_t{0xFFFFFFFF}) | static_cast<uint64_t>(j - s);
  }
  std::sort(bk.order + s, bk.order + e);
  for (int64_t j = s; j < e; ++j) {
    const int64_t from = s + static_cast<int64_t>(bk.order[j] & 0xFFFFFFFFu);
    bk.keys[j] = (bk.order[j] & ~uint64_t{0xFFFFFFFF}) | bk.spare_idx[from];
    bk.w[j] = bk.spare_w[from];
  }
  for (int64_t j = s; j < e; ++j) {
    c += bk.w[j];
    bk.cum[j] = c;
  }
  bk.sorted[q] = true;
  return c;
}

// Adds buckets q0, q0 + 1, ... (before q1) to c in bulk while that is exact (see above) and the
// sum stays below `limit`, recording each added bucket's running sum before it in cum_before;
// returns how many were added (c becomes the sum after them). The first bucket that cannot go
// in bulk (a tie, or c would leave its binade or reach the limit inside it) ends the run. Every
// running sum of a run lies in the binade of c, so each is c plus an integer number of ulps,
// and the buckets' integer sums do not depend on each other: a run costs no chain of dependent
// additions.
SK_TARGET_AVX512 int64_t add_bulk(Buckets& bk, int64_t q0, int64_t q1, double* c, double limit) {
  if (!(*c > 0.0) || !std::isfinite(*c)) return 0;
  // c in [2^(e-1), 2^e): its biased exponent is e - 1 + 1023.
  const int64_t e = ((bits_of(*c) >> 52) & 0x7FF) - 1022;
  if (e - 53 < -1022 || e > 1000) return 0;  // keeps ulp and the scale normal
  const auto pow2 = [](int64_t k) {
    const uint64_t b = static_cast<uint64_t>(k + 1023) << 52;
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
  };
  const __m512d scale = _mm512_set1_pd(pow2(53 - e));
  const double ulp = pow2(e - 53);
  const double end = std::min(pow2(e), limit);
  const __m512d half = _mm512_set1_pd(0.5);
  // Integers below 2^53 add exactly in any order; a sum that large leaves the binade anyway.
  double total = 0.0;
  int64_t q = q0;
  for (; q < q1; ++q) {
    __m512d units = _mm512_setzero_pd();
    __mmask8 tie = 0;
    for (int64_t j = bk.start[q]; j < bk.start[q + 1]; j += 8) {
      const __mmask8 m = static_cast<__mmask8>((1u << std::min<int64_t>(8, bk.start[q + 1] - j)) - 1u);
      const __m512d y = _mm512_mul_pd(simd::masked_load_pd(m, bk.w + j), scale);
      const __m512d r = _mm512_roundscale_pd(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      tie |= _mm512_cmp_pd_mask(_mm512_abs_pd(_mm512_sub_pd(y, r)), half, _CMP_EQ_OQ);
      units = _mm512_add_pd(units, r);
    }
    const double after = total + _mm512_reduce_add_pd(units);
    if (tie != 0 || !(*c + after * ulp < end)) break;
    bk.cum_before[q] = *c + total * ulp;
    total = after;
  }
  *c += total * ulp;
  return q - q0;
}

// The sum of w[0, n) in no particular order, for bounds only: any order is within (n - 1) 2^-53
// of the exact sum, relative, where one running sum would chain n dependent additions.
SK_TARGET_AVX512 double sum_any_order(const double* w, int64_t n) {
  __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    for (int q = 0; q < 4; ++q) acc[q] = _mm512_add_pd(acc[q], _mm512_loadu_pd(w + j + 8 * q));
  }
  for (; j < n; j += 8) {
    const auto m = static_cast<__mmask8>((1u << std::min<int64_t>(8, n - j)) - 1u);
    acc[0] = _mm512_add_pd(acc[0], simd::masked_load_pd(m, w + j));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
}

// ---- The same path on AVX2 (8 lanes): the same approximations, hence the same bounds ----

// approx_weights16 on 8 lanes. AVX2 has no VSCALEFPS: 2^k is built from its exponent bits for
// k >= -126 and taken as 0 below, where 2^t < 2^-126 (within the 2^-120 per token the bound allows
// weights below 2^-125). t is clamped at -127 (NaN included, as in approx_weights16), so k >= -127
// and k = -127 gives the exponent field 0, the scale +0 and the weight 0 with no compare and mask
// (2 of the ~21 vector operations per 8 logits; the same weights as a clamp at -150 and a mask
// of k < -126).
SK_TARGET_AVX2 inline __m256 approx_weights8(__m256 l, __m256 lm, __m256 a, __m256* t_out) {
  const __m256 t = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(l, lm), a), _mm256_set1_ps(-127.0f));
  const __m256 k = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, k);
  __m256 p = _mm256_set1_ps(kExp2C[kExp2Degree]);
  for (int i = kExp2Degree - 1; i >= 0; --i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2C[i]));
  *t_out = t;
  const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127));
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
}

SK_TARGET_AVX2 inline __m256d hi_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
SK_TARGET_AVX2 inline __m256d lo_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }

SK_TARGET_AVX2 inline double sum4(__m256d v) {
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

SK_TARGET_AVX2 ApproxTotal approx_total_avx2(const float* l, int64_t v, float lmax, double inv_t) {
  const __m256 lm = _mm256_set1_ps(lmax);
  const __m256 a = _mm256_set1_ps(static_cast<float>(inv_t * kLog2e));
  __m256d acc0 = _mm256_setzero_pd();
  __m256d acc1 = _mm256_setzero_pd();
  __m256 tacc = _mm256_setzero_ps();
  __m256 prof[kProfileSize];
  for (__m256& q : prof) q = _mm256_setzero_ps();
  __m256 sampled = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= v; i += 32) {
    __m256 t[4];
    __m256 w[4];
    for (int q = 0; q < 4; ++q) {
      w[q] = approx_weights8(_mm256_loadu_ps(l + i + 8 * q), lm, a, &t[q]);
      tacc = _mm256_fnmadd_ps(w[q], t[q], tacc);  // t <= 0: adds w |t|
    }
    const __m256 w4 = _mm256_add_ps(_mm256_add_ps(w[0], w[1]), _mm256_add_ps(w[2], w[3]));
    acc0 = _mm256_add_pd(acc0, lo_pd(w4));
    acc1 = _mm256_add_pd(acc1, hi_pd(w4));
    // The AVX-512 path's sample: 16 logits of every kProfileStride * 16.
    if (i % (kProfileStride * 16) == 0) {
      sampled = _mm256_add_ps(sampled, _mm256_add_ps(w[0], w[1]));
      for (int j = 0; j < kProfileSize; ++j) {
        const __m256 c = _mm256_set1_ps(-kProfile[j]);
        const __m256 in0 = _mm256_and_ps(w[0], _mm256_cmp_ps(t[0], c, _CMP_GE_OQ));
        const __m256 in1 = _mm256_and_ps(w[1], _mm256_cmp_ps(t[1], c, _CMP_GE_OQ));
        prof[j] = _mm256_add_ps(prof[j], _mm256_add_ps(in0, in1));
      }
    }
  }
  for (; i < v; i += 8) {
    const __m256i m = simd::mask8(std::min<int64_t>(8, v - i));
    __m256 t;
    const __m256 w = _mm256_and_ps(approx_weights8(simd::maskload_ps(l + i, m), lm, a, &t), _mm256_castsi256_ps(m));
    tacc = _mm256_fnmadd_ps(w, t, tacc);
    acc0 = _mm256_add_pd(acc0, lo_pd(w));
    acc1 = _mm256_add_pd(acc1, hi_pd(w));
  }
  ApproxTotal r;
  r.sum = sum4(_mm256_add_pd(acc0, acc1));
  r.tsum = simd::hsum8(tacc);
  r.sampled = simd::hsum8(sampled);
  for (int j = 0; j < kProfileSize; ++j) r.profile[j] = simd::hsum8(prof[j]);
  return r;
}

SK_TARGET_AVX2 ApproxTotal approx_mass_avx2(const float* vals, int64_t n, float lmax, double inv_t) {
  const __m256 lm = _mm256_set1_ps(lmax);
  const __m256 a = _mm256_set1_ps(static_cast<float>(inv_t * kLog2e));
  __m256d acc = _mm256_setzero_pd();
  __m256 tacc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = simd::mask8(std::min<int64_t>(8, n - i));
    __m256 t;
    const __m256 w = _mm256_and_ps(approx_weights8(simd::maskload_ps(vals + i, m), lm, a, &t), _mm256_castsi256_ps(m));
    tacc = _mm256_fnmadd_ps(w, t, tacc);
    acc = _mm256_add_pd(acc, _mm256_add_pd(lo_pd(w), hi_pd(w)));
  }
  ApproxTotal r;
  r.sum = sum4(acc);
  r.tsum = simd::hsum8(tacc);
  return r;
}

SK_TARGET_AVX2 float block_maxima_avx2(const float* l, int64_t n, float* block_max) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b * kGatherBlock < n; ++b) {
    const int64_t end = std::min(n, (b + 1) * kGatherBlock);
    __m256 m[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    int64_t i = b * kGatherBlock;
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

SK_TARGET_AVX2 int64_t gather_values_avx2(const float* l, int64_t n, float lambda, const float* block_max,
                                          uint32_t* idx, float* vals) {
  const __m256 lam = _mm256_set1_ps(lambda);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t count = 0;
  int64_t i = 0;
  // Whole vectors: no branch on the comparison (about a third of a flat row's vectors keep
  // nothing, unpredictably), all 8 lanes stored (count <= i, so they fit in idx, sized for n).
  for (; i + 8 <= n; i += 8) {
    if (i % kGatherBlock == 0 && !(block_max[i / kGatherBlock] >= lambda)) {
      i += kGatherBlock - 8;
      continue;
    }
    const __m256 x = _mm256_loadu_ps(l + i);
    const auto m = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(x, lam, _CMP_GE_OQ)));
    const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(kCompress[m])));
    const __m256i ids =
        _mm256_permutevar8x32_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int>(i))), perm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + count), ids);
    _mm256_storeu_ps(vals + count, _mm256_permutevar8x32_ps(x, perm));
    count += __builtin_popcount(m);
  }
  if (i < n && block_max[i / kGatherBlock] >= lambda) {
    for (; i < n; ++i) {
      idx[count] = static_cast<uint32_t>(i);
      vals[count] = l[i];
      count += l[i] >= lambda ? 1 : 0;
    }
  }
  return count;
}

SK_TARGET_AVX2 int64_t add_bulk_avx2(Buckets& bk, int64_t q0, int64_t q1, double* c, double limit) {
  if (!(*c > 0.0) || !std::isfinite(*c)) return 0;
  const int64_t e = ((bits_of(*c) >> 52) & 0x7FF) - 1022;
  if (e - 53 < -1022 || e > 1000) return 0;
  const auto pow2 = [](int64_t k) {
    const uint64_t b = static_cast<uint64_t>(k + 1023) << 52;
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
  };
  const __m256d scale = _mm256_set1_pd(pow2(53 - e));
  const double ulp = pow2(e - 53);
  const double end = std::min(pow2(e), limit);
  const __m256d half = _mm256_set1_pd(0.5);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  double total = 0.0;
  int64_t q = q0;
  for (; q < q1; ++q) {
    __m256d units = _mm256_setzero_pd();
    int tie = 0;
    for (int64_t j = bk.start[q]; j < bk.start[q + 1]; j += 4) {
      const __m256i m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(bk.start[q + 1] - j), lane);
      const __m256d y = _mm256_mul_pd(simd::maskload_pd(bk.w + j, m), scale);
      const __m256d r = _mm256_round_pd(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      tie |= _mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(_mm256_sub_pd(y, r), abs_mask), half, _CMP_EQ_OQ));
      units = _mm256_add_pd(units, r);
    }
    const double after = total + sum4(units);
    if (tie != 0 || !(*c + after * ulp < end)) break;
    bk.cum_before[q] = *c + total * ulp;
    total = after;
  }
  *c += total * ulp;
  return q - q0;
}

SK_TARGET_AVX2 double sum_any_order_avx2(const double* w, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int q = 0; q < 4; ++q) acc[q] = _mm256_add_pd(acc[q], _mm256_loadu_pd(w + j + 4 * q));
  }
  double s = sum4(_mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
  for (; j < n; ++j) s += w[j];
  return s;
}

// The primitives of the fast nucleus path at one register width.
struct FastPath {
  ApproxTotal (*approx_total)(const float* l, int64_t v, float lmax, double inv_t);
  ApproxTotal (*approx_mass)(const float* vals, int64_t n, float lmax, double inv_t);
  int64_t (*gather_values)(const float* l, int64_t n, float lambda, const float* block_max, uint32_t* idx, float* vals);
  ExactWeightsFn exact_weights;
  int64_t (*add_bulk)(Buckets& bk, int64_t q0, int64_t q1, double* c, double limit);
  double (*sum_any_order)(const double* w, int64_t n);
  float (*block_maxima)(const float* l, int64_t n, float* block_max);
};

constexpr FastPath kFastAvx512 = {approx_total_avx512,  approx_mass_avx512, gather_values_avx512,
                                  exact_weights_avx512, add_bulk,           sum_any_order,
                                  block_maxima_avx512};
constexpr FastPath kFastAvx2 = {approx_total_avx2, approx_mass_avx2,   gather_values_avx2, exact_weights_avx2,
                                add_bulk_avx2,     sum_any_order_avx2, block_maxima_avx2};

// The fast nucleus path at the selected level, or null (scalar).
const FastPath* select_fast_path() {
  switch (current_isa_level()) {
    case kIsaAvx512:
      return &kFastAvx512;
    case kIsaAvx2:
      return &kFastAvx2;
    default:
      return nullptr;
  }
}

// Returns the token, or -1 when this path cannot decide (the exact path then does).
int64_t sample_nucleus_fast(const FastPath& fp, const float* l, int64_t v, float lmax, double inv_t, double top_p,
                            double u, SampleScratch& sc) {
  if (std::isinf(lmax)) return -1;
  const ApproxTotal at = fp.approx_total(l, v, lmax, inv_t);
  // The sum of the approximate weights of a set of tokens differs from the sum of their specified
  // weights by at most bound(its sum, its sum of w~ |t|): the f32 weights are within 3e-7 relative
  // of exp (the polynomial with its f32 coefficients and roundings: 2.15e-7, sampling_exp2.h) plus
  // 1.5e-7 |t| (t's three roundings); weights below 2^-125 are off by less than 2^-125 each; the
  // double sums (S's block order, S~ and the subtractions below) add at most V 2^-52 relative;
  // S~'s f32 pairs are bounded apart (they are not the rest's alone).
  // Every factor is taken with a margin.
  const double rounding = static_cast<double>(v) * 0x1p-50 * at.sum + static_cast<double>(v) * 0x1p-120;
  const auto bound = [&](double sum, double tsum) { return 4e-7 * sum + 2.02e-7 * tsum + rounding; };
  // S~'s pairwise f32 additions: within 2^-23 of each weight, however the tokens are split.
  const double pairwise = 1.25e-7 * at.sum;
  const double e = bound(at.sum, at.tsum) + pairwise;
  const double s_lo = at.sum - e;
  const double s_hi = at.sum + e;
  if (!(s_lo > 0.0)) return -1;
  // Rounding is monotone, so tau = top_p * S lies in [top_p * s_lo, tau_hi].
  const double tau_hi = top_p * s_hi;
  // The smallest profile threshold whose estimated mass (the largest weight, 1, plus the sampled
  // mass scaled up) passes tau_hi with a margin of a third of the slack: a miss costs a second
  // gather over all V logits and a second bucketing of the prefix, more than the margin's extra
  // tokens cost on a flat row (measured on AVX2 with the quarter-step profile: flat b1 / b8 rows
  // 10-25% faster than with a quarter or a half of the slack).
  const double want = tau_hi + (s_lo - tau_hi) / 3.0;
  double c_t = kProfile[kProfileSize - 1];
  for (int j = 0; j < kProfileSize; ++j) {
    if (1.0 + kProfileStride * at.profile[j] >= want) {
      c_t = kProfile[j];
      break;
    }
  }
  // The worst-case bound V e^-c <= (1 - top_p) S_lo, in log2 units.
  const double c0_t = std::log2(static_cast<double>(v) / ((1.0 - top_p) * s_lo)) + 0.02;
  // The heavy tokens, w >= S~ / kHeavy (at most kHeavy of them): when a few strong candidates
  // hold most of the mass (a trained model's usual row), the sampled profile may miss them, and
  // they alone often reach tau.
  const double c_heavy = std::log2(kHeavy / at.sum);
  uint32_t* idx = sc.seq.idx.data();
  float* vals = sc.vals.data();
  // The heavy tokens, the guess, wider ones, then the bound (or twice the guess, if wider), in
  // increasing c. The heavy tokens come after the guesses when the guess is narrower: the profile
  // samples 1/16 of the vocabulary, and a strong token in the sample makes it guess far too few
  // tokens (measured on a peaked row: the three guesses gathered 3 tokens, and the bound then
  // gathered 18097 where the heavy tokens, 33, held the nucleus: 3x the row's time).
  const double c_last = std::max(c0_t, c_t * 2.0);
  const bool heavy = c_heavy > 0.0 && c_heavy < c_last;
  const double tries[] = {heavy && c_heavy < c_t ? c_heavy : -1.0,       c_t,   c_t * 1.15, c_t * 1.3,
                          heavy && c_heavy > c_t * 1.3 ? c_heavy : -1.0, c_last};
  const double need = tau_hi + 1e-5 * at.sum;  // the approximate mass a gathered prefix must show
  for (double c : tries) {
    if (c < 0.0) continue;
    // t >= -c, i.e. l >= lmax - c ln2 / a; rounded down so that the set only grows.
    // Clamped to the float range first: converting a double beyond it is undefined.
    const double bound_l = std::max(static_cast<double>(lmax) - c * kLn2Hi / inv_t,
                                    static_cast<double>(std::numeric_limits<float>::lowest()));
    const float lambda = std::nextafter(static_cast<float>(bound_l), -std::numeric_limits<float>::infinity());
    sc.seq.idx.resize(static_cast<size_t>(v));
    sc.vals.resize(static_cast<size_t>(v + kFastChunk));
    const int64_t n = fp.gather_values(l, v, lambda, sc.block_max.data(), idx, vals);
    // Not worth ranking when even its approximate mass falls short.
    const ApproxTotal g = fp.approx_mass(vals, n, lmax, inv_t);
    if (g.sum < need) continue;
    Buckets bk;
    bucket_prefix(vals, idx, n, lmax, inv_t, sc, bk, fp.exact_weights);
    // Tighter bounds on S: the gathered tokens' exact sum plus the rest's approximate one, whose
    // bound is a fraction of the first. The f32 sums of w~ |t| are within 5e-4 relative.
    const double exact = fp.sum_any_order(bk.w, n);
    const double rest = std::max(0.0, at.sum - g.sum);
    const double rest_t = std::max(0.0, at.tsum * (1.0 + 5e-4) - g.tsum * (1.0 - 5e-4));
    const double e2 = bound(rest, rest_t) + pairwise + static_cast<double>(n) * 0x1p-52 * exact;
    const double tau_lo2 = top_p * (exact + rest - e2);
    const double tau_hi2 = top_p * (exact + rest + e2);
    if (exact < tau_hi2) continue;  // the prefix falls short of tau: gather more
    // Walk the buckets until the running sum reaches tau_hi2.
    int64_t first_lo = -1;
    int64_t first_hi = -1;
    double run = 0.0;
    // Runs of up to kRun buckets go in bulk; the first bucket that cannot (the first ones, where
    // c changes binade, ties, where tau is reached) is sorted and added token by token.
    constexpr int64_t kRun = 16;
    for (int64_t q = 0; q < kBuckets && first_hi < 0;) {
      const int64_t added = fp.add_bulk(bk, q, std::min(q + kRun, kBuckets), &run, tau_lo2);
      q += added;
      bk.walked = q;
      if (added > 0) continue;
      bk.cum_before[q] = run;
      bk.walked = q + 1;
      const int64_t s0 = bk.start[q];
      const int64_t e0 = bk.start[q + 1];
      ++q;
      if (s0 == e0) continue;
      run = add_sorted(bk, q - 1, run);
      for (int64_t j = s0; j < e0; ++j) {
        if (first_lo < 0 && bk.cum[j] >= tau_lo2) first_lo = j;
        if (bk.cum[j] >= tau_hi2) {
          first_hi = j;
          break;
        }
      }
    }
    if (first_hi < 0 || first_lo < 0) continue;  // short after all (rounding): gather more
    int64_t m = first_hi;                        // the last token of the nucleus (a position in the buckets)
    if (first_lo != first_hi) {
      // tau is within the bound of a running sum: the exact S decides. Every position from
      // first_lo to first_hi lies in a sorted bucket.
      const int64_t blocks = (v + kBlock - 1) / kBlock;
      sc.beta.resize(static_cast<size_t>(blocks));
      const double tau = top_p * select_blocks()(l, v, lmax, inv_t, sc.beta.data(), nullptr);
      m = -1;
      for (int64_t j = first_lo; j <= first_hi; ++j) {
        if (bk.cum[j] >= tau) {
          m = j;
          break;
        }
      }
      if (m < 0) return -1;
    }
    // The draw: r = u * cum_m; the first token whose running sum exceeds r. Bucket boundaries
    // carry exact sums, so only the bucket where r is crossed is walked token by token.
    const double r = u * bk.cum[m];
    for (int64_t q = 0; q < bk.walked; ++q) {
      const int64_t s0 = bk.start[q];
      const int64_t e0 = bk.start[q + 1];
      if (s0 == e0) continue;
      const bool last = m < e0;
      if (!last && !(q + 1 < bk.walked && bk.cum_before[q + 1] > r)) continue;
      if (!bk.sorted[q]) add_sorted(bk, q, bk.cum_before[q]);
      for (int64_t j = s0; j <= (last ? m : e0 - 1); ++j) {
        if (bk.cum[j] > r) return static_cast<int64_t>(static_cast<uint32_t>(bk.keys[j]));
      }
      return -1;  // rounding left no running sum above r: the exact path's fallback decides
    }
    return -1;
  }
  return -1;
}
#endif

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
  const sk_sample_attrs& a = p.attrs;
  if (a.temperature == 0.0f) return topk::argmax(l, p.v);
  const double u = uniform(a.seed, *p.step, row);
  const double inv_t = 1.0 / static_cast<double>(a.temperature);
  const bool nucleus = a.top_p < 1.0f;
  if (a.top_k > 0 && a.top_k < p.v) {
    sc.keys.resize(static_cast<size_t>(a.top_k));
    topk::select(l, p.v, a.top_k, sc.keys.data());
    sc.seq.idx.resize(sc.keys.size());
    for (size_t j = 0; j < sc.keys.size(); ++j) sc.seq.idx[j] = static_cast<uint32_t>(topk::index_of(sc.keys[j]));
    const float lmax = l[sc.seq.idx[0]];
    // No probability mass at all (every logit -inf or NaN): fall back to the argmax.
    if (!(lmax > -std::numeric_limits<float>::infinity())) return sc.seq.idx[0];
    cumulate(l, nullptr, sc.seq, a.top_k, lmax, inv_t);
    int64_t m = a.top_k;
    if (nucleus) m = nucleus_size(sc.seq, m, static_cast<double>(a.top_p) * sc.seq.cum[m - 1]);
    return pick(sc.seq, m, u);
  }
#if SK_KERNELS_X86
  // The fast nucleus path takes the maximum per gather block (the same value as max_value).
  const FastPath* fast = nucleus ? select_fast_path() : nullptr;
  if (fast != nullptr) sc.block_max.resize(static_cast<size_t>((p.v + kGatherBlock - 1) / kGatherBlock));
  const float lmax = fast != nullptr ? fast->block_maxima(l, p.v, sc.block_max.data()) : topk::max_value(l, p.v);
#else
  const float lmax = topk::max_value(l, p.v);
#endif
  if (!(lmax > -std::numeric_limits<float>::infinity())) return topk::argmax(l, p.v);
  if (nucleus) {
#if SK_KERNELS_X86
    if (fast != nullptr) {
      const int64_t id = sample_nucleus_fast(*fast, l, p.v, lmax, inv_t, a.top_p, u, sc);
      if (id >= 0) return id;
    }
#endif
    return sample_nucleus_all(l, p.v, lmax, inv_t, a.top_p, u, sc);
  }
  return sample_dense(l, p.v, lmax, inv_t, u, sc);
}

int32_t rows_run(const sk_kernel_args* args, const sk_core_ctx* core, bool sample) {
  const ErrorSink err = sink_of(core);
  RowsPlan p;
  if (!check_core(core, sample ? kSample : kArgmax, err) || !plan_rows(args, sample, &p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.b, core->core_id, core->num_cores, 1);
  if (r.begin >= r.end) return SK_OK;
  SampleScratch scratch;  // argmax needs none
  if (sample) {
    scratch = carve_sample_scratch(p.v, p.attrs, core_slice(args, core));
    if (scratch.bytes > 0 && (args->workspace == nullptr || args->workspace_size < scratch.bytes)) {
      return workspace_too_small(err, kSample, args, scratch.bytes);
    }
  }
  for (int64_t b = r.begin; b < r.end; ++b) {
    const float* l = p.logits.row(b);
    const int64_t id = sample ? sample_row(p, l, b, scratch) : topk::argmax(l, p.v);
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
  const sk_range r = sk_split_range(p.b, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end) return list.finish();
  moe::add_block(list, 0, SK_ACCESS_READ, args->inputs[0], r.begin, r.end, 0, p.v);
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
