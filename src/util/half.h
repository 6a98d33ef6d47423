// Scalar conversions between f32 and the 16-bit float formats (bf16, IEEE f16), round to
// nearest even. Header-only so tests, benchmarks and kernels share one definition.
#ifndef SUPERKERNEL_UTIL_HALF_H_
#define SUPERKERNEL_UTIL_HALF_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace sk {

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {                                               // subnormal half: count units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(std::fabs(f) * 16777216.0f)));
  }
  const uint32_t mant = abs & 0x7fffffu;
  uint32_t h = (((abs >> 23) - 112) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// Bit assembly rather than ldexp: this runs per element in the casts and in attention over f16
// caches, where a libm call per value cost more than the arithmetic around it.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &mag, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | (mant ? 0x7fc00000u : 0x7f800000u);  // a quiet NaN of h's sign, or infinity
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace sk

#endif  // SUPERKERNEL_UTIL_HALF_H_
