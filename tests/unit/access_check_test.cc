// The access checker (debug_cross_core_sync_check): a kernel whose access callback under-declares
// its writes is caught, naming kernel, op, core and bytes; honest kernels run clean and unchanged.
#include <gtest/gtest.h>

#include "common/test_runtime.h"
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

TEST(AccessCheck, IsACompileOption) {
  CompileOptions o;
  ASSERT_TRUE(o.set("super_kernel_debug_options.debug_cross_core_sync_check", "1").is_ok());
  EXPECT_TRUE(o.super_kernel_debug_options.debug_cross_core_sync_check);
  EXPECT_FALSE(o.set("super_kernel_debug_options.debug_cross_core_sync_check", "maybe").is_ok());
}

}  // namespace
}  // namespace sk
