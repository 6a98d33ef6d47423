// Element-wise binary kernels: add.f32, mul.f32 (b broadcasts numpy-style: right-aligned, each
// dimension equal or 1) and silu_mul.f32 (gate and up of one shape).
//
// Every element is computed by one function of its two inputs, whatever its position: vector
// bodies handle their tails with masked loads instead of a scalar loop, and strided runs are
// gathered into a block and fed to the same contiguous routine. So the result of an element
// depends neither on the core split nor on alignment, only on the ISA level.
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"

namespace sk::kernels {
namespace {

using BinaryFn = void (*)(const float* a, const float* b, float* out, int64_t n);

struct AddOp {
  static float scalar(float a, float b) { return a + b; }
#if SK_KERNELS_X86
  SK_TARGET_AVX2 static __m256 v8(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  SK_TARGET_AVX512 static __m512 v16(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
#endif
};

struct MulOp {
  static float scalar(float a, float b) { return a * b; }
#if SK_KERNELS_X86
  SK_TARGET_AVX2 static __m256 v8(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  SK_TARGET_AVX512 static __m512 v16(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
#endif
};

// silu(g) * u with silu(g) = g / (1 + exp(-g)).
struct SiluMulOp {
  static float scalar(float g, float u) { return g / (1.0f + std::exp(-g)) * u; }
#if SK_KERNELS_X86
  SK_TARGET_AVX2 static __m256 v8(__m256 g, __m256 u) {
    const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
  }
  SK_TARGET_AVX512 static __m512 v16(__m512 g, __m512 u) {
    const __m512 e = simd::exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
  }
#endif
};

template <class Op>
void binary_scalar(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Op::scalar(a[i], b[i]);
}

#if SK_KERNELS_X86
template <class Op>
SK_TARGET_AVX2 void binary_avx2(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, Op::v8(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    simd::maskstore_ps(out + i, m, Op::v8(simd::maskload_ps(a + i, m), simd::maskload_ps(b + i, m)));
  }
}

template <class Op>
SK_TARGET_AVX512 void binary_avx512(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, Op::v16(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  }
  if (i < n) {
    const __mmask16 m = simd::mask16(n - i);
    simd::masked_store_ps(out + i, m, Op::v16(simd::masked_load_ps(m, a + i), simd::masked_load_ps(m, b + i)));
  }
}
#endif

template <class Op>
BinaryFn select_binary() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return binary_avx512<Op>;
    case kIsaAvx2:
      return binary_avx2<Op>;
    default:
      break;
  }
#endif
  return binary_scalar<Op>;
}

// Operand indices inside the walk; they match the ABI operand numbering (inputs, then output).
enum { kOpA = 0, kOpB = 1, kOpOut = 2 };

struct BinaryPlan {
  Walk walk;
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
};

struct BinaryKernel {
  const char* name;
  const char* a_name;
  const char* b_name;
  bool broadcast_b;
};

constexpr BinaryKernel kAdd = {"add.f32", "a", "b", true};
constexpr BinaryKernel kMul = {"mul.f32", "a", "b", true};
constexpr BinaryKernel kSiluMul = {"silu_mul.f32", "gate", "up", false};

bool plan_binary(const sk_kernel_args* args, const BinaryKernel& k, BinaryPlan* plan, ErrorSink err) {
  if (!check_arity(args, k.name, 2, 1, err)) return false;
  const sk_tensor_arg& a = args->inputs[0];
  const sk_tensor_arg& b = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(a, k.name, k.a_name, SK_DTYPE_F32, 0, err) ||
      !check_tensor(b, k.name, k.b_name, SK_DTYPE_F32, 0, err) ||
      !check_tensor(out, k.name, "out", SK_DTYPE_F32, 0, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  if (!same_shape(a, out)) {
    return invalid(err, "%s: out shape %s differs from %s shape %s", k.name, format_shape(out, s1, sizeof s1), k.a_name,
                   format_shape(a, s2, sizeof s2));
  }
  const int lead = a.rank - b.rank;
  bool fits = lead >= 0 && (k.broadcast_b || lead == 0);
  for (int d = 0; fits && d < b.rank; ++d) {
    const int64_t bd = b.shape[d];
    fits = bd == a.shape[lead + d] || (k.broadcast_b && bd == 1);
  }
  if (!fits) {
    return invalid(err, "%s: %s shape %s %s %s shape %s", k.name, k.b_name, format_shape(b, s1, sizeof s1),
                   k.broadcast_b ? "does not broadcast to" : "differs from", k.a_name, format_shape(a, s2, sizeof s2));
  }
  int64_t strides[3][SK_MAX_RANK] = {};
  for (int d = 0; d < a.rank; ++d) {
    strides[kOpA][d] = a.stride[d];
    strides[kOpB][d] = d < lead || b.shape[d - lead] == 1 ? 0 : b.stride[d - lead];
    strides[kOpOut][d] = out.stride[d];
  }
  if (!make_walk(a.rank, a.shape, 3, strides, kOpOut, 1, &plan->walk)) {
    return invalid(err, "%s: out is a view whose elements overlap in memory", k.name);
  }
  plan->a = static_cast<const float*>(a.data);
  plan->b = static_cast<const float*>(b.data);
  plan->out = static_cast<float*>(out.data);
  return true;
}

// Strided runs go through fixed-size blocks so that each element still sees the contiguous
// routine (and thus the same arithmetic) as in the dense case.
constexpr int64_t kBlock = 256;

void run_strided(BinaryFn fn, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t so,
                 int64_t n) {
  if (sa == 1 && sb == 1 && so == 1) {
    fn(a, b, out, n);
    return;
  }
  float buf_a[kBlock];
  float buf_b[kBlock];
  float buf_o[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t len = n - i0 < kBlock ? n - i0 : kBlock;
    const float* pa = a + i0 * sa;
    const float* pb = b + i0 * sb;
    if (sa != 1) {
      for (int64_t i = 0; i < len; ++i) buf_a[i] = pa[i * sa];
      pa = buf_a;
    }
    if (sb != 1) {
      for (int64_t i = 0; i < len; ++i) buf_b[i] = pb[i * sb];
      pb = buf_b;
    }
    float* po = so == 1 ? out + i0 : buf_o;
    fn(pa, pb, po, len);
    if (so != 1) {
      float* dst = out + i0 * so;
      for (int64_t i = 0; i < len; ++i) dst[i * so] = buf_o[i];
    }
  }
}

// Host tiling: the validated walk, computed once when shapes are static (graph and superkernel
// modes), so run() skips validation and walk construction on every call. Dense operands (the
// common case) get a small record instead of the whole walk, so run() copies a few bytes.
struct DenseTiling {
  int64_t numel;
  int64_t base[3];  // element offsets of a, b, out
};

int32_t binary_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size,
                      const BinaryKernel& k) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return SK_ERR_INVALID_ARGUMENT;
  // Tiling sees shapes only: data may still be null at compile time.
  BinaryPlan p;
  if (!plan_binary(args, k, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return SK_ERR_INVALID_ARGUMENT;
  const Walk& w = p.walk;
  if (w.rank == 1 && w.inner_stride(kOpA) == 1 && w.inner_stride(kOpB) == 1 && w.inner_stride(kOpOut) == 1) {
    const DenseTiling d{w.numel, {w.base[kOpA], w.base[kOpB], w.base[kOpOut]}};
    if (capacity < sizeof d) return SK_ERR_CAPACITY;
    std::memcpy(tiling, &d, sizeof d);
    *size = sizeof d;
    return SK_OK;
  }
  if (capacity < sizeof(Walk)) return SK_ERR_CAPACITY;
  std::memcpy(tiling, &w, sizeof(Walk));
  *size = sizeof(Walk);
  return SK_OK;
}

int32_t binary_run(const sk_kernel_args* args, const sk_core_ctx* core, const BinaryKernel& k, BinaryFn fn) {
  const ErrorSink err = sink_of(core);
  if (!check_core(core, k.name, err)) return SK_ERR_INVALID_ARGUMENT;
  if (args->tiling != nullptr && args->tiling_size == sizeof(DenseTiling)) {
    DenseTiling d;
    std::memcpy(&d, args->tiling, sizeof d);
    const sk_range r = sk_split_range(d.numel, core->core_id, core->num_cores, kElementAlign);
    if (r.begin < r.end) {
      fn(static_cast<const float*>(args->inputs[0].data) + d.base[0] + r.begin,
         static_cast<const float*>(args->inputs[1].data) + d.base[1] + r.begin,
         static_cast<float*>(args->outputs[0].data) + d.base[2] + r.begin, r.end - r.begin);
    }
    return SK_OK;
  }
  // Declared only now: the dense path above is the per-call hot path of element-wise chains, and a
  // plan is several hundred bytes to zero.
  BinaryPlan p;
  if (args->tiling != nullptr && args->tiling_size == sizeof(Walk)) {
    std::memcpy(&p.walk, args->tiling, sizeof(Walk));
    p.a = static_cast<const float*>(args->inputs[0].data);
    p.b = static_cast<const float*>(args->inputs[1].data);
    p.out = static_cast<float*>(args->outputs[0].data);
  } else if (!plan_binary(args, k, &p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const Walk& w = p.walk;
  const sk_range r = sk_split_range(w.numel, core->core_id, core->num_cores, kElementAlign);
  const int64_t sa = w.inner_stride(kOpA);
  const int64_t sb = w.inner_stride(kOpB);
  const int64_t so = w.inner_stride(kOpOut);
  for_each_run(w, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    run_strided(fn, p.a + off[kOpA], sa, p.b + off[kOpB], sb, p.out + off[kOpOut], so, len);
  });
  return SK_OK;
}

int32_t binary_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                      int32_t capacity, const BinaryKernel& k) {
  BinaryPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_binary(args, k, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.walk.numel, core_id, num_cores, kElementAlign);
  RangeList list(ranges, capacity);
  list.add_walk(p.walk, kOpA, kOpA, SK_ACCESS_READ, r.begin, r.end, 1, sizeof(float));
  list.add_walk(p.walk, kOpB, kOpB, SK_ACCESS_READ, r.begin, r.end, 1, sizeof(float));
  list.add_walk(p.walk, kOpOut, kOpOut, SK_ACCESS_WRITE, r.begin, r.end, 1, sizeof(float));
  return list.finish();
}

}  // namespace

int32_t add_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return binary_run(args, core, kAdd, select_binary<AddOp>());
}
int32_t add_f32_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  return binary_tiling(args, tiling, capacity, size, kAdd);
}
int32_t add_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                       int32_t capacity) {
  return binary_access(args, core_id, num_cores, ranges, capacity, kAdd);
}

int32_t mul_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return binary_run(args, core, kMul, select_binary<MulOp>());
}
int32_t mul_f32_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  return binary_tiling(args, tiling, capacity, size, kMul);
}
int32_t mul_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                       int32_t capacity) {
  return binary_access(args, core_id, num_cores, ranges, capacity, kMul);
}

int32_t silu_mul_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return binary_run(args, core, kSiluMul, select_binary<SiluMulOp>());
}
int32_t silu_mul_f32_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  return binary_tiling(args, tiling, capacity, size, kSiluMul);
}
int32_t silu_mul_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                            int32_t capacity) {
  return binary_access(args, core_id, num_cores, ranges, capacity, kSiluMul);
}

}  // namespace sk::kernels
