// The f32 polynomial for 2^f, f in [-0.5, 0.5], of sample.f32's approximate weights (sampling.cc):
// the vector passes evaluate exactly approx_exp2_poly's Horner steps, one FMA each, so the
// scalar form here is what the error bound of the fast nucleus path rests on (and what its
// test checks).
//
//   float p = sk::kernels::approx_exp2_poly(f);   // 2^f within kApproxExp2MaxRelError
#ifndef SUPERKERNEL_KERNELS_SAMPLING_EXP2_H_
#define SUPERKERNEL_KERNELS_SAMPLING_EXP2_H_

#include <cmath>

namespace sk::kernels {

// A degree-5 fit of 2^f of minimal relative error on [-0.5, 0.5] (truncation 7.5e-8). With the
// coefficients rounded to f32 and Horner's f32 FMAs, the result is within 2.15e-7 relative of
// 2^f on every float in [-0.5, 0.5] (checked against exp2l over all of them; a test checks a
// sample), inside the 3e-7 the bound allows for the polynomial. Degree 5 instead of the 7 of a
// Taylor series (7.3e-8 in all) takes 2 of the ~20 vector operations per vector of logits off
// the pass over all V.
inline constexpr int kExp2Degree = 5;
inline constexpr float kExp2C[kExp2Degree + 1] = {1.0000000716548105f,  0.6931469670618053f,   0.24022119723079793f,
                                                  0.05550713277838843f, 0.009675541379347327f, 0.0013276470743018576f};
inline constexpr double kApproxExp2MaxRelError = 2.15e-7;

inline float approx_exp2_poly(float f) {
  float p = kExp2C[kExp2Degree];
  for (int i = kExp2Degree - 1; i >= 0; --i) p = std::fma(p, f, kExp2C[i]);
  return p;
}

}  // namespace sk::kernels

#endif  // SUPERKERNEL_KERNELS_SAMPLING_EXP2_H_
