// Memory the caller owns: external constants (Graph::constant_external) are read in place by
// every mode's executable, and Executable::bind_variable moves an input or variable into caller
// memory that several executables share.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/test_runtime.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;
using testing::random_floats;

const ExecutionMode kModes[] = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};

std::unique_ptr<Executable> compile_or_die(Runtime& rt, const Graph& g, ExecutionMode mode) {
  auto exe = rt.compile(g, CompileOptions::for_mode(mode));
  if (!exe) throw std::runtime_error(exe.status().to_string());
  return std::move(*exe);
}

constexpr int64_t kM = 4, kK = 64, kN = 32;

// y = (x · wᵀ) * s, fused in one scope; w and s are external.
struct LinearGraph {
  Graph g{"linear"};
  Tensor w, s;
  LinearGraph(const float* w_data, const float* s_data, std::shared_ptr<const void> owner) {
    Tensor x = g.input("x", DType::kF32, {kM, kK});
    w = g.constant_external("w", DType::kF32, {kN, kK}, w_data, kN * kK * 4, owner);
    s = g.constant_external("s", DType::kF32, {kM, kN}, s_data, kM * kN * 4, owner);
    SuperKernelScope scope(g, "linear");
    g.output(mul(g, matmul(g, x, w), s), "y");
  }
};

struct Weights {
  std::vector<float> w = random_floats(kN * kK, 1);
  std::vector<float> s = random_floats(kM * kN, 2);
};

TEST(ExternalConstant, ExecutablesReadTheCallersBytesInPlace) {
  auto rt = make_runtime(2);
  auto weights = std::make_shared<Weights>();
  LinearGraph lg(weights->w.data(), weights->s.data(), weights);
  const std::vector<float> x = random_floats(kM * kK, 3);
  for (ExecutionMode mode : kModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    auto exe = compile_or_die(*rt, lg.g, mode);
    ASSERT_TRUE(exe->set_input("x", x).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    const std::vector<float> before = exe->output_f32("y");
    // Doubling every weight doubles every result exactly: only a run that reads the caller's
    // bytes sees the change.
    for (float& v : weights->w) v *= 2.0f;
    ASSERT_TRUE(exe->run().is_ok());
    const std::vector<float> after = exe->output_f32("y");
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], 2.0f * before[i]) << i;
    for (float& v : weights->w) v *= 0.5f;
  }
}

TEST(ExternalConstant, SameBitsAsACopiedConstantInEveryMode) {
  auto rt = make_runtime(2);
  auto weights = std::make_shared<Weights>();
  LinearGraph external(weights->w.data(), weights->s.data(), weights);
  Graph copied("copied");
  {
    Tensor x = copied.input("x", DType::kF32, {kM, kK});
    Tensor w = copied.constant("w", DType::kF32, {kN, kK}, weights->w.data(), kN * kK * 4);
    Tensor s = copied.constant("s", DType::kF32, {kM, kN}, weights->s.data(), kM * kN * 4);
    SuperKernelScope scope(copied, "linear");
    copied.output(mul(copied, matmul(copied, x, w), s), "y");
  }
  const std::vector<float> x = random_floats(kM * kK, 3);
  testing::RunResult first;
  for (const Graph* g : {&copied, &external.g}) {
    for (ExecutionMode mode : kModes) {
      SCOPED_TRACE(std::string(g->name()) + " " + execution_mode_name(mode));
      auto exe = compile_or_die(*rt, *g, mode);
      if (mode == ExecutionMode::kSuperKernel) {
        EXPECT_FALSE(exe->report().segments.empty());
      }
      ASSERT_TRUE(exe->set_input("x", x).is_ok());
      ASSERT_TRUE(exe->run().is_ok());
      testing::RunResult r = testing::collect_outputs(*exe);
      if (first.names.empty()) {
        first = r;
        continue;
      }
      std::string why;
      EXPECT_TRUE(testing::bitwise_equal(first, r, &why)) << why;
    }
  }
}

TEST(ExternalConstant, KeepAliveOutlivesTheGraphUntilTheLastExecutable) {
  auto rt = make_runtime(2);
  std::weak_ptr<Weights> watch;
  std::vector<std::unique_ptr<Executable>> exes;
  std::vector<float> expect;
  const std::vector<float> x = random_floats(kM * kK, 3);
  {
    auto weights = std::make_shared<Weights>();
    watch = weights;
    LinearGraph lg(weights->w.data(), weights->s.data(), weights);
    for (ExecutionMode mode : kModes) exes.push_back(compile_or_die(*rt, lg.g, mode));
    auto probe = compile_or_die(*rt, lg.g, ExecutionMode::kGraph);
    ASSERT_TRUE(probe->set_input("x", x).is_ok());
    ASSERT_TRUE(probe->run().is_ok());
    expect = probe->output_f32("y");
  }
  // The graph and the caller's reference are gone; the executables still hold the weights.
  ASSERT_FALSE(watch.expired());
  for (auto& exe : exes) {
    ASSERT_TRUE(exe->set_input("x", x).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    EXPECT_EQ(exe->output_f32("y"), expect);
  }
  exes.pop_back();
  exes.pop_back();
  EXPECT_FALSE(watch.expired());
  exes.clear();
  EXPECT_TRUE(watch.expired());
}

TEST(ExternalConstant, BadDataIsAVerificationErrorNamingTheConstant) {
  std::vector<float> w(16);
  {
    Graph g;
    g.constant_external("short", DType::kF32, {4, 4}, w.data(), 60, nullptr);
    Status s = g.verify();
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("'short'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("60 bytes"), std::string::npos) << s.message();
  }
  {
    Graph g;
    g.constant_external("null", DType::kF32, {4}, nullptr, 16, nullptr);
    Status s = g.verify();
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("'null'"), std::string::npos) << s.message();
  }
  {
    Graph g;
    const auto* misaligned = reinterpret_cast<const uint8_t*>(w.data()) + 2;
    g.constant_external("odd", DType::kF32, {2}, misaligned, 8, nullptr);
    Status s = g.verify();
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("aligned"), std::string::npos) << s.message();
  }
}

// cache += x (in place), y = cache * 2: a state that persists in caller memory.
struct CacheGraph {
  Graph g{"cache"};
  explicit CacheGraph(int steps) {
    Tensor x = g.input("x", DType::kF32, {64});
    Tensor cache = g.variable("cache", DType::kF32, {64});
    Tensor two = g.constant_f32("two", {64}, std::vector<float>(64, 2.0f));
    SuperKernelScope scope(g, "step");
    for (int i = 0; i < steps; ++i) {
      OpSpec spec;
      spec.kind = OpKind::kAdd;
      spec.inputs = {cache, x};
      spec.write_into = {cache};
      g.add_op(spec);
    }
    g.output(mul(g, cache, two), "y");
  }
};

TEST(BindVariable, ExecutablesOfEveryModeShareOneCache) {
  auto rt = make_runtime(2);
  CacheGraph prefill(3), decode(1);
  std::vector<float> cache(64, 0.0f);
  const std::vector<float> ones(64, 1.0f);
  std::vector<std::unique_ptr<Executable>> exes;
  for (ExecutionMode mode : kModes) {
    exes.push_back(compile_or_die(*rt, prefill.g, mode));
    exes.push_back(compile_or_die(*rt, decode.g, mode));
  }
  for (auto& exe : exes) {
    ASSERT_TRUE(exe->bind_variable("cache", cache.data(), cache.size() * 4).is_ok());
    ASSERT_TRUE(exe->set_input("x", ones).is_ok());
  }
  float expect = 0.0f;
  for (size_t i = 0; i < exes.size(); ++i) {
    ASSERT_TRUE(exes[i]->run().is_ok());
    expect += i % 2 == 0 ? 3.0f : 1.0f;
    for (float v : cache) ASSERT_EQ(v, expect);
    EXPECT_EQ(exes[i]->output_f32("y"), std::vector<float>(64, 2.0f * expect));
    // Every executable reads the shared cache, not a copy of its own.
    EXPECT_EQ(exes[0]->output_f32("cache"), cache);
  }
  // The caller may write the cache directly between runs.
  std::fill(cache.begin(), cache.end(), 100.0f);
  ASSERT_TRUE(exes[1]->run().is_ok());
  for (float v : cache) EXPECT_EQ(v, 101.0f);
}

TEST(BindVariable, SetInputWritesIntoTheBoundMemory) {
  auto rt = make_runtime(2);
  CacheGraph cg(1);
  for (ExecutionMode mode : kModes) {
    auto exe = compile_or_die(*rt, cg.g, mode);
    std::vector<float> x(64, 0.0f);
    ASSERT_TRUE(exe->bind_variable("x", x.data(), x.size() * 4).is_ok());
    ASSERT_TRUE(exe->set_input("x", std::vector<float>(64, 5.0f)).is_ok());
    EXPECT_EQ(x, std::vector<float>(64, 5.0f));
    x[0] = 7.0f;
    ASSERT_TRUE(exe->run().is_ok());
    const std::vector<float> cache = exe->output_f32("cache");
    EXPECT_EQ(cache[0], 7.0f);
    EXPECT_EQ(cache[1], 5.0f);
  }
}

TEST(BindVariable, ErrorsNameTheTensor) {
  auto rt = make_runtime(2);
  CacheGraph cg(1);
  auto exe = compile_or_die(*rt, cg.g, ExecutionMode::kGraph);
  std::vector<float> buf(200, 0.0f);

  Status wrong_size = exe->bind_variable("cache", buf.data(), 63 * 4);
  EXPECT_EQ(wrong_size.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_size.message().find("'cache'"), std::string::npos) << wrong_size.message();
  EXPECT_NE(wrong_size.message().find("252 bytes"), std::string::npos) << wrong_size.message();

  Status unknown = exe->bind_variable("nope", buf.data(), 64 * 4);
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("'nope'"), std::string::npos) << unknown.message();

  Status intermediate = exe->bind_variable("y", buf.data(), 64 * 4);
  EXPECT_EQ(intermediate.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(intermediate.message().find("intermediate"), std::string::npos) << intermediate.message();

  Status null = exe->bind_variable("cache", nullptr, 64 * 4);
  EXPECT_EQ(null.code(), StatusCode::kInvalidArgument);

  Status misaligned = exe->bind_variable("cache", reinterpret_cast<uint8_t*>(buf.data()) + 1, 64 * 4);
  EXPECT_EQ(misaligned.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(misaligned.message().find("aligned"), std::string::npos) << misaligned.message();

  ASSERT_TRUE(exe->bind_variable("cache", buf.data(), 64 * 4).is_ok());
  Status overlap = exe->bind_variable("x", buf.data() + 32, 64 * 4);
  EXPECT_EQ(overlap.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(overlap.message().find("overlaps 'cache'"), std::string::npos) << overlap.message();
  // Failed binds changed nothing: the executable still runs on the first binding.
  ASSERT_TRUE(exe->set_input("x", std::vector<float>(64, 1.0f)).is_ok());
  ASSERT_TRUE(exe->run().is_ok());
  EXPECT_EQ(buf[0], 1.0f);
  EXPECT_EQ(buf[64], 0.0f);
  // Rebinding the same tensor elsewhere is allowed.
  ASSERT_TRUE(exe->bind_variable("cache", buf.data() + 64, 64 * 4).is_ok());
  ASSERT_TRUE(exe->run().is_ok());
  EXPECT_EQ(buf[64], 1.0f);
}

}  // namespace
}  // namespace sk
