// The out-of-tree example package (examples/custom_package), built by the
// loader.example_package.* CTest fixtures against this build tree through find_package.
//
// Checks that it loads through KernelRegistry and sk::Runtime, that its kernels keep the ABI's
// rules when called directly (determinism across core counts, access ranges that match what run
// writes), and that graphs calling them give exact results in eager and graph mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/abi_args.h"
#include "example_kernels.h"
#include "packages/kernel_registry.h"
#include "superkernel/graph.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

// CTest sets SK_EXAMPLE_PACKAGE; the compiled-in default lets the binary also run by hand.
std::string example_package_path() {
  const char* env = std::getenv("SK_EXAMPLE_PACKAGE");
  return env && *env ? env : SK_EXAMPLE_PACKAGE_DEFAULT;
}

RuntimeOptions example_runtime_options(int num_cores) {
  RuntimeOptions opts;
  // More cores than this machine may have, so that the split has several parts everywhere.
  opts.num_cores = num_cores;
  opts.pin_threads = false;
  opts.allow_oversubscribe = true;
  opts.spin_us = 20;
  opts.load_builtin_kernels = false;
  opts.kernel_packages = {example_package_path()};
  return opts;
}

// Values whose products with 2, 0.5 and -1.5 and sums with 0.75 are exact in f32, so the
// expected results do not depend on rounding or FMA contraction in either compiler.
std::vector<float> test_input(int64_t n, int salt) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7 + salt) % 97) * 0.25f - 12.0f;
  return x;
}

std::vector<uint8_t> axpb_attrs(float a, float b) {
  const sk_example_axpb_attrs attrs{a, b};
  std::vector<uint8_t> blob(sizeof(attrs));
  std::memcpy(blob.data(), &attrs, sizeof(attrs));
  return blob;
}

// ---- Direct ABI calls ------------------------------------------------------------------------

using testing::dense_arg;

int g_unexpected_sync_all = 0;
int32_t unexpected_sync_all(const sk_core_ctx*) {
  ++g_unexpected_sync_all;  // neither kernel declares SK_USES_SYNC_ALL
  return SK_ERR_ABORTED;
}

// One SPMD call, its cores run one after another (the kernels never wait on each other).
// Returns the first non-OK code, with the kernel's message in `*message`.
int32_t run_cores(const sk_kernel_desc& d, const sk_kernel_args& args, int32_t num_cores,
                  std::vector<int32_t> only_cores = {}, std::string* message = nullptr) {
  if (only_cores.empty()) {
    for (int32_t c = 0; c < num_cores; ++c) only_cores.push_back(c);
  }
  for (int32_t c : only_cores) {
    char error[256] = {};
    sk_core_ctx core{};
    core.core_id = c;
    core.num_cores = num_cores;
    core.sync_all = unexpected_sync_all;
    core.error_message = error;
    core.error_capacity = sizeof(error);
    const int32_t rc = d.run(&args, &core);
    if (rc != SK_OK) {
      if (message) *message = error;
      return rc;
    }
  }
  return SK_OK;
}

class ExamplePackageAbi : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = reg_.load_package(example_package_path());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  const sk_kernel_desc& desc(const char* name) {
    const KernelEntry* e = reg_.find(name);
    SK_CHECK(e != nullptr) << name;
    return *e->desc;
  }
  KernelRegistry reg_;
};

TEST_F(ExamplePackageAbi, RegistryListsBothKernels) {
  EXPECT_EQ(reg_.kernel_names(), (std::vector<std::string>{SK_EXAMPLE_AXPB_F32, SK_EXAMPLE_SCALE2_F32}));
  EXPECT_EQ(reg_.package_paths(), std::vector<std::string>{example_package_path()});
  for (const char* name : {SK_EXAMPLE_SCALE2_F32, SK_EXAMPLE_AXPB_F32}) {
    const KernelEntry* e = reg_.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->package, "sk_example_kernels");
    EXPECT_EQ(e->path, example_package_path());
    EXPECT_EQ(e->desc->type, SK_KERNEL_VECTOR);
    EXPECT_EQ(e->desc->flags, static_cast<uint32_t>(SK_FUSIBLE));
    EXPECT_NE(e->desc->access, nullptr) << name << " should describe its accesses";
    EXPECT_EQ(e->desc->sync_all_count, 0u);
  }
}

// For every size and core count: results are exact and bit-identical to the one-core run, each
// core writes exactly the range its access callback reports, and the write ranges tile the
// output without overlap.
TEST_F(ExamplePackageAbi, KernelsAreDeterministicAndMatchTheirAccessRanges) {
  const std::vector<uint8_t> attrs = axpb_attrs(-1.5f, 0.75f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* name : {SK_EXAMPLE_SCALE2_F32, SK_EXAMPLE_AXPB_F32}) {
    const sk_kernel_desc& d = desc(name);
    const bool axpb = std::string(name) == SK_EXAMPLE_AXPB_F32;
    for (int64_t n : {0, 1, 15, 16, 17, 100, 1000, 4099}) {
      std::vector<float> x = test_input(n, 3);
      std::vector<float> expect(x.size());
      for (size_t i = 0; i < x.size(); ++i) expect[i] = axpb ? -1.5f * x[i] + 0.75f : 2.0f * x[i];
      std::vector<float> y(x.size());
      const sk_tensor_arg in = dense_arg(x.data(), SK_DTYPE_F32, n);
      const sk_tensor_arg out = dense_arg(y.data(), SK_DTYPE_F32, n);
      sk_kernel_args args{};
      args.inputs = &in;
      args.outputs = &out;
      args.num_inputs = 1;
      args.num_outputs = 1;
      if (axpb) {
        args.attrs = attrs.data();
        args.attrs_size = static_cast<uint32_t>(attrs.size());
      }
      for (int32_t cores : {1, 2, 3, 4, 7, 64}) {
        SCOPED_TRACE(std::string(name) + " n=" + std::to_string(n) + " cores=" + std::to_string(cores));
        std::fill(y.begin(), y.end(), nan);
        ASSERT_EQ(run_cores(d, args, cores), SK_OK);
        // Bitwise, so that -0.0f vs 0.0f or a different NaN would count as a difference.
        if (n > 0) {
          ASSERT_EQ(std::memcmp(y.data(), expect.data(), y.size() * sizeof(float)), 0);
        }

        std::vector<std::pair<int64_t, int64_t>> writes;
        for (int32_t c = 0; c < cores; ++c) {
          // The runtime sizes its buffer from the count a too-small call returns.
          sk_access_range ranges[4];
          ranges[0].operand = -7;
          EXPECT_EQ(d.access(&args, c, cores, ranges, 0), 2);
          EXPECT_EQ(ranges[0].operand, -7) << "wrote past capacity 0";
          ASSERT_EQ(d.access(&args, c, cores, ranges, 4), 2);
          EXPECT_EQ(ranges[0].operand, 0);
          EXPECT_EQ(ranges[0].mode, SK_ACCESS_READ);
          EXPECT_EQ(ranges[1].operand, 1);
          EXPECT_EQ(ranges[1].mode, SK_ACCESS_WRITE);
          // x and y are indexed alike, so each core reads exactly what it writes.
          EXPECT_EQ(ranges[0].begin, ranges[1].begin);
          EXPECT_EQ(ranges[0].end, ranges[1].end);
          EXPECT_LE(0, ranges[1].begin);
          EXPECT_LE(ranges[1].begin, ranges[1].end);
          EXPECT_LE(ranges[1].end, n * static_cast<int64_t>(sizeof(float)));
          EXPECT_EQ(ranges[1].begin % 4, 0);
          EXPECT_EQ(ranges[1].end % 4, 0);
          // Run this core alone: it must write its whole range and nothing else.
          std::fill(y.begin(), y.end(), nan);
          ASSERT_EQ(run_cores(d, args, cores, {c}), SK_OK);
          const int64_t b = ranges[1].begin / 4;
          const int64_t e = ranges[1].end / 4;
          for (int64_t i = 0; i < n; ++i) {
            const bool inside = i >= b && i < e;
            ASSERT_EQ(std::isnan(y[i]), !inside) << "core " << c << " element " << i;
          }
          if (b < e) writes.emplace_back(ranges[1].begin, ranges[1].end);
        }
        std::sort(writes.begin(), writes.end());
        int64_t covered = 0;
        for (const auto& [b, e] : writes) {
          EXPECT_EQ(b, covered) << "write ranges overlap or leave a gap";
          covered = e;
        }
        EXPECT_EQ(covered, n * static_cast<int64_t>(sizeof(float)));
      }
    }
  }
  EXPECT_EQ(g_unexpected_sync_all, 0);
}

TEST_F(ExamplePackageAbi, BadOperandsAreKernelErrorsNotCrashes) {
  std::vector<int32_t> xi(8);
  std::vector<float> y(8);
  const sk_tensor_arg in = dense_arg(xi.data(), SK_DTYPE_I32, 8);
  const sk_tensor_arg out = dense_arg(y.data(), SK_DTYPE_F32, 8);
  sk_kernel_args args{};
  args.inputs = &in;
  args.outputs = &out;
  args.num_inputs = 1;
  args.num_outputs = 1;
  std::string message;
  EXPECT_EQ(run_cores(desc(SK_EXAMPLE_SCALE2_F32), args, 2, {}, &message), SK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find(SK_EXAMPLE_SCALE2_F32), std::string::npos) << message;
  EXPECT_NE(message.find("f32"), std::string::npos) << message;
  sk_access_range r[2];
  EXPECT_LT(desc(SK_EXAMPLE_SCALE2_F32).access(&args, 0, 2, r, 2), 0);

  // axpb without its attrs blob.
  std::vector<float> xf(8);
  const sk_tensor_arg inf = dense_arg(xf.data(), SK_DTYPE_F32, 8);
  args.inputs = &inf;
  EXPECT_EQ(run_cores(desc(SK_EXAMPLE_AXPB_F32), args, 2, {}, &message), SK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find(SK_EXAMPLE_AXPB_F32), std::string::npos) << message;
  EXPECT_NE(message.find("attrs"), std::string::npos) << message;
}

// ---- Through sk::Runtime ---------------------------------------------------------------------

TEST(ExamplePackageRuntime, CreateWithKernelPackagesListsTheKernels) {
  auto rt = Runtime::create(example_runtime_options(2));
  ASSERT_TRUE(rt) << rt.status().to_string();
  EXPECT_EQ((*rt)->kernel_names(), (std::vector<std::string>{SK_EXAMPLE_AXPB_F32, SK_EXAMPLE_SCALE2_F32}));
}

TEST(ExamplePackageRuntime, LoadKernelPackageListsTheKernels) {
  RuntimeOptions opts = example_runtime_options(2);
  opts.kernel_packages.clear();
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt) << rt.status().to_string();
  EXPECT_TRUE((*rt)->kernel_names().empty());
  Status s = (*rt)->load_kernel_package(example_package_path());
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ((*rt)->kernel_names(), (std::vector<std::string>{SK_EXAMPLE_AXPB_F32, SK_EXAMPLE_SCALE2_F32}));
}

class ExamplePackageGraph : public ::testing::TestWithParam<ExecutionMode> {};

// Compiles `g` in the parameter's mode on four cores and runs it twice with different inputs
// (plan once, run many); `expected(x)` is the exact output.
void run_and_check(Graph& g, ExecutionMode mode, int64_t n, float (*expected)(float)) {
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  auto rt = Runtime::create(example_runtime_options(4));
  ASSERT_TRUE(rt) << rt.status().to_string();
  auto exe = (*rt)->compile(g, CompileOptions::for_mode(mode));
  ASSERT_TRUE(exe) << exe.status().to_string();
  EXPECT_EQ((*exe)->mode(), mode);
  for (int salt : {1, 42}) {
    const std::vector<float> x = test_input(n, salt);
    Status s = (*exe)->set_input("x", x);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    s = (*exe)->run();
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const std::vector<float> y = (*exe)->output_f32("y");
    ASSERT_EQ(y.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], expected(x[i])) << "element " << i << " salt " << salt;
  }
}

TEST_P(ExamplePackageGraph, Scale2OneOpGraph) {
  const Shape shape{3, 37};  // not a multiple of the 16-element split unit
  Graph g("example_scale2");
  Tensor x = g.input("x", DType::kF32, shape);
  std::vector<Tensor> y = call_kernel(g, SK_EXAMPLE_SCALE2_F32, {x}, {{DType::kF32, shape, "scaled"}});
  ASSERT_EQ(y.size(), 1u);
  g.output(y[0], "y");
  run_and_check(g, GetParam(), shape_numel(shape), [](float v) { return 2.0f * v; });
}

TEST_P(ExamplePackageGraph, AxpbOneOpGraphWithAttrs) {
  const Shape shape{5, 64};
  Graph g("example_axpb");
  Tensor x = g.input("x", DType::kF32, shape);
  std::vector<Tensor> y =
      call_kernel(g, SK_EXAMPLE_AXPB_F32, {x}, {{DType::kF32, shape, "affine"}}, axpb_attrs(0.5f, 0.75f));
  ASSERT_EQ(y.size(), 1u);
  g.output(y[0], "y");
  run_and_check(g, GetParam(), shape_numel(shape), [](float v) { return 0.5f * v + 0.75f; });
}

// Two custom kernels from the package feeding each other through a planned intermediate.
TEST_P(ExamplePackageGraph, Scale2ThenAxpbChain) {
  const Shape shape{2, 3, 50};
  Graph g("example_chain");
  Tensor x = g.input("x", DType::kF32, shape);
  Tensor y = call_kernel(g, SK_EXAMPLE_SCALE2_F32, {x}, {{DType::kF32, shape, "scaled"}})[0];
  Tensor z = call_kernel(g, SK_EXAMPLE_AXPB_F32, {y}, {{DType::kF32, shape, "affine"}}, axpb_attrs(-1.5f, 0.75f))[0];
  g.output(z, "y");
  run_and_check(g, GetParam(), shape_numel(shape), [](float v) { return -1.5f * (2.0f * v) + 0.75f; });
}

INSTANTIATE_TEST_SUITE_P(Modes, ExamplePackageGraph,
                         ::testing::Values(ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel),
                         [](const ::testing::TestParamInfo<ExecutionMode>& p) {
                           return std::string(execution_mode_name(p.param));
                         });

}  // namespace
}  // namespace sk
