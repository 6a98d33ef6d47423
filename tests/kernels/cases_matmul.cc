// Direct-test cases of the matmul family (matmul.bf16, quantize.i8, matmul.w8a8,
// matmul.w8a8_dyn, grouped_matmul.*): GEMV and decode shapes, K and N that are not multiples of
// any vector width, K = 1 and K = 0, strided and permuted rows, and for the grouped matmuls
// empty experts, every row in one expert and counts that leave rows without an expert.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_cases.h"
#include "util/half.h"

namespace sk::kernel_test {
namespace {

TensorDesc bf16(std::vector<int64_t> shape) {
  TensorDesc d = tensor(SK_DTYPE_BF16, std::move(shape));
  d.fill = Fill::kUniform;
  return d;
}

TensorDesc f16(std::vector<int64_t> shape) {
  TensorDesc d = tensor(SK_DTYPE_F16, std::move(shape));
  d.fill = Fill::kUniform;
  return d;
}

// -128 included on purpose: the int8 matmuls read it as -127.
TensorDesc i8(std::vector<int64_t> shape) {
  TensorDesc d = tensor(SK_DTYPE_I8, std::move(shape));
  d.fill = Fill::kUniform;
  return d.range(-128.4, 127.4);
}

TensorDesc scales(std::vector<int64_t> shape) { return f32(std::move(shape)).range(0.001, 0.05); }

TensorDesc counts(std::vector<double> c) {
  return tensor(SK_DTYPE_I32, {static_cast<int64_t>(c.size())}).with_values(std::move(c));
}

Case make(std::string name, std::string kernel, std::vector<TensorDesc> in, std::vector<TensorDesc> out) {
  return Case{std::move(name), std::move(kernel), std::move(in), std::move(out), {}, -1};
}

// The leading shape of x (all but the last dimension).
std::vector<int64_t> lead(std::vector<int64_t> s) {
  s.pop_back();
  return s;
}

std::vector<int64_t> with_last(std::vector<int64_t> s, int64_t n) {
  s.back() = n;
  return s;
}

}  // namespace

SK_KERNEL_CASES(matmul_family_cases) {
  std::vector<Case> cs;

  // ---- matmul.bf16 ----
  struct Shape3 {
    const char* name;
    std::vector<int64_t> x;
    int64_t n;
  };
  const std::vector<Shape3> linear = {
      {"gemv_vector_x", {37}, 19},
      {"gemv_1x256_n64", {1, 256}, 64},
      {"k1", {3, 1}, 13},
      {"n1", {5, 33}, 1},
      {"m4_k70", {4, 70}, 24},
      {"m16_k300_n40", {16, 300}, 40},
      {"m17_n70", {17, 24}, 70},
      {"k33_n100", {2, 33}, 100},
      {"rank3_x", {2, 3, 20}, 9},
      {"gemv_k1000_n37", {1, 1000}, 37},
      {"gemv_k1073_n19", {1, 1073}, 19},  // K steps of 32, one of 16, a masked tail
  };
  for (const Shape3& s : linear) {
    const int64_t k = s.x.back();
    cs.push_back(
        make(std::string("bf16_") + s.name, "matmul.bf16", {f32(s.x), bf16({s.n, k})}, {f32(with_last(s.x, s.n))}));
  }
  for (const Shape3& s : linear) {
    const int64_t k = s.x.back();
    cs.push_back(
        make(std::string("f16_") + s.name, "matmul.f16", {f32(s.x), f16({s.n, k})}, {f32(with_last(s.x, s.n))}));
  }
  cs.push_back(make("f16_padded", "matmul.f16", {f32({6, 45}).padded(1, 3), f16({21, 45}).padded(1, 5)},
                    {f32({6, 21}).padded(1, 2)}));
  cs.push_back(make("f16_k0", "matmul.f16", {f32({2, 0}), f16({5, 0})}, {f32({2, 5})}));
  cs.push_back(make("bf16_padded", "matmul.bf16", {f32({6, 45}).padded(1, 3), bf16({21, 45}).padded(1, 5)},
                    {f32({6, 21}).padded(1, 2)}));
  cs.push_back(make("bf16_permuted_rows", "matmul.bf16", {f32({4, 3, 24}).transposed({1, 0, 2}), bf16({11, 24})},
                    {f32({4, 3, 11})}));
  cs.push_back(make("bf16_k0", "matmul.bf16", {f32({2, 0}), bf16({5, 0})}, {f32({2, 5})}));

  // ---- quantize.i8 ----
  for (const std::vector<int64_t>& s :
       std::vector<std::vector<int64_t>>{{1, 64}, {5, 37}, {3, 4, 16}, {7, 1}, {100}, {3, 1031}, {20, 9}}) {
    std::string name = "quantize";
    for (int64_t d : s) name += "_" + std::to_string(d);
    cs.push_back(make(name, "quantize.i8", {f32(s).range(-3, 3)}, {i8(s), f32(lead(s))}));
  }
  // Ties: with max |x| = 127 the scale is 1, so x / scale hits .5 exactly (round half to even).
  cs.push_back(make("quantize_ties", "quantize.i8",
                    {f32({2, 10}).with_values({127, 63.5, -63.5, 0.5, 1.5, 2.5, -2.5, -0.5, 126.5, -127})},
                    {i8({2, 10}), f32({2})}));
  cs.push_back(
      make("quantize_zero_rows", "quantize.i8", {f32({3, 40}).with_values({0.0, -0.0})}, {i8({3, 40}), f32({3})}));
  cs.push_back(make("quantize_strided", "quantize.i8", {f32({9, 130}).padded(1, 6).range(-9, 9)},
                    {i8({9, 130}).padded(1, 3), f32({9}).stepped(0, 2).reversed(0)}));
  cs.push_back(make("quantize_k0", "quantize.i8", {f32({4, 0})}, {i8({4, 0}), f32({4})}));

  // ---- matmul.w8a8 / matmul.w8a8_dyn ----
  const std::vector<Shape3> w8 = {
      {"gemv_1x256_n64", {1, 256}, 64},  {"gemv_vector_x", {37}, 19},     {"k1", {3, 1}, 13},
      {"m4_k70", {4, 70}, 24},           {"m16_k300_n40", {16, 300}, 40}, {"m17_n70", {17, 24}, 70},
      {"k100_n33", {2, 100}, 33},        {"rank3_x", {2, 3, 64}, 9},      {"gemv_k2000_n20", {1, 2000}, 20},
      {"m16_k4100_n20", {16, 4100}, 20},  // K steps of the multi-row blocks and a ragged end
      {"gemv_k1000_n37", {1, 1000}, 37},  // short rows read one at a time, a masked tail
      {"gemv_k1024_n19", {1, 1024}, 19},  // the longest such rows, no tail
      {"gemv_k1025_n9", {1, 1025}, 9},    // one byte longer: rows side by side
  };
  for (const Shape3& s : w8) {
    const int64_t k = s.x.back();
    cs.push_back(make(std::string("w8a8_") + s.name, "matmul.w8a8",
                      {i8(s.x), scales(lead(s.x)), i8({s.n, k}), scales({s.n})}, {f32(with_last(s.x, s.n))}));
    cs.push_back(make(std::string("w8a8_dyn_") + s.name, "matmul.w8a8_dyn",
                      {f32(s.x).range(-4, 4), i8({s.n, k}), scales({s.n})}, {f32(with_last(s.x, s.n))}));
  }
  cs.push_back(
      make("w8a8_padded", "matmul.w8a8",
           {i8({6, 45}).padded(1, 3), scales({6}).stepped(0, 3), i8({21, 45}).padded(1, 5), scales({21}).reversed(0)},
           {f32({6, 21}).padded(1, 2)}));
  cs.push_back(make("w8a8_permuted_rows", "matmul.w8a8",
                    {i8({4, 3, 40}).transposed({1, 0, 2}), scales({4, 3}), i8({11, 40}), scales({11})},
                    {f32({4, 3, 11})}));
  cs.push_back(make("w8a8_dyn_padded", "matmul.w8a8_dyn",
                    {f32({5, 70}).padded(1, 2), i8({30, 70}).padded(1, 7), scales({30}).stepped(0, 2)},
                    {f32({5, 30}).reversed(0)}));
  cs.push_back(make("w8a8_dyn_zero_row", "matmul.w8a8_dyn",
                    {f32({2, 33}).with_values({0.0}), i8({17, 33}), scales({17})}, {f32({2, 17})}));
  // The largest K with the extreme values in every product: the int32 sums (and the biased ones
  // of the VNNI tiles, (w + 128) * q) must not wrap.
  cs.push_back(
      make("w8a8_k65536_extremes", "matmul.w8a8",
           {i8({5, 65536}).with_values({127, -128}), scales({5}), i8({6, 65536}).with_values({127, -128}), scales({6})},
           {f32({5, 6})}));
  cs.push_back(make("w8a8_k0", "matmul.w8a8", {i8({2, 0}), scales({2}), i8({5, 0}), scales({5})}, {f32({2, 5})}));
  cs.push_back(make("w8a8_dyn_k0", "matmul.w8a8_dyn", {f32({2, 0}), i8({5, 0}), scales({5})}, {f32({2, 5})}));

  // ---- matmul.w4a8_dyn / matmul.w4 (4-bit weights [N, K/2], scales and zero points [K/G, N]) ----
  struct W4Shape {
    const char* name;
    std::vector<int64_t> x;
    int64_t n, group;
  };
  const std::vector<W4Shape> w4 = {
      {"gemv_k256_g32_n64", {1, 256}, 64, 32},
      {"gemv_vector_x", {128}, 37, 64},
      {"m4_k96_g32", {4, 96}, 24, 32},    // K = 32 (mod 64): a half step at the end
      {"m3_k160_g32", {3, 160}, 19, 32},  // K = 32 (mod 128) on AVX-512
      {"m16_k512_g128", {16, 512}, 40, 128},
      {"m2_k256_g256", {2, 256}, 17, 256},
      {"k32_g32", {2, 32}, 9, 32},
      {"rank3_x", {2, 3, 128}, 21, 64},
      {"m17_k1024_g512", {17, 1024}, 33, 512},
      {"n1", {5, 64}, 1, 32},
  };
  for (const W4Shape& s : w4) {
    const int64_t k = s.x.back();
    const int64_t groups = k / s.group;
    for (const char* kernel : {"matmul.w4a8_dyn", "matmul.w4"}) {
      const std::string base = std::string(kernel) == "matmul.w4" ? "w4_" : "w4a8_dyn_";
      // Symmetric (zero point 8) with f32 scales; asymmetric with f16 scales.
      cs.push_back(make(base + s.name, kernel, {f32(s.x).range(-4, 4), i8({s.n, k / 2}), scales({groups, s.n})},
                        {f32(with_last(s.x, s.n))}));
      cs.push_back(make(base + s.name + "_zeros_f16", kernel,
                        {f32(s.x).range(-4, 4), i8({s.n, k / 2}), f16({groups, s.n}).range(0.001, 0.05),
                         tensor(SK_DTYPE_I8, {groups, s.n}).range(0, 15)},
                        {f32(with_last(s.x, s.n))}));
    }
  }
  cs.push_back(make("w4a8_dyn_strided", "matmul.w4a8_dyn",
                    {f32({5, 64}).padded(1, 3), i8({30, 32}).padded(1, 4), scales({2, 30}).padded(1, 2),
                     tensor(SK_DTYPE_I8, {2, 30}).range(0, 15).padded(1, 5)},
                    {f32({5, 30}).padded(1, 2)}));
  cs.push_back(make("w4_strided", "matmul.w4",
                    {f32({5, 64}).padded(1, 3), i8({30, 32}).padded(1, 4), scales({2, 30}).padded(1, 2)},
                    {f32({5, 30}).reversed(0)}));
  // Zero points outside [0, 15] (any int8 is accepted) and the extremes of q and x.
  cs.push_back(make("w4a8_dyn_extreme_zeros", "matmul.w4a8_dyn",
                    {f32({3, 512}).with_values({4.0, -4.0}), i8({9, 256}).with_values({-1, 0x0F, -16}), scales({4, 9}),
                     tensor(SK_DTYPE_I8, {4, 9}).with_values({-128, 127, 0, 15})},
                    {f32({3, 9})}));
  // The tiled layout (w [N/16, ceil(K/128), 16, 64], scales and zeros [N/16, K/G, 16]): random
  // padding bytes, which the kernels must not read into the result; K ending inside a step.
  struct W4TiledShape {
    const char* name;
    std::vector<int64_t> x;
    int64_t tiles, group;
  };
  for (const W4TiledShape& s : std::vector<W4TiledShape>{{"gemv_k1024_g32_n64", {1, 1024}, 4, 32},
                                                         {"m3_k160_g32", {3, 160}, 2, 32},
                                                         {"m4_k96_g32", {4, 96}, 2, 32},
                                                         {"m5_k384_g128", {5, 384}, 3, 128},
                                                         {"rank3_k256_g256", {2, 3, 256}, 1, 256}}) {
    const int64_t k = s.x.back();
    const int64_t groups = k / s.group;
    const int64_t n = 16 * s.tiles;
    const std::vector<int64_t> w = {s.tiles, (k + 127) / 128, 16, 64};
    for (const char* kernel : {"matmul.w4a8_dyn", "matmul.w4"}) {
      const std::string base = std::string(kernel) == "matmul.w4" ? "w4_tiled_" : "w4a8_dyn_tiled_";
      cs.push_back(make(base + s.name, kernel, {f32(s.x).range(-4, 4), i8(w), scales({s.tiles, groups, 16})},
                        {f32(with_last(s.x, n))}));
      cs.push_back(make(base + s.name + "_zeros_f16", kernel,
                        {f32(s.x).range(-4, 4), i8(w), f16({s.tiles, groups, 16}).range(0.001, 0.05),
                         tensor(SK_DTYPE_I8, {s.tiles, groups, 16}).range(0, 15)},
                        {f32(with_last(s.x, n))}));
    }
  }
  cs.push_back(make("w4a8_dyn_k0", "matmul.w4a8_dyn", {f32({2, 0}), i8({5, 0}), scales({0, 5})}, {f32({2, 5})}));
  cs.push_back(make("w4_k0", "matmul.w4", {f32({2, 0}), i8({5, 0}), scales({0, 5})}, {f32({2, 5})}));

  // ---- grouped_matmul.{f32,bf16,f16,w8a8_dyn} ----
  struct Group {
    const char* name;
    int64_t r, k, n;
    std::vector<double> counts;
  };
  const std::vector<Group> groups = {
      {"three_experts_two_idle_rows", 10, 33, 20, {3, 0, 5}},  // an empty expert, rows past the sum
      {"one_expert_has_all", 6, 16, 40, {0, 6, 0, 0}},
      {"no_rows_routed", 4, 24, 18, {0, 0}},
      {"m16_one_expert", 16, 300, 24, {16}},
      {"k1", 7, 1, 9, {2, 5}},
      {"decode_8_experts", 32, 64, 48, {4, 4, 0, 8, 2, 6, 3, 5}},
  };
  for (const Group& g : groups) {
    const auto e = static_cast<int64_t>(g.counts.size());
    cs.push_back(make(std::string("gmm_f32_") + g.name, "grouped_matmul.f32",
                      {f32({g.r, g.k}), counts(g.counts), f32({e, g.n, g.k})}, {f32({g.r, g.n})}));
    cs.push_back(make(std::string("gmm_bf16_") + g.name, "grouped_matmul.bf16",
                      {f32({g.r, g.k}), counts(g.counts), bf16({e, g.n, g.k})}, {f32({g.r, g.n})}));
    cs.push_back(make(std::string("gmm_f16_") + g.name, "grouped_matmul.f16",
                      {f32({g.r, g.k}), counts(g.counts), f16({e, g.n, g.k})}, {f32({g.r, g.n})}));
    cs.push_back(make(std::string("gmm_w8a8_dyn_") + g.name, "grouped_matmul.w8a8_dyn",
                      {f32({g.r, g.k}).range(-3, 3), counts(g.counts), i8({e, g.n, g.k}), scales({e, g.n})},
                      {f32({g.r, g.n})}));
  }
  cs.push_back(make("gmm_f32_padded", "grouped_matmul.f32",
                    {f32({9, 40}).padded(1, 3), counts({4, 1, 3}), f32({3, 21, 40}).padded(1, 2).padded(2, 5)},
                    {f32({9, 21}).padded(1, 4)}));
  cs.push_back(make("gmm_bf16_reversed_rows", "grouped_matmul.bf16",
                    {f32({8, 50}).reversed(0), counts({5, 3}), bf16({2, 30, 50})}, {f32({8, 30}).reversed(0)}));
  cs.push_back(make("gmm_w8a8_dyn_strided_scales", "grouped_matmul.w8a8_dyn",
                    {f32({6, 70}), counts({2, 0, 4}), i8({3, 17, 70}), scales({3, 17}).transposed({1, 0})},
                    {f32({6, 17})}));
  cs.push_back(make("gmm_f32_k0", "grouped_matmul.f32", {f32({3, 0}), counts({1, 2}), f32({2, 5, 0})}, {f32({3, 5})}));
  return cs;
}

}  // namespace sk::kernel_test

// ---------------------------------------------------------------------------------------------
// Checks the case table cannot express: the numeric contracts between kernels of the family,
// tighter tolerances where an ISA level allows them, and the error paths.

namespace {

struct Pkg {
  const sk_kernel_package* table = nullptr;
  int32_t (*force_isa)(int32_t) = nullptr;
};

const Pkg& pkg() {
  static const Pkg p = [] {
    Pkg r;
    void* h = dlopen(SK_BUILTIN_PACKAGE_PATH, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return r;
    const auto fn = reinterpret_cast<sk_kernel_package_table_fn>(dlsym(h, SK_KERNEL_PACKAGE_SYMBOL));
    r.table = fn != nullptr ? fn() : nullptr;
    r.force_isa = reinterpret_cast<int32_t (*)(int32_t)>(dlsym(h, "sk_kernels_builtin_force_isa"));
    return r;
  }();
  return p;
}

const sk_kernel_desc* kernel(const char* name) {
  if (pkg().table == nullptr) return nullptr;
  for (uint32_t i = 0; i < pkg().table->num_kernels; ++i) {
    if (std::strcmp(pkg().table->kernels[i].name, name) == 0) return &pkg().table->kernels[i];
  }
  return nullptr;
}

// The package's levels (src/kernels/cpu_isa.h) that change matmul numerics: from avx512_bf16 on,
// matmul.bf16 rounds x to bf16 (VDPBF16PS, then the AMX tiles).
constexpr int kIsaAvx512Bf16 = 4;
constexpr int kIsaAmx = 5;

// Every ISA level the CPU has, forced in turn.
std::vector<int> levels() {
  std::vector<int> out;
  for (int l = 0; l <= kIsaAmx; ++l) {
    if (pkg().force_isa != nullptr && pkg().force_isa(l) == l) out.push_back(l);
  }
  if (pkg().force_isa != nullptr) pkg().force_isa(-1);
  return out;
}

// A dense operand with its own storage.
struct Tensor {
  std::vector<unsigned char> bytes;
  sk_tensor_arg arg{};
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
};

Tensor dense(int32_t dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.arg.dtype = dtype;
  t.arg.rank = static_cast<int32_t>(shape.size());
  int64_t n = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    t.arg.shape[d] = shape[d];
    t.arg.stride[d] = n;
    n *= shape[d];
  }
  t.bytes.assign(static_cast<size_t>(std::max<int64_t>(1, n * sk_dtype_size(dtype))), 0);
  t.arg.data = t.bytes.data();
  return t;
}

void fill_uniform(Tensor& t, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  const int64_t n = sk_tensor_numel(&t.arg);
  for (int64_t i = 0; i < n; ++i) {
    const float v = u(rng);
    switch (t.arg.dtype) {
      case SK_DTYPE_F32:
        t.data<float>()[i] = v;
        break;
      case SK_DTYPE_BF16:
        t.data<uint16_t>()[i] = sk::f32_to_bf16(v);
        break;
      case SK_DTYPE_I8:
        t.data<int8_t>()[i] = static_cast<int8_t>(std::lround(v));
        break;
      default:
        break;
    }
  }
}

struct Call {
  std::vector<sk_tensor_arg> in;
  std::vector<sk_tensor_arg> out;
  sk_kernel_args args{};
  std::vector<unsigned char> tiling;

  Call(std::vector<Tensor*> inputs, std::vector<Tensor*> outputs) {
    for (Tensor* t : inputs) in.push_back(t->arg);
    for (Tensor* t : outputs) out.push_back(t->arg);
    args.inputs = in.data();
    args.outputs = out.data();
    args.num_inputs = static_cast<int32_t>(in.size());
    args.num_outputs = static_cast<int32_t>(out.size());
  }
  // Runs the tiling (sink kernels), then every core; returns the first failure's code and
  // message.
  int32_t run(const sk_kernel_desc& k, int cores, std::string* message = nullptr) {
    if (k.tiling != nullptr) {
      tiling.assign(65536, 0);
      uint32_t size = 0;
      const int32_t rc = k.tiling(&args, tiling.data(), static_cast<uint32_t>(tiling.size()), &size);
      if (rc != SK_OK) return rc;
      args.tiling = tiling.data();
      args.tiling_size = size;
    }
    int32_t first = SK_OK;
    for (int c = 0; c < cores; ++c) {
      char msg[256] = {};
      sk_core_ctx ctx{};
      ctx.core_id = c;
      ctx.num_cores = cores;
      ctx.error_message = msg;
      ctx.error_capacity = sizeof msg;
      const int32_t rc = k.run(&args, &ctx);
      if (rc != SK_OK && first == SK_OK) {
        first = rc;
        if (message != nullptr) *message = msg;
      }
    }
    return first;
  }
};

class IsaForced {
 public:
  explicit IsaForced(int level) { pkg().force_isa(level); }
  ~IsaForced() { pkg().force_isa(-1); }
  IsaForced(const IsaForced&) = delete;
  IsaForced& operator=(const IsaForced&) = delete;
};

// matmul.f32's numeric definition, bit for bit, at the FMA levels (avx2: 8 lanes, avx512 and up:
// 16): lane l accumulates x[k] * w[k] for k = l (mod lanes) with one FMA per k, and the lanes are
// summed in the fixed tree of hsum_lanes (upper half onto lower half). Magnitudes from 2^-20 to
// 2^20 make every other order of the sum give other bits; N = 70 puts dot products both in the
// 16-at-a-time finish and in the one-by-one one.
TEST(MatmulFamily, F32IsTheLaneDefinitionBitForBit) {
  const sk_kernel_desc* kf = kernel("matmul.f32");
  ASSERT_NE(kf, nullptr);
  const int64_t m = 3, n = 70, k = 100;
  Tensor x = dense(SK_DTYPE_F32, {m, k});
  Tensor w = dense(SK_DTYPE_F32, {n, k});
  fill_uniform(x, 31);
  fill_uniform(w, 32);
  std::mt19937 rng(33);
  for (int64_t i = 0; i < n * k; ++i)
    w.data<float>()[i] = std::ldexp(w.data<float>()[i], static_cast<int>(rng() % 41) - 20);
  constexpr int kIsaAvx2 = 1;
  for (int level : levels()) {
    if (level < kIsaAvx2) continue;  // the scalar level rounds products and sums apart
    SCOPED_TRACE("isa level " + std::to_string(level));
    const int lanes = level == kIsaAvx2 ? 8 : 16;
    IsaForced forced(level);
    Tensor y = dense(SK_DTYPE_F32, {m, n});
    ASSERT_EQ(Call({&x, &w}, {&y}).run(*kf, 2), SK_OK);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float acc[16] = {};
        for (int64_t l = 0; l < k; ++l) {
          acc[l % lanes] = std::fma(x.data<float>()[i * k + l], w.data<float>()[j * k + l], acc[l % lanes]);
        }
        for (int half = lanes / 2; half >= 1; half /= 2) {
          for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
        }
        const float got = y.data<float>()[i * n + j];
        EXPECT_EQ(0, std::memcmp(&got, &acc[0], sizeof got)) << i << ", " << j << ": " << got << " vs " << acc[0];
      }
    }
  }
}

// Off the AVX512_BF16 path, bf16 weights widen exactly, so matmul.bf16 must be matmul.f32 on the
// widened weights, bit for bit; on that path it must be within f32 rounding of the exact
// product of bf16(x) and w.
TEST(MatmulFamily, Bf16IsF32OnWidenedWeightsOrExactOnRoundedX) {
  const sk_kernel_desc* kb = kernel("matmul.bf16");
  const sk_kernel_desc* kf = kernel("matmul.f32");
  ASSERT_NE(kb, nullptr);
  ASSERT_NE(kf, nullptr);
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 70, 4096}, {5, 33, 1000}, {16, 40, 77}}) {
    Tensor x = dense(SK_DTYPE_F32, {m, k});
    Tensor w = dense(SK_DTYPE_BF16, {n, k});
    Tensor wf = dense(SK_DTYPE_F32, {n, k});
    fill_uniform(x, 1);
    fill_uniform(w, 2);
    for (int64_t i = 0; i < n * k; ++i) wf.data<float>()[i] = sk::bf16_to_f32(w.data<uint16_t>()[i]);
    for (int level : levels()) {
      SCOPED_TRACE("isa level " + std::to_string(level) + ", " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                   std::to_string(k));
      IsaForced forced(level);
      Tensor yb = dense(SK_DTYPE_F32, {m, n});
      Tensor yf = dense(SK_DTYPE_F32, {m, n});
      ASSERT_EQ(Call({&x, &w}, {&yb}).run(*kb, 3), SK_OK);
      ASSERT_EQ(Call({&x, &wf}, {&yf}).run(*kf, 2), SK_OK);
      const bool rounds_x = level >= kIsaAvx512Bf16;
      if (!rounds_x) {
        EXPECT_EQ(yb.bytes, yf.bytes);
        continue;
      }
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double want = 0.0;
          for (int64_t l = 0; l < k; ++l) {
            want += static_cast<double>(sk::bf16_to_f32(sk::f32_to_bf16(x.data<float>()[i * k + l]))) *
                    wf.data<float>()[j * k + l];
          }
          EXPECT_NEAR(yb.data<float>()[i * n + j], want, 1e-4 + 1e-4 * std::fabs(want));
        }
      }
    }
  }
}

// f16 widens exactly, so matmul.f16 is matmul.f32 on the widened weights, bit for bit, at every
// level; the weights include subnormal halves, both zeros and the largest finite half.
TEST(MatmulFamily, F16IsF32OnWidenedWeights) {
  const sk_kernel_desc* kh = kernel("matmul.f16");
  const sk_kernel_desc* kf = kernel("matmul.f32");
  ASSERT_NE(kh, nullptr);
  ASSERT_NE(kf, nullptr);
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 70, 4096}, {5, 33, 1000}, {16, 40, 77}}) {
    Tensor x = dense(SK_DTYPE_F32, {m, k});
    Tensor w = dense(SK_DTYPE_F16, {n, k});
    Tensor wf = dense(SK_DTYPE_F32, {n, k});
    fill_uniform(x, 1);
    std::mt19937 rng(9);
    const uint16_t specials[] = {0x0001, 0x03FF, 0x8001, 0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0400};
    for (int64_t i = 0; i < n * k; ++i) {
      uint16_t h = static_cast<uint16_t>(rng() % 0x7C00u) | static_cast<uint16_t>(rng() & 0x8000u);  // finite
      if (i % 97 == 0) h = specials[(i / 97) % 8];
      w.data<uint16_t>()[i] = h;
      wf.data<float>()[i] = sk::f16_to_f32(h);
    }
    for (int level : levels()) {
      SCOPED_TRACE("isa level " + std::to_string(level) + ", " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                   std::to_string(k));
      IsaForced forced(level);
      Tensor yh = dense(SK_DTYPE_F32, {m, n});
      Tensor yf = dense(SK_DTYPE_F32, {m, n});
      ASSERT_EQ(Call({&x, &w}, {&yh}).run(*kh, 3), SK_OK);
      ASSERT_EQ(Call({&x, &wf}, {&yf}).run(*kf, 2), SK_OK);
      EXPECT_EQ(yh.bytes, yf.bytes);
    }
  }
}

// The error of the levels that round x (avx512_bf16, amx) against the exact product of the
// unrounded x, at the K of LongCat layers (1536 to 6144): within the documented bound
// 2.5e-3 * sqrt(K) for data in [-1, 1] (docs/kernels_matmul.md), which is about 5 standard
// deviations of the x rounding error. K = 1000 and 1030 have a partial last step of 32.
TEST(MatmulFamily, Bf16RoundedXErrorGrowsAsSqrtK) {
  const sk_kernel_desc* kb = kernel("matmul.bf16");
  ASSERT_NE(kb, nullptr);
  const std::vector<int> have = levels();
  if (std::find(have.begin(), have.end(), kIsaAvx512Bf16) == have.end()) GTEST_SKIP() << "no AVX512_BF16";
  for (int level : {kIsaAvx512Bf16, kIsaAmx}) {
    if (std::find(have.begin(), have.end(), level) == have.end()) continue;
    IsaForced forced(level);
    const char* name = level == kIsaAmx ? "amx" : "avx512_bf16";
    constexpr int64_t kM = 4;
    constexpr int64_t kN = 64;
    for (int64_t k : {1000, 1024, 1030, 1536, 4096, 6144}) {
      Tensor x = dense(SK_DTYPE_F32, {kM, k});
      Tensor w = dense(SK_DTYPE_BF16, {kN, k});
      fill_uniform(x, 11);
      fill_uniform(w, 12);
      Tensor y = dense(SK_DTYPE_F32, {kM, kN});
      ASSERT_EQ(Call({&x, &w}, {&y}).run(*kb, 2), SK_OK);
      double worst = 0.0;
      for (int64_t i = 0; i < kM; ++i) {
        for (int64_t j = 0; j < kN; ++j) {
          double want = 0.0;
          for (int64_t l = 0; l < k; ++l) {
            want += static_cast<double>(x.data<float>()[i * k + l]) * sk::bf16_to_f32(w.data<uint16_t>()[j * k + l]);
          }
          worst = std::max(worst, std::fabs(y.data<float>()[i * kN + j] - want));
        }
      }
      const double bound = 2.5e-3 * std::sqrt(static_cast<double>(k));
      EXPECT_LE(worst, bound) << "K = " << k;
      RecordProperty(std::string("max_error_") + name + "_k" + std::to_string(k), std::to_string(worst));
      std::printf("matmul.bf16 %s, K = %lld: max |error| %.4g, bound %.4g\n", name, static_cast<long long>(k), worst,
                  bound);
    }
  }
}

// A kernel may keep per-thread buffers from one call to the next (the AMX tiles copy the last
// partial 32-k step and the last partial block of 16 weight rows into them, padded with zeros,
// and Call::run runs every core on this thread): a later call with shorter tails must find zeros
// where an earlier one left its weights. x is zero there too, so only a non-finite leftover shows
// (inf * 0 = NaN): the earlier call's weights are all +inf. N = 21 is one block of 16 rows and a
// partial one of 5; K = 60 then 36 leaves 28, then 4, in the last step.
TEST(MatmulFamily, EarlierCallsDoNotLeakIntoLaterTails) {
  const sk_kernel_desc* kb = kernel("matmul.bf16");
  ASSERT_NE(kb, nullptr);
  constexpr int64_t kM = 3;
  constexpr int64_t kN = 21;
  Tensor x = dense(SK_DTYPE_F32, {kM, 36});
  Tensor w = dense(SK_DTYPE_BF16, {kN, 36});
  fill_uniform(x, 41);
  fill_uniform(w, 42);
  Tensor x_inf = dense(SK_DTYPE_F32, {kM, 60});
  Tensor w_inf = dense(SK_DTYPE_BF16, {kN, 60});
  fill_uniform(x_inf, 43);
  for (int64_t i = 0; i < kN * 60; ++i) w_inf.data<uint16_t>()[i] = sk::f32_to_bf16(INFINITY);
  for (int level : levels()) {
    SCOPED_TRACE("isa level " + std::to_string(level));
    IsaForced forced(level);
    for (int cores : {1, 2}) {
      Tensor first = dense(SK_DTYPE_F32, {kM, kN});
      Tensor after = dense(SK_DTYPE_F32, {kM, kN});
      Tensor y_inf = dense(SK_DTYPE_F32, {kM, kN});
      ASSERT_EQ(Call({&x, &w}, {&first}).run(*kb, cores), SK_OK);
      ASSERT_EQ(Call({&x_inf, &w_inf}, {&y_inf}).run(*kb, cores), SK_OK);
      ASSERT_EQ(Call({&x, &w}, {&after}).run(*kb, cores), SK_OK);
      for (int64_t i = 0; i < kM * kN; ++i) ASSERT_TRUE(std::isfinite(first.data<float>()[i])) << i;
      EXPECT_EQ(after.bytes, first.bytes) << cores << " cores";
    }
  }
}

// matmul.w8a8_dyn is quantize.i8 followed by matmul.w8a8, bit for bit, at every ISA level.
TEST(MatmulFamily, W8a8DynIsQuantizeThenW8a8) {
  const sk_kernel_desc* kq = kernel("quantize.i8");
  const sk_kernel_desc* kw = kernel("matmul.w8a8");
  const sk_kernel_desc* kd = kernel("matmul.w8a8_dyn");
  ASSERT_TRUE(kq != nullptr && kw != nullptr && kd != nullptr);
  // 7 rows: at the amx level the AMX tiles (from 6 rows) against the other levels' VNNI and
  // integer tiles; K = 4100 has a partial last step of 64.
  const int64_t m = 7, n = 37, k = 4100;
  Tensor x = dense(SK_DTYPE_F32, {m, k});
  Tensor w = dense(SK_DTYPE_I8, {n, k});
  Tensor ws = dense(SK_DTYPE_F32, {n});
  fill_uniform(x, 3, -5.0f, 5.0f);
  fill_uniform(w, 4, -128.0f, 127.0f);
  fill_uniform(ws, 5, 0.001f, 0.01f);
  std::vector<unsigned char> first;
  for (int level : levels()) {
    SCOPED_TRACE("isa level " + std::to_string(level));
    IsaForced forced(level);
    Tensor q = dense(SK_DTYPE_I8, {m, k});
    Tensor xs = dense(SK_DTYPE_F32, {m});
    Tensor y1 = dense(SK_DTYPE_F32, {m, n});
    Tensor y2 = dense(SK_DTYPE_F32, {m, n});
    ASSERT_EQ(Call({&x}, {&q, &xs}).run(*kq, 2), SK_OK);
    ASSERT_EQ(Call({&q, &xs, &w, &ws}, {&y1}).run(*kw, 3), SK_OK);
    ASSERT_EQ(Call({&x, &w, &ws}, {&y2}).run(*kd, 2), SK_OK);
    EXPECT_EQ(y1.bytes, y2.bytes);
    // Exact integer sums: every ISA level gives the same bits.
    if (first.empty()) first = y1.bytes;
    EXPECT_EQ(y1.bytes, first);
  }
}

// 4-bit weights: w [N, K/2] (k = 2j in the low nibble of byte j), scales [K/G, N], zero points.
struct W4Operands {
  Tensor w, scale, zero;
  int64_t group;
  // The dequantised weight fl(s * (q - z)) of (n, k).
  float dequant(int64_t n, int64_t k, bool with_zero) {
    const auto byte = static_cast<uint8_t>(w.data<int8_t>()[n * w.arg.shape[1] + k / 2]);
    const int q = k % 2 == 0 ? byte & 0xF : byte >> 4;
    const int64_t g = k / group;
    const int64_t nn = scale.arg.shape[1];
    const int z = with_zero ? zero.data<int8_t>()[g * nn + n] : 8;
    return scale.data<float>()[g * nn + n] * static_cast<float>(q - z);
  }
};

W4Operands w4_operands(int64_t n, int64_t k, int64_t group, uint32_t seed) {
  W4Operands o{dense(SK_DTYPE_I8, {n, k / 2}), dense(SK_DTYPE_F32, {k / group, n}), dense(SK_DTYPE_I8, {k / group, n}),
               group};
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < n * k / 2; ++i) o.w.data<int8_t>()[i] = static_cast<int8_t>(rng());
  std::uniform_real_distribution<float> u(0.001f, 0.05f);
  for (int64_t i = 0; i < n * k / group; ++i) {
    o.scale.data<float>()[i] = u(rng);
    o.zero.data<int8_t>()[i] = static_cast<int8_t>(rng() % 16);
  }
  return o;
}

// matmul.w4 is matmul.f32 on the dequantised weights, bit for bit, at every level.
TEST(MatmulFamily, W4IsF32OnDequantisedWeights) {
  const sk_kernel_desc* k4 = kernel("matmul.w4");
  const sk_kernel_desc* kf = kernel("matmul.f32");
  ASSERT_TRUE(k4 != nullptr && kf != nullptr);
  for (const auto& [m, n, k, group] :
       std::vector<std::array<int64_t, 4>>{{1, 70, 4096, 128}, {5, 33, 96, 32}, {16, 40, 512, 64}}) {
    W4Operands o = w4_operands(n, k, group, 40);
    Tensor x = dense(SK_DTYPE_F32, {m, k});
    fill_uniform(x, 41);
    for (bool zeros : {false, true}) {
      Tensor wf = dense(SK_DTYPE_F32, {n, k});
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < k; ++i) wf.data<float>()[j * k + i] = o.dequant(j, i, zeros);
      }
      for (int level : levels()) {
        SCOPED_TRACE("isa level " + std::to_string(level) + ", " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                     std::to_string(k) + (zeros ? " with zeros" : ""));
        IsaForced forced(level);
        Tensor y4 = dense(SK_DTYPE_F32, {m, n});
        Tensor yf = dense(SK_DTYPE_F32, {m, n});
        std::vector<Tensor*> ins = {&x, &o.w, &o.scale};
        if (zeros) ins.push_back(&o.zero);
        ASSERT_EQ(Call(ins, {&y4}).run(*k4, 3), SK_OK);
        ASSERT_EQ(Call({&x, &wf}, {&yf}).run(*kf, 2), SK_OK);
        EXPECT_EQ(y4.bytes, yf.bytes);
      }
    }
  }
}

// matmul.w4a8_dyn gives the same bits at every level and on any number of cores (exact integer
// group sums, then the f32 steps in group order), including the largest K with the extreme
// values in every product, where the group sums and the zero-point terms are largest.
TEST(MatmulFamily, W4a8DynIsTheSameAtEveryLevel) {
  const sk_kernel_desc* kd = kernel("matmul.w4a8_dyn");
  ASSERT_NE(kd, nullptr);
  for (const auto& [m, n, k, group] : std::vector<std::array<int64_t, 4>>{
           {1, 70, 4096, 32}, {5, 33, 96, 32}, {16, 40, 512, 64}, {3, 21, 1024, 256}, {2, 17, 65536, 4096}}) {
    W4Operands o = w4_operands(n, k, group, 50);
    Tensor x = dense(SK_DTYPE_F32, {m, k});
    fill_uniform(x, 51, -3.0f, 3.0f);
    if (k == 65536) {
      for (int64_t i = 0; i < m * k; ++i) x.data<float>()[i] = i % 2 == 0 ? 1.0f : -1.0f;
      std::memset(o.w.bytes.data(), 0xFF, o.w.bytes.size());  // q = 15 everywhere
      for (int64_t i = 0; i < n * k / group; ++i) o.zero.data<int8_t>()[i] = static_cast<int8_t>(i % 2 ? -128 : 127);
    }
    for (bool zeros : {false, true}) {
      std::vector<unsigned char> first;
      for (int level : levels()) {
        SCOPED_TRACE("isa level " + std::to_string(level) + ", " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                     std::to_string(k) + (zeros ? " with zeros" : ""));
        IsaForced forced(level);
        for (int cores : {1, 3}) {
          Tensor y = dense(SK_DTYPE_F32, {m, n});
          std::vector<Tensor*> ins = {&x, &o.w, &o.scale};
          if (zeros) ins.push_back(&o.zero);
          ASSERT_EQ(Call(ins, {&y}).run(*kd, cores), SK_OK);
          if (first.empty()) first = y.bytes;
          EXPECT_EQ(y.bytes, first);
        }
      }
    }
  }
}

// The tiled layout of the same weights (docs/kernels_matmul.md, "Tiled layout"): w [N/16,
// ceil(K/128), 16, 64] with byte j of row n at [n / 16, j / 64, n % 16, j % 64], the padding
// filled with a pattern the kernels must not read into the result; scales and zeros [N/16, K/G,
// 16] with group g of row n at [n / 16, g, n % 16].
W4Operands tile_w4(W4Operands& o, int64_t n, int64_t k) {
  const int64_t steps = (k + 127) / 128;
  const int64_t groups = k / o.group;
  W4Operands t{dense(SK_DTYPE_I8, {n / 16, steps, 16, 64}), dense(SK_DTYPE_F32, {n / 16, groups, 16}),
               dense(SK_DTYPE_I8, {n / 16, groups, 16}), o.group};
  std::memset(t.w.bytes.data(), 0xA5, t.w.bytes.size());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k / 2; ++j) {
      t.w.data<int8_t>()[((r / 16 * steps + j / 64) * 16 + r % 16) * 64 + j % 64] = o.w.data<int8_t>()[r * (k / 2) + j];
    }
    for (int64_t g = 0; g < groups; ++g) {
      t.scale.data<float>()[(r / 16 * groups + g) * 16 + r % 16] = o.scale.data<float>()[g * n + r];
      t.zero.data<int8_t>()[(r / 16 * groups + g) * 16 + r % 16] = o.zero.data<int8_t>()[g * n + r];
    }
  }
  return t;
}

// Both 4-bit kernels give the row layout's bits on the tiled layout, at every level and core
// count (cores split N in whole tiles), for K that ends inside a 128-k step (K = 96, 160) or a
// 64-k AVX2 step, every group size the tiles treat apart, and the padding bytes set.
TEST(MatmulFamily, W4TiledLayoutGivesTheRowLayoutsBits) {
  for (const char* name : {"matmul.w4a8_dyn", "matmul.w4"}) {
    const sk_kernel_desc* kd = kernel(name);
    ASSERT_NE(kd, nullptr);
    for (const auto& [m, n, k, group] : std::vector<std::array<int64_t, 4>>{{1, 64, 1024, 32},
                                                                            {3, 48, 160, 32},
                                                                            {4, 32, 96, 32},
                                                                            {2, 80, 384, 64},
                                                                            {5, 16, 512, 128},
                                                                            {1, 32, 768, 256},
                                                                            {17, 160, 256, 32}}) {
      W4Operands o = w4_operands(n, k, group, 60);
      W4Operands t = tile_w4(o, n, k);
      Tensor x = dense(SK_DTYPE_F32, {m, k});
      fill_uniform(x, 61, -3.0f, 3.0f);
      for (bool zeros : {false, true}) {
        for (int level : levels()) {
          SCOPED_TRACE(std::string(name) + ", isa level " + std::to_string(level) + ", " + std::to_string(m) + "x" +
                       std::to_string(n) + "x" + std::to_string(k) + " G " + std::to_string(group) +
                       (zeros ? " with zeros" : ""));
          IsaForced forced(level);
          Tensor want = dense(SK_DTYPE_F32, {m, n});
          std::vector<Tensor*> rows = {&x, &o.w, &o.scale};
          if (zeros) rows.push_back(&o.zero);
          ASSERT_EQ(Call(rows, {&want}).run(*kd, 1), SK_OK);
          for (int cores : {1, 2, 3}) {
            Tensor y = dense(SK_DTYPE_F32, {m, n});
            std::vector<Tensor*> tiled = {&x, &t.w, &t.scale};
            if (zeros) tiled.push_back(&t.zero);
            ASSERT_EQ(Call(tiled, {&y}).run(*kd, cores), SK_OK) << cores << " cores";
            EXPECT_EQ(y.bytes, want.bytes) << cores << " cores";
          }
        }
      }
    }
  }
}

// Every row gives the bits it gives alone, whatever M (so the driver's row blocks, K steps and
// tiles never change a dot product; the shapes reach every kind of K step), including rows too long for the driver's
// panel (f32 K above 132096, packed per K step instead of once); and the result stays close to the exact product.
TEST(MatmulFamily, RowsAreIndependentOfMAndOfThePanel) {
  struct Shape {
    const char* kernel;
    int32_t w_dtype;
    int64_t m, n, k;
  };
  for (const Shape& s :
       {Shape{"matmul.f32", SK_DTYPE_F32, 19, 37, 300}, Shape{"matmul.f32", SK_DTYPE_F32, 3, 5, 140001},
        Shape{"matmul.bf16", SK_DTYPE_BF16, 19, 37, 300}, Shape{"matmul.bf16", SK_DTYPE_BF16, 3, 5, 140001},
        Shape{"matmul.w8a8_dyn", SK_DTYPE_I8, 19, 37, 2500},
        // few-row and single-tile blocks (M = 3, 4) and the K steps of the 4 x 4 tiles (M = 17)
        Shape{"matmul.f32", SK_DTYPE_F32, 4, 37, 2100}, Shape{"matmul.f32", SK_DTYPE_F32, 17, 21, 4200},
        Shape{"matmul.bf16", SK_DTYPE_BF16, 4, 37, 2100}, Shape{"matmul.bf16", SK_DTYPE_BF16, 17, 21, 8300},
        Shape{"matmul.w8a8_dyn", SK_DTYPE_I8, 3, 37, 2500}, Shape{"matmul.w8a8_dyn", SK_DTYPE_I8, 17, 9, 16500}}) {
    SCOPED_TRACE(std::string(s.kernel) + " K = " + std::to_string(s.k));
    const sk_kernel_desc* kk = kernel(s.kernel);
    ASSERT_NE(kk, nullptr);
    const bool w8 = s.w_dtype == SK_DTYPE_I8;
    Tensor x = dense(SK_DTYPE_F32, {s.m, s.k});
    Tensor w = dense(s.w_dtype, {s.n, s.k});
    Tensor ws = dense(SK_DTYPE_F32, {s.n});
    fill_uniform(x, 21);
    fill_uniform(w, 22, w8 ? -127.0f : -1.0f, w8 ? 127.0f : 1.0f);
    fill_uniform(ws, 23, 0.001f, 0.01f);
    for (int level : levels()) {
      SCOPED_TRACE("isa level " + std::to_string(level));
      IsaForced forced(level);
      Tensor y = dense(SK_DTYPE_F32, {s.m, s.n});
      const auto run = [&](Tensor& xs, Tensor& ys) {
        return w8 ? Call({&xs, &w, &ws}, {&ys}).run(*kk, 2) : Call({&xs, &w}, {&ys}).run(*kk, 2);
      };
      ASSERT_EQ(run(x, y), SK_OK);
      for (int64_t i = 0; i < s.m; ++i) {
        Tensor xi = dense(SK_DTYPE_F32, {1, s.k});
        Tensor yi = dense(SK_DTYPE_F32, {1, s.n});
        std::memcpy(xi.data<float>(), x.data<float>() + i * s.k, sizeof(float) * s.k);
        ASSERT_EQ(run(xi, yi), SK_OK);
        EXPECT_EQ(0, std::memcmp(yi.data<float>(), y.data<float>() + i * s.n, sizeof(float) * s.n)) << "row " << i;
      }
      if (w8) continue;  // exactness of the int8 path: W8a8DynIsQuantizeThenW8a8 and the reference
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double want = 0.0;
          for (int64_t l = 0; l < s.k; ++l) {
            const double wv = s.w_dtype == SK_DTYPE_F32 ? w.data<float>()[j * s.k + l]
                                                        : sk::bf16_to_f32(w.data<uint16_t>()[j * s.k + l]);
            want += static_cast<double>(x.data<float>()[i * s.k + l]) * wv;
          }
          // f32 sums: ~sqrt(K) * 2^-24 * |partial sums|; the bf16 x rounding: the sqrt(K) bound.
          const double tol = level >= kIsaAvx512Bf16 && !w8 && s.w_dtype == SK_DTYPE_BF16
                                 ? 2.5e-3 * std::sqrt(static_cast<double>(s.k))
                                 : 5e-3;
          EXPECT_NEAR(y.data<float>()[i * s.n + j], want, tol) << i << ", " << j;
        }
      }
    }
  }
}

// At avx512_bf16 a GEMV on short rows spells VDPBF16PS out as two FMAs per pair with denormals
// read as zero and flushed (matmul_bf16.cc), while blocks of several rows run VDPBF16PS itself:
// the rows must still be the same bits on the values where those details show: denormal weights
// (read as zero), products and sums below the normal range (flushed, with their sign), sums that
// overflow to infinity, signed zeros and infinities, and the order of the pair's two products
// (magnitudes 2^-12 to 2^12 apart, so that adding them the other way round rounds differently).
// K = 1000 (short rows, with a tail of 8 for the masked VDPBF16PS step), 1024 (no tail) and 1030
// (rows side by side).
TEST(MatmulFamily, Bf16GemvKeepsTheBlocksBitsOnEdgeValues) {
  const sk_kernel_desc* kb = kernel("matmul.bf16");
  ASSERT_NE(kb, nullptr);
  constexpr int64_t kM = 4;
  constexpr int64_t kN = 37;
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> pick(0, 15);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (const int64_t k : {int64_t{1000}, int64_t{1024}, int64_t{1030}}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    Tensor x = dense(SK_DTYPE_F32, {kM, k});
    Tensor w = dense(SK_DTYPE_BF16, {kN, k});
    for (int64_t i = 0; i < kM * k; ++i) {
      const int c = pick(rng);
      float v = std::ldexp(mantissa(rng), exponent(rng)) * (c % 2 == 0 ? 1.0f : -1.0f);
      if (c == 0) v = 0.0f;
      if (c == 1) v = -0.0f;
      if (c == 2) v = std::ldexp(1.5f, -70);  // products with the tiny weights below: subnormal
      if (c == 3) v = -std::ldexp(1.25f, -75);
      if (c == 4 && i % 97 == 0) v = std::ldexp(1.0f, 100);  // sums past the f32 range
      x.data<float>()[i] = v;
    }
    for (int64_t i = 0; i < kN * k; ++i) {
      const int c = pick(rng);
      float v = std::ldexp(mantissa(rng), exponent(rng)) * (c % 2 == 0 ? 1.0f : -1.0f);
      if (c == 0) v = -0.0f;
      if (c == 2) v = std::ldexp(1.0f, -60);
      if (c == 3) v = -std::ldexp(1.5f, -66);
      if (c == 4 && i % 89 == 0) v = std::ldexp(1.0f, 120);
      uint16_t h = sk::f32_to_bf16(v);
      if (c == 5) h = static_cast<uint16_t>(0x0001 + i % 0x7f);                             // subnormal weights
      if (c == 6) h = static_cast<uint16_t>(0x8040);                                        // -subnormal
      if (c == 7 && i % 211 == 0) h = static_cast<uint16_t>(i % 2 == 0 ? 0x7f80 : 0xff80);  // +-inf
      w.data<uint16_t>()[i] = h;
    }
    // Dot products that stay below the normal range, so that reading denormals as zero and
    // flushing denormal results decide the bits: x row 3 against w rows [0, 10). Even k: a large
    // x times a subnormal weight (2^-121 or so when the weight is not read as zero); odd k, and
    // every k of the last 32: two small normal numbers whose product is subnormal (2^-130;
    // flushed, or summed when not; with K = 1024 the last of them ends the FMA chain).
    for (int64_t l = 0; l < k; ++l) {
      const bool tiny = l % 2 == 1 || l >= k - 32;
      x.data<float>()[3 * k + l] = tiny ? -std::ldexp(mantissa(rng), -70) : std::ldexp(mantissa(rng), 10);
      for (int64_t j = 0; j < 10; ++j) {
        w.data<uint16_t>()[j * k + l] =
            tiny ? sk::f32_to_bf16(std::ldexp(mantissa(rng), -60)) : static_cast<uint16_t>(0x0001 + (j * 7 + l) % 0x7f);
      }
    }
    for (int level : levels()) {
      SCOPED_TRACE("isa level " + std::to_string(level));
      IsaForced forced(level);
      Tensor y = dense(SK_DTYPE_F32, {kM, kN});
      ASSERT_EQ(Call({&x, &w}, {&y}).run(*kb, 2), SK_OK);
      int special = 0;  // the edge values must reach the outputs for the comparison to mean anything
      for (int64_t i = 0; i < kM * kN; ++i) special += !std::isfinite(y.data<float>()[i]);
      EXPECT_GT(special, 0);
      EXPECT_LT(special, kM * kN);
      for (int64_t i = 0; i < kM; ++i) {
        Tensor xi = dense(SK_DTYPE_F32, {1, k});
        Tensor yi = dense(SK_DTYPE_F32, {1, kN});
        std::memcpy(xi.data<float>(), x.data<float>() + i * k, sizeof(float) * k);
        ASSERT_EQ(Call({&xi, &w}, {&yi}).run(*kb, 2), SK_OK);
        EXPECT_EQ(0, std::memcmp(yi.data<float>(), y.data<float>() + i * kN, sizeof(float) * kN)) << "row " << i;
      }
    }
  }
}

// A grouped matmul row is the plain matmul of that row with its expert's weights, bit for bit.
TEST(MatmulFamily, GroupedRowsArePlainMatmulsOfTheirExpert) {
  struct Pair {
    const char* grouped;
    const char* plain;
    int32_t w_dtype;
  };
  const int64_t r = 20, k = 300, n = 45;
  const std::vector<int32_t> counts = {3, 0, 16};
  for (const Pair& p : {Pair{"grouped_matmul.f32", "matmul.f32", SK_DTYPE_F32},
                        Pair{"grouped_matmul.bf16", "matmul.bf16", SK_DTYPE_BF16},
                        Pair{"grouped_matmul.f16", "matmul.f16", SK_DTYPE_F16},
                        Pair{"grouped_matmul.w8a8_dyn", "matmul.w8a8_dyn", SK_DTYPE_I8}}) {
    SCOPED_TRACE(p.grouped);
    const sk_kernel_desc* kg = kernel(p.grouped);
    const sk_kernel_desc* kp = kernel(p.plain);
    ASSERT_TRUE(kg != nullptr && kp != nullptr);
    const bool w8 = p.w_dtype == SK_DTYPE_I8;
    const auto e = static_cast<int64_t>(counts.size());
    Tensor x = dense(SK_DTYPE_F32, {r, k});
    Tensor c = dense(SK_DTYPE_I32, {e});
    Tensor w = dense(p.w_dtype, {e, n, k});
    Tensor ws = dense(SK_DTYPE_F32, {e, n});
    fill_uniform(x, 6);
    fill_uniform(w, 7, w8 ? -128.0f : -1.0f, w8 ? 127.0f : 1.0f);
    fill_uniform(ws, 8, 0.001f, 0.01f);
    std::memcpy(c.bytes.data(), counts.data(), counts.size() * 4);
    for (int level : levels()) {
      SCOPED_TRACE("isa level " + std::to_string(level));
      IsaForced forced(level);
      Tensor y = dense(SK_DTYPE_F32, {r, n});
      std::memset(y.bytes.data(), 0xCD, y.bytes.size());
      std::vector<Tensor*> ins = {&x, &c, &w};
      if (w8) ins.push_back(&ws);
      ASSERT_EQ(Call(ins, {&y}).run(*kg, 3), SK_OK);
      int64_t row = 0;
      for (int64_t ex = 0; ex < e; ++ex) {
        const int64_t rows = counts[static_cast<size_t>(ex)];
        if (rows == 0) continue;
        Tensor xe = dense(SK_DTYPE_F32, {rows, k});
        Tensor we = dense(p.w_dtype, {n, k});
        Tensor wse = dense(SK_DTYPE_F32, {n});
        Tensor ye = dense(SK_DTYPE_F32, {rows, n});
        std::memcpy(xe.bytes.data(), x.bytes.data() + row * k * 4, static_cast<size_t>(rows * k * 4));
        const int64_t wb = n * k * sk_dtype_size(p.w_dtype);
        std::memcpy(we.bytes.data(), w.bytes.data() + ex * wb, static_cast<size_t>(wb));
        std::memcpy(wse.bytes.data(), ws.bytes.data() + ex * n * 4, static_cast<size_t>(n * 4));
        std::vector<Tensor*> pin = {&xe, &we};
        if (w8) pin.push_back(&wse);
        ASSERT_EQ(Call(pin, {&ye}).run(*kp, 2), SK_OK);
        EXPECT_EQ(0, std::memcmp(ye.bytes.data(), y.bytes.data() + row * n * 4, static_cast<size_t>(rows * n * 4)))
            << "expert " << ex;
        row += rows;
      }
      for (int64_t i = row * n; i < r * n; ++i) ASSERT_EQ(y.data<float>()[i], 0.0f) << "unrouted row element " << i;
    }
  }
}

TEST(MatmulFamily, GroupedMatmulReportsBadRoutingOnEveryCore) {
  const sk_kernel_desc* k = kernel("grouped_matmul.f32");
  ASSERT_NE(k, nullptr);
  ASSERT_NE(k->tiling, nullptr);
  EXPECT_EQ(k->flags, static_cast<uint32_t>(SK_FUSIBLE | SK_TILING_SINK));
  struct Bad {
    std::vector<int32_t> counts;
    const char* detail;
  };
  for (const Bad& b :
       {Bad{{2, -1, 3}, "counts[1] = -1 is negative"}, Bad{{4, 3, 2}, "counts sum to 9, more than the 8"}}) {
    Tensor x = dense(SK_DTYPE_F32, {8, 16});
    Tensor c = dense(SK_DTYPE_I32, {3});
    Tensor w = dense(SK_DTYPE_F32, {3, 20, 16});
    Tensor y = dense(SK_DTYPE_F32, {8, 20});
    std::memcpy(c.bytes.data(), b.counts.data(), 12);
    Call call({&x, &c, &w}, {&y});
    uint32_t size = 0;
    std::vector<unsigned char> t(4096);
    ASSERT_EQ(k->tiling(&call.args, t.data(), static_cast<uint32_t>(t.size()), &size), SK_OK);
    call.args.tiling = t.data();
    call.args.tiling_size = size;
    for (int cores : {1, 3}) {
      for (int core = 0; core < cores; ++core) {
        char msg[256] = {};
        sk_core_ctx ctx{};
        ctx.core_id = core;
        ctx.num_cores = cores;
        ctx.error_message = msg;
        ctx.error_capacity = sizeof msg;
        EXPECT_EQ(k->run(&call.args, &ctx), SK_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::strstr(msg, "grouped_matmul.f32"), nullptr) << msg;
        EXPECT_NE(std::strstr(msg, b.detail), nullptr) << msg;
      }
    }
  }
  // No tiling at all, a tiling too small for the work list, and a tiling of other shapes.
  Tensor x = dense(SK_DTYPE_F32, {8, 16});
  Tensor c = dense(SK_DTYPE_I32, {3});
  Tensor w = dense(SK_DTYPE_F32, {3, 20, 16});
  Tensor y = dense(SK_DTYPE_F32, {8, 20});
  const int32_t ok_counts[3] = {2, 3, 3};
  std::memcpy(c.bytes.data(), ok_counts, 12);
  Call call({&x, &c, &w}, {&y});
  sk_core_ctx ctx{};
  ctx.num_cores = 1;
  char msg[256] = {};
  ctx.error_message = msg;
  ctx.error_capacity = sizeof msg;
  EXPECT_EQ(k->run(&call.args, &ctx), SK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(msg, "no tiling"), nullptr) << msg;
  uint32_t size = 0;
  std::vector<unsigned char> t(4096);
  EXPECT_EQ(k->tiling(&call.args, t.data(), 40, &size), SK_ERR_CAPACITY);
  ASSERT_EQ(k->tiling(&call.args, t.data(), static_cast<uint32_t>(t.size()), &size), SK_OK);
  Tensor x2 = dense(SK_DTYPE_F32, {4, 16});
  Tensor y2 = dense(SK_DTYPE_F32, {4, 20});
  Call other({&x2, &c, &w}, {&y2});
  other.args.tiling = t.data();
  other.args.tiling_size = size;
  EXPECT_EQ(k->run(&other.args, &ctx), SK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(msg, "not this kernel's"), nullptr) << msg;
}

// Each bad call fails on every core with a message naming the kernel and the problem; access
// refuses too.
void expect_invalid(const char* name, std::vector<Tensor*> in, std::vector<Tensor*> out, const char* detail) {
  SCOPED_TRACE(name);
  const sk_kernel_desc* k = kernel(name);
  ASSERT_NE(k, nullptr);
  Call call(std::move(in), std::move(out));
  for (int core = 0; core < 2; ++core) {
    char msg[256] = {};
    sk_core_ctx ctx{};
    ctx.core_id = core;
    ctx.num_cores = 2;
    ctx.error_message = msg;
    ctx.error_capacity = sizeof msg;
    EXPECT_EQ(k->run(&call.args, &ctx), SK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(msg, name), nullptr) << msg;
    EXPECT_NE(std::strstr(msg, detail), nullptr) << msg;
  }
  sk_access_range ranges[4];
  EXPECT_LT(k->access(&call.args, 0, 1, ranges, 4), 0);
}

TEST(MatmulFamily, ShapeAndDtypeErrors) {
  Tensor x = dense(SK_DTYPE_F32, {4, 8});
  Tensor xk = dense(SK_DTYPE_F32, {4, 9});
  Tensor wf = dense(SK_DTYPE_F32, {6, 8});
  Tensor wb = dense(SK_DTYPE_BF16, {6, 8});
  Tensor wi = dense(SK_DTYPE_I8, {6, 8});
  Tensor q = dense(SK_DTYPE_I8, {4, 8});
  Tensor xs = dense(SK_DTYPE_F32, {4});
  Tensor xs5 = dense(SK_DTYPE_F32, {5});
  Tensor ws = dense(SK_DTYPE_F32, {6});
  Tensor ws7 = dense(SK_DTYPE_F32, {7});
  Tensor y = dense(SK_DTYPE_F32, {4, 6});
  Tensor y7 = dense(SK_DTYPE_F32, {4, 7});
  expect_invalid("matmul.bf16", {&x, &wf}, {&y}, "dtype");
  expect_invalid("matmul.bf16", {&xk, &wb}, {&y}, "w shape");
  expect_invalid("matmul.bf16", {&x, &wb}, {&y7}, "out shape");
  expect_invalid("matmul.f16", {&x, &wb}, {&y}, "dtype");
  expect_invalid("quantize.i8", {&x}, {&q, &xs5}, "scale shape");
  expect_invalid("quantize.i8", {&x}, {&xs, &q}, "dtype");
  // q written over x (in place, a quarter of the bytes per row) would clobber rows others read.
  Tensor q_in_x = dense(SK_DTYPE_I8, {4, 8});
  q_in_x.arg.data = x.arg.data;
  expect_invalid("quantize.i8", {&x}, {&q_in_x, &xs}, "q overlaps x");
  expect_invalid("matmul.w8a8", {&q, &xs5, &wi, &ws}, {&y}, "x_scale shape");
  expect_invalid("matmul.w8a8", {&q, &xs, &wi, &ws7}, {&y}, "w_scale shape");
  expect_invalid("matmul.w8a8", {&q, &xs, &wb, &ws}, {&y}, "dtype");
  expect_invalid("matmul.w8a8_dyn", {&x, &wi}, {&y}, "input");
  Tensor big_x = dense(SK_DTYPE_F32, {1, 65537});
  Tensor big_w = dense(SK_DTYPE_I8, {1, 65537});
  Tensor one = dense(SK_DTYPE_F32, {1});
  Tensor y11 = dense(SK_DTYPE_F32, {1, 1});
  expect_invalid("matmul.w8a8_dyn", {&big_x, &big_w, &one}, {&y11}, "exceeds 65536");
  Tensor c = dense(SK_DTYPE_I32, {3});
  Tensor w3 = dense(SK_DTYPE_BF16, {3, 6, 8});
  Tensor w3f = dense(SK_DTYPE_F32, {2, 6, 8});
  Tensor w4 = dense(SK_DTYPE_I8, {6, 4});  // K = 8: a group of 8 is too small
  Tensor s4 = dense(SK_DTYPE_F32, {1, 6});
  expect_invalid("matmul.w4a8_dyn", {&x, &w4, &s4}, {&y}, "power of two >= 32");
  Tensor x64 = dense(SK_DTYPE_F32, {4, 64});
  Tensor w64 = dense(SK_DTYPE_I8, {6, 32});
  Tensor s3 = dense(SK_DTYPE_F32, {3, 6});  // 64 / 3 groups
  Tensor s2 = dense(SK_DTYPE_F32, {2, 6});
  Tensor z1 = dense(SK_DTYPE_I8, {1, 6});
  expect_invalid("matmul.w4", {&x64, &w64, &s3}, {&y}, "w_scale shape");
  expect_invalid("matmul.w4", {&x64, &wi, &s2}, {&y}, "two 4-bit weights per byte");
  expect_invalid("matmul.w4a8_dyn", {&x64, &w64, &s2, &z1}, {&y}, "w_zero shape");
  expect_invalid("matmul.w4a8_dyn", {&x64, &w64, &wi}, {&y}, "dtype");
  // The tiled layout: K = 64 is one step; N = 32 is two tiles.
  Tensor y32 = dense(SK_DTYPE_F32, {4, 32});
  Tensor wt = dense(SK_DTYPE_I8, {2, 1, 16, 64});
  Tensor wt_steps = dense(SK_DTYPE_I8, {2, 2, 16, 64});
  Tensor wt_rows = dense(SK_DTYPE_I8, {2, 1, 8, 128});
  Tensor st = dense(SK_DTYPE_F32, {2, 2, 16});
  Tensor st_rows = dense(SK_DTYPE_F32, {2, 32});
  Tensor st_tiles = dense(SK_DTYPE_F32, {3, 2, 16});
  Tensor zt = dense(SK_DTYPE_I8, {2, 1, 16});
  Tensor y33 = dense(SK_DTYPE_F32, {4, 33});
  expect_invalid("matmul.w4a8_dyn", {&x64, &wt_steps, &st}, {&y32}, "ceil(K / 128) steps");
  expect_invalid("matmul.w4", {&x64, &wt_rows, &st}, {&y32}, "tiled w shape");
  expect_invalid("matmul.w4a8_dyn", {&x64, &wt, &st_rows}, {&y32}, "[N / 16, K / G, 16] (tiled w)");
  expect_invalid("matmul.w4a8_dyn", {&x64, &wt, &st_tiles}, {&y32}, "w_scale shape");
  expect_invalid("matmul.w4a8_dyn", {&x64, &wt, &st, &zt}, {&y32}, "w_zero shape");
  expect_invalid("matmul.w4a8_dyn", {&x64, &wt, &st}, {&y33}, "out shape");
  expect_invalid("grouped_matmul.bf16", {&x, &c, &w3}, {&y7}, "out shape");
  expect_invalid("grouped_matmul.f32", {&x, &c, &w3f}, {&y}, "w shape");
  expect_invalid("grouped_matmul.w8a8_dyn", {&x, &c, &w3}, {&y}, "input");
}

}  // namespace
