#include "kernels/moe_topk.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <span>

#include "kernels/cpu_isa.h"
#include "kernels/simd.h"

namespace sk::kernels::topk {
namespace {

// A min-heap of the k best keys seen so far. `thr` is the value of the worst kept element: a
// later element (higher index) can only enter when it is strictly greater, or when the worst
// is NaN and it is not.
struct Heap {
  const float* v;
  std::span<uint64_t> h;
  float thr = 0.0f;
  bool thr_nan = false;

  void refresh() {
    thr = v[index_of(h.front())];
    thr_nan = thr != thr;
  }
  bool passes(float x) const { return thr_nan ? x == x : x > thr; }
  void offer(int64_t i) {
    const uint64_t key = pack(v[i], i);
    if (key <= h.front()) return;
    std::pop_heap(h.begin(), h.end(), std::greater<>());
    h.back() = key;
    std::push_heap(h.begin(), h.end(), std::greater<>());
    refresh();
  }
  // The filter only skips; offer() decides on the exact key, so every ISA keeps the same set.
  void scan_scalar(int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (passes(v[i])) offer(i);
    }
  }
};

#if SK_KERNELS_X86
SK_TARGET_AVX2 void scan_avx2(Heap& heap, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 x = _mm256_loadu_ps(heap.v + i);
    const __m256 m =
        heap.thr_nan ? _mm256_cmp_ps(x, x, _CMP_ORD_Q) : _mm256_cmp_ps(x, _mm256_set1_ps(heap.thr), _CMP_GT_OQ);
    auto bits = static_cast<unsigned>(_mm256_movemask_ps(m));
    while (bits != 0) {
      const int64_t j = i + __builtin_ctz(bits);
      bits &= bits - 1;
      // The threshold may have risen since the compare.
      if (heap.passes(heap.v[j])) heap.offer(j);
    }
  }
  heap.scan_scalar(i, end);
}

SK_TARGET_AVX512 void scan_avx512(Heap& heap, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 x = _mm512_loadu_ps(heap.v + i);
    const __mmask16 m = heap.thr_nan ? _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q)
                                     : _mm512_cmp_ps_mask(x, _mm512_set1_ps(heap.thr), _CMP_GT_OQ);
    auto bits = static_cast<unsigned>(m);
    while (bits != 0) {
      const int64_t j = i + __builtin_ctz(bits);
      bits &= bits - 1;
      if (heap.passes(heap.v[j])) heap.offer(j);
    }
  }
  heap.scan_scalar(i, end);
}

SK_TARGET_AVX2 float max_avx2(const float* v, int64_t n) {
  // MAXPS returns its second operand when either is NaN: the accumulator goes second, so NaN
  // elements are skipped.
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 a0 = neg_inf;
  __m256 a1 = neg_inf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_max_ps(_mm256_loadu_ps(v + i), a0);
    a1 = _mm256_max_ps(_mm256_loadu_ps(v + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_max_ps(_mm256_loadu_ps(v + i), a0);
  float m = simd::hmax8(_mm256_max_ps(a0, a1));
  for (; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

SK_TARGET_AVX512 float max_avx512(const float* v, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 a0 = neg_inf;
  __m512 a1 = neg_inf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_max_ps(_mm512_loadu_ps(v + i), a0);
    a1 = _mm512_max_ps(_mm512_loadu_ps(v + i + 16), a1);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_max_ps(_mm512_loadu_ps(v + i), a0);
  float m = simd::hmax16(_mm512_max_ps(a0, a1));
  for (; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

SK_TARGET_AVX2 int64_t first_equal_avx2(const float* v, int64_t n, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int bits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(v + i), mv, _CMP_EQ_OQ));
    if (bits != 0) return i + __builtin_ctz(static_cast<unsigned>(bits));
  }
  for (; i < n; ++i) {
    if (v[i] == m) return i;
  }
  return -1;
}

SK_TARGET_AVX512 int64_t first_equal_avx512(const float* v, int64_t n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const auto bits = static_cast<unsigned>(_mm512_cmp_ps_mask(_mm512_loadu_ps(v + i), mv, _CMP_EQ_OQ));
    if (bits != 0) return i + __builtin_ctz(bits);
  }
  for (; i < n; ++i) {
    if (v[i] == m) return i;
  }
  return -1;
}
#endif

}  // namespace

void select(const float* v, int64_t n, int64_t k, uint64_t* keys) {
  const std::span<uint64_t> h(keys, static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) h[static_cast<size_t>(i)] = pack(v[i], i);
  if (k < n) {
    std::make_heap(h.begin(), h.end(), std::greater<>());
    Heap heap{v, h};
    heap.refresh();
    switch (current_isa_level()) {
#if SK_KERNELS_X86
      case kIsaAvx512:
        scan_avx512(heap, k, n);
        break;
      case kIsaAvx2:
        scan_avx2(heap, k, n);
        break;
#endif
      default:
        heap.scan_scalar(k, n);
        break;
    }
  }
  std::sort(h.begin(), h.end(), std::greater<>());
}

float max_value(const float* v, int64_t n) {
  switch (current_isa_level()) {
#if SK_KERNELS_X86
    case kIsaAvx512:
      return max_avx512(v, n);
    case kIsaAvx2:
      return max_avx2(v, n);
#endif
    default:
      break;
  }
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

int64_t first_equal(const float* v, int64_t n, float m) {
  switch (current_isa_level()) {
#if SK_KERNELS_X86
    case kIsaAvx512:
      return first_equal_avx512(v, n, m);
    case kIsaAvx2:
      return first_equal_avx2(v, n, m);
#endif
    default:
      break;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] == m) return i;
  }
  return -1;
}

}  // namespace sk::kernels::topk
