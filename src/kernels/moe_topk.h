// Ranking helpers shared by the MoE router and the sampling kernels: a total order on floats
// with deterministic tie-breaking, partial top-k selection and argmax.
//
// Order: larger values first; equal values (and -0 / +0) by lower index; NaN below every number,
// including -inf. Packing (value, index) into one u64 makes that order a plain integer compare,
// so selection never depends on the ISA: the SIMD paths only skip elements that provably cannot
// enter the current top-k and every decision is taken on the exact key.
//
//   uint64_t best[50];
//   topk::select(logits, n, 50, best);            // best[0] is the argmax
//   int64_t id = topk::index_of(best[0]);
#ifndef SUPERKERNEL_KERNELS_MOE_TOPK_H_
#define SUPERKERNEL_KERNELS_MOE_TOPK_H_

#include <cstdint>
#include <cstring>

namespace sk::kernels::topk {

// Order-preserving map onto u32 (see the order above).
inline uint32_t order_bits(float v) {
  if (v != v) return 0;
  if (v == 0.0f) return 0x80000000u;
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// (value, index) as one key: a larger key ranks first. Indices must be below 2^32.
inline uint64_t pack(float v, int64_t index) {
  return (static_cast<uint64_t>(order_bits(v)) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(index));
}

inline int64_t index_of(uint64_t key) { return static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key)); }

// The k best elements of v[0, n) (1 <= k <= n < 2^32), best first, as packed keys in keys[0, k).
void select(const float* v, int64_t n, int64_t k, uint64_t* keys);

// Largest non-NaN value of v[0, n); -inf when there is none. Which zero is returned when the
// maximum is 0 is unspecified (callers only compare against it).
float max_value(const float* v, int64_t n);

// Index of the first element of v[0, n) equal to m (== semantics), or -1.
int64_t first_equal(const float* v, int64_t n, float m);

// First index of the largest element in the order above: 0 when every element is NaN.
inline int64_t argmax(const float* v, int64_t n) {
  const int64_t i = first_equal(v, n, max_value(v, n));
  return i < 0 ? 0 : i;
}

}  // namespace sk::kernels::topk

#endif  // SUPERKERNEL_KERNELS_MOE_TOPK_H_
