// The one reduction order of the collectives: element i of the result is
//   ((v_0[i] + v_1[i]) + v_2[i]) + ... + v_{n-1}[i]
// over the ranks' values in rank order, accumulated in f32 for the floating-point types (bf16
// and f16 rounded once, to nearest even, at the end) and in wrapping 32-bit arithmetic for i32.
// One rank computes each element and sends it to the others, so every rank holds the same bits
// whatever the arrival order of the messages.
#ifndef SUPERKERNEL_COMM_REDUCE_SUM_H_
#define SUPERKERNEL_COMM_REDUCE_SUM_H_

#include <cstdint>
#include <cstring>

#include "superkernel/kernel_abi.h"

namespace sk::comm {

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);                                                      // nearest even
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int shift = 0;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        ++shift;
      }
      mant &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mant << 13);
    }
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // quiet NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {                                               // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;                                  // below half the smallest subnormal
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    const uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    const uint32_t rounded = half + ((rest > mid || (rest == mid && (half & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | rounded);
  }
  uint32_t v = abs - 0x38000000u;  // rebias the exponent 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);  // nearest even
  return static_cast<uint16_t>(sign | (v >> 13));
}

// out[i] = sum over the n sources in order of src[s][i], for i in [0, count).
void reduce_sum(int32_t dtype, const void* const* src, int32_t n, void* out, int64_t count);

}  // namespace sk::comm

#endif  // SUPERKERNEL_COMM_REDUCE_SUM_H_
