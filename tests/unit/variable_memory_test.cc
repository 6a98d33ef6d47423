// Variables (KV caches) live outside the arena, in zero pages of their own that cost nothing
// until written and that binding the variable to caller memory releases: a cache that several
// executables share through Executable::bind_variable is paid once, not once per executable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "common/test_runtime.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;

const ExecutionMode kModes[] = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};

constexpr int64_t kBlocks = 8192, kBlockSize = 16, kHeads = 2, kDim = 64;
constexpr int64_t kCacheFloats = kBlocks * kBlockSize * kHeads * kDim;  // 64 MiB per cache
constexpr int64_t kCacheBytes = kCacheFloats * 4;
constexpr int64_t kMiB = 1 << 20;

// The resident set of this process (what the machine's memory pays for).
int64_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// One decode step of one sequence: append k and v at slot 0, attend over the one cached token.
Graph decode_step() {
  Graph g("decode");
  Tensor q = g.input("q", DType::kF32, {1, kHeads, kDim});
  Tensor k = g.input("k", DType::kF32, {1, kHeads, kDim});
  Tensor v = g.input("v", DType::kF32, {1, kHeads, kDim});
  Tensor slots = g.input("slot_mapping", DType::kI32, {1});
  Tensor tables = g.input("block_tables", DType::kI32, {1, kBlocks});
  Tensor lens = g.input("context_lens", DType::kI32, {1});
  Tensor k_cache = g.variable("k_cache", DType::kF32, {kBlocks, kBlockSize, kHeads, kDim});
  Tensor v_cache = g.variable("v_cache", DType::kF32, {kBlocks, kBlockSize, kHeads, kDim});
  SuperKernelScope scope(g, "step");
  nn::kv_append(g, k, v, slots, k_cache, v_cache, "append");
  g.output(nn::paged_attention(g, q, k_cache, v_cache, tables, lens, 0.125f, "attention"), "o");
  return g;
}

std::unique_ptr<Executable> compile_or_die(Runtime& rt, const Graph& g, ExecutionMode mode) {
  auto exe = rt.compile(g, CompileOptions::for_mode(mode));
  if (!exe) throw std::runtime_error(exe.status().to_string());
  return std::move(*exe);
}

void feed(Executable& exe, float value) {
  const std::vector<float> row(kHeads * kDim, value);
  std::vector<int32_t> tables(kBlocks);
  for (int64_t b = 0; b < kBlocks; ++b) tables[b] = static_cast<int32_t>(b);
  const int32_t slot = 0, len = 1;
  ASSERT_TRUE(exe.set_input("q", row).is_ok());
  ASSERT_TRUE(exe.set_input("k", row).is_ok());
  ASSERT_TRUE(exe.set_input("v", row).is_ok());
  ASSERT_TRUE(exe.set_input("slot_mapping", &slot, 4).is_ok());
  ASSERT_TRUE(exe.set_input("block_tables", tables.data(), tables.size() * 4).is_ok());
  ASSERT_TRUE(exe.set_input("context_lens", &len, 4).is_ok());
}

TEST(VariableMemory, TheArenaHoldsNoVariable) {
  auto rt = make_runtime(2);
  const Graph g = decode_step();
  for (ExecutionMode mode : kModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    auto exe = compile_or_die(*rt, g, mode);
    EXPECT_EQ(exe->report().variable_bytes, 2 * kCacheBytes);
    // Inputs, the attention's output and workspaces: far below one cache.
    EXPECT_LT(exe->report().arena_bytes, kCacheBytes / 16);
    EXPECT_LT(exe->report().unplanned_bytes, kCacheBytes / 16);
  }
}

TEST(VariableMemory, ABoundCacheIsPaidOnceForAllExecutables) {
  auto rt = make_runtime(2);
  const Graph g = decode_step();
  std::vector<float> k_cache(kCacheFloats, 0.0f), v_cache(kCacheFloats, 0.0f);  // resident from here
  const int64_t before = resident_bytes();
  std::vector<std::unique_ptr<Executable>> exes;
  for (ExecutionMode mode : kModes)
    for (int copy = 0; copy < 2; ++copy) {  // a prefill and a decode executable, say
      exes.push_back(compile_or_die(*rt, g, mode));
      ASSERT_TRUE(exes.back()->bind_variable("k_cache", k_cache.data(), kCacheBytes).is_ok());
      ASSERT_TRUE(exes.back()->bind_variable("v_cache", v_cache.data(), kCacheBytes).is_ok());
    }
  // Six executables of a graph with 128 MiB of caches: without storage of their own, a few MiB of
  // arenas and programs; with zero-filled slots of their own, 768 MiB.
  EXPECT_LT(resident_bytes() - before, 32 * kMiB);
  for (size_t i = 0; i < exes.size(); ++i) {
    feed(*exes[i], static_cast<float>(i + 1));
    ASSERT_TRUE(exes[i]->run().is_ok());
    EXPECT_EQ(k_cache[0], static_cast<float>(i + 1)) << "every executable appends into the shared cache";
    EXPECT_EQ(exes[i]->output_f32("o")[0], static_cast<float>(i + 1));
  }
}

TEST(VariableMemory, AnUnboundVariableStartsZeroedAndCostsOnlyWhatIsWritten) {
  auto rt = make_runtime(2);
  const Graph g = decode_step();
  const int64_t before = resident_bytes();
  auto exe = compile_or_die(*rt, g, ExecutionMode::kSuperKernel);
  feed(*exe, 3.0f);
  ASSERT_TRUE(exe->run().is_ok());
  EXPECT_LT(resident_bytes() - before, 32 * kMiB);  // one slot written, not 128 MiB zero-filled
  std::vector<float> cache(kCacheFloats);
  ASSERT_TRUE(exe->read("k_cache", cache.data(), kCacheBytes).is_ok());
  EXPECT_EQ(cache[0], 3.0f);
  EXPECT_EQ(cache[kHeads * kDim], 0.0f);
  EXPECT_EQ(cache.back(), 0.0f);
  EXPECT_EQ(exe->output_f32("o")[0], 3.0f);
}

TEST(VariableMemory, BindingReleasesTheVariablesOwnStorage) {
  auto rt = make_runtime(2);
  const Graph g = decode_step();
  auto exe = compile_or_die(*rt, g, ExecutionMode::kGraph);
  {
    const std::vector<float> ones(kCacheFloats, 1.0f);
    ASSERT_TRUE(exe->set_input("k_cache", ones).is_ok());  // writes every page of its own storage
  }
  std::vector<float> shared(kCacheFloats, 2.0f);
  const int64_t written = resident_bytes();
  ASSERT_TRUE(exe->bind_variable("k_cache", shared.data(), kCacheBytes).is_ok());
  EXPECT_GT(written - resident_bytes(), kCacheBytes * 3 / 4);
  feed(*exe, 5.0f);
  ASSERT_TRUE(exe->run().is_ok());
  EXPECT_EQ(shared[0], 5.0f);
  EXPECT_EQ(shared[kHeads * kDim], 2.0f);
}

TEST(VariableMemory, CallerMemoryMayNotOverlapAnotherVariablesStorage) {
  auto rt = make_runtime(2);
  auto exe = compile_or_die(*rt, decode_step(), ExecutionMode::kGraph);
  auto v = exe->tensor("v_cache");
  ASSERT_TRUE(v.has_value());
  Status s = exe->bind_variable("k_cache", v->data, kCacheBytes);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'v_cache'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sk
