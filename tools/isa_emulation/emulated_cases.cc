// Kernel calls prepared natively and run under an instruction-set emulator (see run.py), so that
// code paths the build machine's CPU cannot execute (AVX-512) are still checked against the
// reference implementations. Every function here runs natively; only the kernels' `run` calls
// are emulated.
#include <superkernel/kernel_abi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "manual_args.h"
#include "superkernel/attrs_attention.h"
#include "superkernel/attrs_core.h"
#include "superkernel/attrs_moe.h"
#include "util/element.h"

namespace {

using sk::kernel_test::builtin_kernel;
using sk::kernel_test::ManualArgs;

struct CaseDef {
  std::string name;
  std::string kernel;
  std::function<void(ManualArgs&)> build;                 // adds operands and attributes (inputs get filled)
  std::function<void(ManualArgs&)> set_inputs = nullptr;  // after the fill: indices, scales, ...
  bool has_avx512_path = true;  // false: the kernel has no AVX-512 code on this path (memcpy only)
};

template <class T>
void set_ints(ManualArgs& m, size_t input, std::vector<T> values) {
  std::memcpy(m.in_data<T>(input), values.data(), values.size() * sizeof(T));
}

// Scales must be positive and finite.
void make_positive(ManualArgs& m, size_t input) {
  const sk_tensor_arg& t = m.input(input);
  float* v = static_cast<float*>(t.data);
  for (int64_t i = 0; i < sk_tensor_numel(&t); ++i) v[i] = std::fabs(v[i]) * 0.01f + 1e-3f;
}

// Positive scales of any float dtype (f32 or f16), deterministic.
void set_scales(ManualArgs& m, size_t input) {
  const sk_tensor_arg& t = m.input(input);
  auto* p = static_cast<unsigned char*>(t.data);
  const int64_t elem = sk_dtype_size(t.dtype);
  for (int64_t i = 0; i < sk_tensor_numel(&t); ++i) sk::store_element(t.dtype, p + i * elem, 0.001 + 0.0005 * (i % 37));
}

std::vector<CaseDef> defs() {
  std::vector<CaseDef> d;
  auto mm = [](int64_t m, int64_t k, int64_t n, int32_t wdtype) {
    return [=](ManualArgs& a) { a.in(SK_DTYPE_F32, {m, k}).in(wdtype, {n, k}).out(SK_DTYPE_F32, {m, n}); };
  };
  d.push_back({"matmul_f32_gemv_1x70x37", "matmul.f32", mm(1, 70, 37, SK_DTYPE_F32)});
  d.push_back({"matmul_f32_gemm_5x70x37", "matmul.f32", mm(5, 70, 37, SK_DTYPE_F32)});
  d.push_back({"matmul_f32_gemv_1x256x64", "matmul.f32", mm(1, 256, 64, SK_DTYPE_F32)});
  d.push_back({"matmul_bf16_gemv_1x70x37", "matmul.bf16", mm(1, 70, 37, SK_DTYPE_BF16)});
  d.push_back({"matmul_bf16_gemm_6x96x21", "matmul.bf16", mm(6, 96, 21, SK_DTYPE_BF16)});
  d.push_back({"matmul_f16_gemv_1x70x37", "matmul.f16", mm(1, 70, 37, SK_DTYPE_F16)});
  d.push_back({"matmul_f16_gemm_6x96x21", "matmul.f16", mm(6, 96, 21, SK_DTYPE_F16)});
  // 4-bit weights: every group size the AVX-512 tiles treat differently (4, 2 or 1 group per
  // 128-k step, or several steps per group), a last step of 32 k, zero points and f16 scales.
  struct W4 {
    const char* name;
    const char* kernel;
    int64_t m, k, n, group;
    bool zeros;
    int32_t scale_dtype;
  };
  for (const W4& c : {W4{"w4a8_dyn_3x160_n40_g32", "matmul.w4a8_dyn", 3, 160, 40, 32, true, SK_DTYPE_F16},
                      W4{"w4a8_dyn_2x256_n33_g64", "matmul.w4a8_dyn", 2, 256, 33, 64, false, SK_DTYPE_F32},
                      W4{"w4a8_dyn_1x512_n20_g128", "matmul.w4a8_dyn", 1, 512, 20, 128, true, SK_DTYPE_F32},
                      W4{"w4a8_dyn_2x512_n17_g256", "matmul.w4a8_dyn", 2, 512, 17, 256, false, SK_DTYPE_F16},
                      W4{"w4_3x96_n24_g32", "matmul.w4", 3, 96, 24, 32, true, SK_DTYPE_F32},
                      W4{"w4_1x256_n19_g64", "matmul.w4", 1, 256, 19, 64, false, SK_DTYPE_F16}}) {
    d.push_back({c.name, c.kernel,
                 [=](ManualArgs& a) {
                   a.in(SK_DTYPE_F32, {c.m, c.k}).in(SK_DTYPE_I8, {c.n, c.k / 2});
                   a.in(c.scale_dtype, {c.k / c.group, c.n});
                   if (c.zeros) a.in(SK_DTYPE_I8, {c.k / c.group, c.n});
                   a.out(SK_DTYPE_F32, {c.m, c.n});
                 },
                 [](ManualArgs& a) { set_scales(a, 2); }});
  }
  for (const char* k : {"add.f32", "mul.f32", "silu_mul.f32"}) {
    d.push_back({std::string(k) + "_3x45", k, [](ManualArgs& a) {
                   a.in(SK_DTYPE_F32, {3, 45}).in(SK_DTYPE_F32, {3, 45}).out(SK_DTYPE_F32, {3, 45});
                 }});
  }
  d.push_back({"rms_norm_3x77", "rms_norm.f32", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {3, 77}).in(SK_DTYPE_F32, {77}).out(SK_DTYPE_F32, {3, 77});
                 a.attrs(sk_rms_norm_attrs{1e-5f});
               }});
  d.push_back({"softmax_3x77", "softmax.f32", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {3, 77}).out(SK_DTYPE_F32, {3, 77});
               }});
  d.push_back({"layer_norm_5x37", "layer_norm.f32", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {5, 37}).in(SK_DTYPE_F32, {37}).in(SK_DTYPE_F32, {37});
                 a.out(SK_DTYPE_F32, {5, 37});
                 a.attrs(sk_layer_norm_attrs{1e-5f});
               }});
  d.push_back({"argmax_2x1000", "argmax.f32", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {2, 1000}).out(SK_DTYPE_I32, {2});
               }});
  d.push_back({"moe_router_softmax_4x70_k6", "moe_router.f32", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {4, 70}).in(SK_DTYPE_F32, {70});
                 a.out(SK_DTYPE_I32, {4, 6}).out(SK_DTYPE_F32, {4, 6});
                 a.attrs(sk_moe_router_attrs{6, 64, SK_MOE_SCORING_SOFTMAX, 1, 2.5f});
               }});
  d.push_back({"moe_router_sigmoid_3x200_k8", "moe_router.f32", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {3, 200}).in(SK_DTYPE_F32, {200});
                 a.out(SK_DTYPE_I32, {3, 8}).out(SK_DTYPE_F32, {3, 8});
                 a.attrs(sk_moe_router_attrs{8, 200, SK_MOE_SCORING_SIGMOID, 1, 1.0f});
               }});
  d.push_back({"batched_matmul_3x5x37_n11", "batched_matmul.f32", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {3, 5, 37}).in(SK_DTYPE_F32, {3, 11, 37}).out(SK_DTYPE_F32, {3, 5, 11});
               }});
  d.push_back({"kv_append_bf16_t3_dh40", "kv_append.bf16",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {3, 2, 40}).in(SK_DTYPE_F32, {3, 2, 40}).in(SK_DTYPE_I32, {3});
                 a.in(SK_DTYPE_BF16, {4, 4, 2, 40}).in(SK_DTYPE_BF16, {4, 4, 2, 40});
                 a.out(SK_DTYPE_BF16, {4, 4, 2, 40}).out(SK_DTYPE_BF16, {4, 4, 2, 40});
               },
               [](ManualArgs& a) {
                 set_ints<int32_t>(a, 2, {5, -1, 9});
               }});
  d.push_back({"mla_cache_append_bf16_t3", "mla_cache_append.bf16",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {3, 32}).in(SK_DTYPE_F32, {3, 8}).in(SK_DTYPE_I32, {3});
                 a.in(SK_DTYPE_BF16, {4, 4, 40}).out(SK_DTYPE_BF16, {4, 4, 40});
               },
               [](ManualArgs& a) {
                 set_ints<int32_t>(a, 2, {0, 13, 6});
               }});
  // Tiling sinks: emu_build runs the tiling natively on the filled counts, as the runtime would.
  const std::vector<int32_t> counts = {4, 4, 0, 8, 2, 6, 3, 5};
  const auto set_counts = [counts](ManualArgs& a) { set_ints<int32_t>(a, 1, counts); };
  d.push_back({"grouped_matmul_f32_e8_32x64_n48", "grouped_matmul.f32",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {32, 64}).in(SK_DTYPE_I32, {8}).in(SK_DTYPE_F32, {8, 48, 64});
                 a.out(SK_DTYPE_F32, {32, 48});
               },
               set_counts});
  d.push_back({"grouped_matmul_bf16_e8_32x64_n48", "grouped_matmul.bf16",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {32, 64}).in(SK_DTYPE_I32, {8}).in(SK_DTYPE_BF16, {8, 48, 64});
                 a.out(SK_DTYPE_F32, {32, 48});
               },
               set_counts});
  d.push_back({"grouped_matmul_w8a8_dyn_e8_32x64_n48", "grouped_matmul.w8a8_dyn",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {32, 64}).in(SK_DTYPE_I32, {8}).in(SK_DTYPE_I8, {8, 48, 64});
                 a.in(SK_DTYPE_F32, {8, 48}).out(SK_DTYPE_F32, {32, 48});
               },
               [set_counts](ManualArgs& a) {
                 set_counts(a);
                 make_positive(a, 3);
               }});
  d.push_back({"quantize_3x70", "quantize.i8", [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {3, 70}).out(SK_DTYPE_I8, {3, 70}).out(SK_DTYPE_F32, {3});
               }});
  d.push_back({"w8a8_m4_k70_n24", "matmul.w8a8",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_I8, {4, 70}).in(SK_DTYPE_F32, {4}).in(SK_DTYPE_I8, {24, 70}).in(SK_DTYPE_F32, {24});
                 a.out(SK_DTYPE_F32, {4, 24});
               },
               [](ManualArgs& a) {
                 make_positive(a, 1);
                 make_positive(a, 3);
               }});
  d.push_back({"w8a8_dyn_1x256_n64", "matmul.w8a8_dyn",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {1, 256}).in(SK_DTYPE_I8, {64, 256}).in(SK_DTYPE_F32, {64});
                 a.out(SK_DTYPE_F32, {1, 64});
               },
               [](ManualArgs& a) { make_positive(a, 2); }});
  for (int32_t neox : {1, 0}) {
    d.push_back({neox ? "rope_neox_3x4x32" : "rope_interleaved_3x4x32", "rope.f32",
                 [=](ManualArgs& a) {
                   a.in(SK_DTYPE_F32, {3, 4, 32}).in(SK_DTYPE_I32, {3}).in(SK_DTYPE_F32, {50, 32});
                   a.out(SK_DTYPE_F32, {3, 4, 32});
                   a.attrs(sk_rope_attrs{32, 32, neox});
                 },
                 [](ManualArgs& a) {
                   set_ints<int32_t>(a, 1, {3, 20, 49});
                 }});
  }
  for (int32_t dtype : {SK_DTYPE_F32, SK_DTYPE_BF16}) {
    const std::string sfx = dtype == SK_DTYPE_F32 ? "f32" : "bf16";
    d.push_back({"paged_attention_gqa4_ctx7_13_" + sfx, "paged_attention." + sfx,
                 [=](ManualArgs& a) {
                   a.in(SK_DTYPE_F32, {2, 8, 32}).in(dtype, {6, 4, 2, 32}).in(dtype, {6, 4, 2, 32});
                   a.in(SK_DTYPE_I32, {2, 4}).in(SK_DTYPE_I32, {2});
                   a.out(SK_DTYPE_F32, {2, 8, 32});
                   a.attrs(sk_paged_attention_attrs{1.0f / std::sqrt(32.0f)});
                 },
                 [](ManualArgs& a) {
                   set_ints<int32_t>(a, 3, {5, 2, -1, -1, 0, 1, 3, 4});
                   set_ints<int32_t>(a, 4, {7, 13});
                 }});
    d.push_back({"mla_attention_h3_ctx13_" + sfx, "mla_attention." + sfx,
                 [=](ManualArgs& a) {
                   a.in(SK_DTYPE_F32, {1, 3, 32}).in(SK_DTYPE_F32, {1, 3, 8}).in(dtype, {5, 4, 40});
                   a.in(SK_DTYPE_I32, {1, 4}).in(SK_DTYPE_I32, {1});
                   a.out(SK_DTYPE_F32, {1, 3, 32});
                   a.attrs(sk_mla_attention_attrs{32, 8, 1.0f / std::sqrt(40.0f)});
                 },
                 [](ManualArgs& a) {
                   set_ints<int32_t>(a, 3, {4, 1, 3, 0});
                   set_ints<int32_t>(a, 4, {13});
                 }});
  }
  d.push_back({"moe_dispatch_t4_k2_e6_z2", "moe_dispatch.f32",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {4, 16}).in(SK_DTYPE_I32, {4, 2});
                 a.out(SK_DTYPE_F32, {8, 16}).out(SK_DTYPE_I32, {6}).out(SK_DTYPE_I32, {4, 2});
                 a.attrs(sk_moe_dispatch_attrs{6, 2});
               },
               [](ManualArgs& a) {
                 set_ints<int32_t>(a, 1, {0, 5, 7, 2, 2, 0, 6, 1});
               },
               /*has_avx512_path=*/false});
  d.push_back(
      {"moe_combine_t4_k2_d40", "moe_combine.f32",
       [](ManualArgs& a) {
         a.in(SK_DTYPE_F32, {8, 40}).in(SK_DTYPE_I32, {4, 2}).in(SK_DTYPE_F32, {4, 2}).in(SK_DTYPE_F32, {4, 40});
         a.out(SK_DTYPE_F32, {4, 40});
       },
       [](ManualArgs& a) {
         set_ints<int32_t>(a, 1, {0, 5, -1, 2, 7, 1, 3, -1});
       }});
  d.push_back({"sample_2x300_k20_p0.9", "sample.f32",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {2, 300}).in(SK_DTYPE_I64, {1}).out(SK_DTYPE_I32, {2});
                 a.attrs(sk_sample_attrs{0x5EED42ull, 0.8f, 0.9f, 20, 0});
               },
               [](ManualArgs& a) { set_ints<int64_t>(a, 1, {7}); }});
  d.push_back({"sample_1x5000_nucleus", "sample.f32",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {1, 5000}).in(SK_DTYPE_I64, {1}).out(SK_DTYPE_I32, {1});
                 a.attrs(sk_sample_attrs{0x5EED44ull, 1.0f, 0.8f, 0, 0});
               },
               [](ManualArgs& a) { set_ints<int64_t>(a, 1, {5}); }});
  d.push_back({"sample_2x300_nucleus", "sample.f32",
               [](ManualArgs& a) {
                 a.in(SK_DTYPE_F32, {2, 300}).in(SK_DTYPE_I64, {1}).out(SK_DTYPE_I32, {2});
                 a.attrs(sk_sample_attrs{0x5EED43ull, 1.0f, 0.9f, 0, 0});
               },
               [](ManualArgs& a) { set_ints<int64_t>(a, 1, {3}); }});
  return d;
}

struct Built {
  std::unique_ptr<ManualArgs> args;
  const sk_kernel_desc* kernel = nullptr;
  std::vector<sk_core_ctx> ctx;
  std::vector<std::vector<char>> messages;
};

std::vector<CaseDef>& cases() {
  static std::vector<CaseDef> c = defs();
  return c;
}
std::vector<Built>& built() {
  static std::vector<Built> b(cases().size());
  return b;
}

// Deterministic inputs in [-2, 2) (bf16 rounded from f32); outputs poisoned with 0x7F bytes.
void fill(const sk_kernel_args& a, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int i = 0; i < a.num_inputs; ++i) {
    const sk_tensor_arg& t = a.inputs[i];
    const int64_t n = sk_tensor_numel(&t);
    const int64_t elem = sk_dtype_size(t.dtype);
    // Floats in [-2, 2), i8 in [-126, 126]; i32 / i64 operands are indices the cases set.
    const double scale = t.dtype == SK_DTYPE_I8 ? 63.0 : 1.0;
    for (int64_t e = 0; e < n; ++e) {
      const double v = u(rng) * scale;
      if (t.dtype != SK_DTYPE_I32 && t.dtype != SK_DTYPE_I64) {
        sk::store_element(t.dtype, static_cast<unsigned char*>(t.data) + e * elem, v);
      }
    }
  }
  for (int o = 0; o < a.num_outputs; ++o) {
    const sk_tensor_arg& t = a.outputs[o];
    std::memset(t.data, 0x7F, static_cast<size_t>(sk_tensor_numel(&t) * sk_dtype_size(t.dtype)));
  }
}

}  // namespace

extern "C" {

int emu_num_cases() { return static_cast<int>(cases().size()); }
const char* emu_case_name(int i) { return cases()[i].name.c_str(); }
const char* emu_case_kernel(int i) { return cases()[i].kernel.c_str(); }
int emu_case_has_avx512_path(int i) { return cases()[i].has_avx512_path ? 1 : 0; }

// Builds case i for `cores` cores: operands, inputs, a per-core workspace when the kernel has one.
int emu_build(int i, int cores) {
  Built& b = built()[i];
  b = Built{};
  b.kernel = builtin_kernel(cases()[i].kernel.c_str());
  if (b.kernel == nullptr) return -1;
  b.args = std::make_unique<ManualArgs>();
  cases()[i].build(*b.args);
  if (b.kernel->workspace_size != nullptr) b.args->workspace_for(b.kernel, cores);
  fill(b.args->args(), 1234u + static_cast<uint32_t>(i));
  if (cases()[i].set_inputs) cases()[i].set_inputs(*b.args);
  if ((b.kernel->flags & SK_TILING_SINK) != 0 && !b.args->tiling_from(b.kernel)) return -2;
  b.args->args();  // final: run.py copies memory before it asks for the args' address
  b.messages.assign(cores, std::vector<char>(256, 0));
  for (int c = 0; c < cores; ++c) {
    sk_core_ctx ctx{};
    ctx.core_id = c;
    ctx.num_cores = cores;
    ctx.error_message = b.messages[c].data();
    ctx.error_capacity = 256;
    b.ctx.push_back(ctx);
  }
  return 0;
}

void* emu_run_fn(int i) { return reinterpret_cast<void*>(built()[i].kernel->run); }
const void* emu_args(int i) { return &built()[i].args->args(); }
const void* emu_ctx(int i, int core) { return &built()[i].ctx[core]; }
int emu_num_outputs(int i) { return built()[i].args->args().num_outputs; }
void* emu_output(int i, int o) { return built()[i].args->args().outputs[o].data; }
uint64_t emu_output_bytes(int i, int o) {
  const sk_tensor_arg& t = built()[i].args->args().outputs[o];
  return static_cast<uint64_t>(sk_tensor_numel(&t) * sk_dtype_size(t.dtype));
}
const char* emu_message(int i, int core) { return built()[i].messages[core].data(); }

// Runs every core natively (at whatever ISA level the process uses).
int emu_run_native(int i) {
  Built& b = built()[i];
  for (const sk_core_ctx& ctx : b.ctx) {
    if (int32_t rc = b.kernel->run(&b.args->args(), &ctx); rc != SK_OK) return rc;
  }
  return SK_OK;
}

// Compares the outputs (as they are now) with the reference, within its tolerance. Returns the
// number of mismatching elements; the first is described in `msg`.
int emu_check(int i, char* msg, int capacity) {
  Built& b = built()[i];
  const sk::ref::Reference* ref = sk::ref::find_reference(cases()[i].kernel);
  if (ref == nullptr) {
    std::snprintf(msg, capacity, "no reference");
    return -1;
  }
  ManualArgs want;
  cases()[i].build(want);
  if (b.kernel->workspace_size != nullptr) want.workspace_for(b.kernel, 1);
  fill(want.args(), 1234u + static_cast<uint32_t>(i));
  if (cases()[i].set_inputs) cases()[i].set_inputs(want);
  if (ref->run(&want.args()) != SK_OK) {
    std::snprintf(msg, capacity, "reference failed");
    return -1;
  }
  int bad = 0;
  msg[0] = '\0';
  const sk_kernel_args& got = b.args->args();
  for (int o = 0; o < got.num_outputs; ++o) {
    const sk_tensor_arg& g = got.outputs[o];
    const sk_tensor_arg& w = want.args().outputs[o];
    const int64_t n = sk_tensor_numel(&g);
    const int64_t elem = sk_dtype_size(g.dtype);
    for (int64_t e = 0; e < n; ++e) {
      const void* gp = static_cast<const unsigned char*>(g.data) + e * elem;
      const void* wp = static_cast<const unsigned char*>(w.data) + e * elem;
      const double gv = sk::load_element(g.dtype, gp), wv = sk::load_element(w.dtype, wp);
      // f32 within the reference's tolerance; every other dtype bit for bit.
      const bool ok = g.dtype == SK_DTYPE_F32 ? std::fabs(gv - wv) <= ref->abs_tol + ref->rel_tol * std::fabs(wv) ||
                                                    (std::isnan(gv) && std::isnan(wv))
                                              : std::memcmp(gp, wp, static_cast<size_t>(elem)) == 0;
      if (!ok && bad++ == 0) {
        std::snprintf(msg, capacity, "output %d element %lld: got %.9g, reference %.9g", o, static_cast<long long>(e),
                      gv, wv);
      }
    }
  }
  return bad;
}

}  // extern "C"
