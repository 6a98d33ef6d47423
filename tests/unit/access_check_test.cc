// The access checker (debug_cross_core_sync_check): a kernel whose access callback under-declares
// its writes is caught, naming kernel, op, core and bytes; honest kernels run clean and unchanged.
#include <gtest/gtest.h>

#include "common/test_runtime.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;

Tensor call(Graph& g, const char* kernel, Tensor x, const std::string& name) {
  return call_kernel(g, kernel, {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}

Expected<std::vector<float>> run_checked(Runtime& rt, const Graph& g, ExecutionMode m, bool check) {
  CompileOptions o = CompileOptions::for_mode(m);
  o.super_kernel_debug_options.debug_cross_core_sync_check = check;
  auto exe = rt.compile(g, o);
  if (!exe) return exe.status();
  SK_RETURN_IF_ERROR((*exe)->set_input("x", testing::random_floats(256, 9)));
  SK_RETURN_IF_ERROR((*exe)->run());
  return (*exe)->output_f32("y");
}

TEST(AccessCheck, CatchesAKernelThatWritesOutsideItsDeclaredRanges) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(g, "fused");
    t = call(g, "test.add1.f32", t, "honest");
    t = call(g, "test.half_declared_add1.f32", t, "liar");
  }
  g.output(t, "y");
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto y = run_checked(*rt, g, m, true);
    ASSERT_FALSE(y.has_value()) << execution_mode_name(m);
    const std::string msg = y.status().message();
    EXPECT_NE(msg.find("kernel 'test.half_declared_add1.f32'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("op 'liar'"), std::string::npos) << msg;
    // 256 floats on 2 cores: core 0 writes bytes [0, 512) and declares [0, 256).
    EXPECT_NE(msg.find("core 0 of 2 wrote bytes [256, 512) of output 0"), std::string::npos) << msg;
  }
}

TEST(AccessCheck, HonestKernelsRunCleanWithTheSameResults) {
  auto rt = make_runtime(3);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {256});
  Tensor t;
  {
    SuperKernelScope s(g, "fused");
    t = call(g, "test.add1.f32", x, "a");
    t = call_kernel(g, "test.reverse_sync.f32", {t}, {{DType::kF32, {256}, ""}}, {}, "rev")[0];  // sync_all
    t = call(g, "test.scale_by_first.f32", t, "scaled");                                         // tiling sink
  }
  g.output(t, "y");
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto plain = run_checked(*rt, g, m, false);
    auto checked = run_checked(*rt, g, m, true);
    ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
    ASSERT_TRUE(checked.has_value()) << checked.status().to_string();
    EXPECT_EQ(*plain, *checked) << execution_mode_name(m);
  }
}

// An operand of no bytes (MLA without a RoPE part: q_pe [B, H, 0]) has no data pointer; the
// checker's snapshot once passed that null pointer to memcpy (undefined behaviour, fatal under
// UBSan), found by the graph fuzz target.
TEST(AccessCheck, EmptyOperandsAreChecked) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {2, 2, 8});
  static const float kNothing = 0.0f;
  Tensor q_pe = g.constant("q_pe", DType::kF32, {2, 2, 0}, &kNothing, 0);
  Tensor cache = g.variable("latent_cache", DType::kF32, {2, 4, 8});
  const std::vector<int32_t> table = {0, 1}, lens = {3, 4};
  Tensor bt = g.constant("block_tables", DType::kI32, {2, 1}, table.data(), table.size() * sizeof(int32_t));
  Tensor cl = g.constant("context_lens", DType::kI32, {2}, lens.data(), lens.size() * sizeof(int32_t));
  g.output(nn::mla_attention(g, x, q_pe, cache, bt, cl, 0.35f), "y");
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    CompileOptions o = CompileOptions::for_mode(m);
    std::vector<float> y[2];
    for (bool check : {false, true}) {
      o.super_kernel_debug_options.debug_cross_core_sync_check = check;
      auto exe = rt->compile(g, o);
      ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
      ASSERT_TRUE((*exe)->set_input("x", testing::random_floats(32, 3)).is_ok());
      ASSERT_TRUE((*exe)->set_input("latent_cache", testing::random_floats(64, 4)).is_ok());
      const Status s = (*exe)->run();
      ASSERT_TRUE(s.is_ok()) << execution_mode_name(m) << ": " << s.to_string();
      y[check] = (*exe)->output_f32("y");
    }
    EXPECT_EQ(y[0], y[1]) << execution_mode_name(m);
  }
}

TEST(AccessCheck, IsACompileOption) {
  CompileOptions o;
  ASSERT_TRUE(o.set("super_kernel_debug_options.debug_cross_core_sync_check", "1").is_ok());
  EXPECT_TRUE(o.super_kernel_debug_options.debug_cross_core_sync_check);
  EXPECT_FALSE(o.set("super_kernel_debug_options.debug_cross_core_sync_check", "maybe").is_ok());
}

}  // namespace
}  // namespace sk
