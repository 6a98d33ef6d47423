// The f32 polynomial for 2^f, f in [-0.5, 0.5], of sample.f32's specified weights (sampling.cc):
// the scalar form here and the vector passes evaluate the same Horner steps, one FMA each, so
// every ISA computes the same weight (docs/kernels_moe.md, "sample.f32 arithmetic").
//
//   float p = sk::kernels::approx_exp2_poly(f);   // 2^f within kApproxExp2MaxRelError
#ifndef SUPERKERNEL_KERNELS_SAMPLING_EXP2_H_
#define SUPERKERNEL_KERNELS_SAMPLING_EXP2_H_

#include <cmath>

namespace sk::kernels {

// A degree-5 fit of 2^f of minimal relative error on [-0.5, 0.5], with the constant term 1 so
// that the largest logit weighs exactly 2^30 without a special case in the vector passes. With
// the coefficients in f32 and Horner's f32 FMAs, the result is within 2.21e-7 relative of 2^f on
// every float in [-0.5, 0.5] (checked against exp2l over all of them; a test checks a sample).
inline constexpr int kExp2Degree = 5;
inline constexpr float kExp2C[kExp2Degree + 1] = {1.0f,
                                                  0.6931469670618053f,
                                                  0.24022119723079793f,
                                                  0.05550713277838843f,
                                                  0.009675541379347327f,
                                                  0.0013276470743018576f};
inline constexpr double kApproxExp2MaxRelError = 2.21e-7;

inline float approx_exp2_poly(float f) {
  float p = kExp2C[kExp2Degree];
  for (int i = kExp2Degree - 1; i >= 0; --i) p = std::fma(p, f, kExp2C[i]);
  return p;
}

}  // namespace sk::kernels

#endif  // SUPERKERNEL_KERNELS_SAMPLING_EXP2_H_
