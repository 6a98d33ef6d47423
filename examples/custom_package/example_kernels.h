/* Public interface of the example kernel package: kernel names and attribute layouts.
 * Graph code includes this to build the attrs blob of example.axpb.f32; the package itself
 * needs nothing but <superkernel/kernel_abi.h>. */
#ifndef SK_EXAMPLE_KERNELS_H_
#define SK_EXAMPLE_KERNELS_H_

/* y = 2 * x, elementwise, f32. One input, one output of the same number of elements. */
#define SK_EXAMPLE_SCALE2_F32 "example.scale2.f32"
/* y = a * x + b, elementwise, f32. Attributes: sk_example_axpb_attrs. */
#define SK_EXAMPLE_AXPB_F32 "example.axpb.f32"

/* The attrs blob of example.axpb.f32, byte for byte. Plain floats, no padding, so its layout is
 * the same for every compiler that targets the runtime's platform. */
typedef struct sk_example_axpb_attrs {
  float a;
  float b;
} sk_example_axpb_attrs;

#endif /* SK_EXAMPLE_KERNELS_H_ */
