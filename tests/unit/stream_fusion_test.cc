// Stream fusion: several streams in one super kernel, each on its own core partition, ordered
// across streams only by events and data; the partition rule and its errors; explain's report.
#include <gtest/gtest.h>

#include <string>

#include "common/test_runtime.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;

Tensor add1(Graph& g, Tensor x, const std::string& name) {
  return call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}

CompileOptions fused_opts() {
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  o.super_kernel_optimize_options.stream_fusion = true;
  return o;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Runs `g` in eager mode and under `o`, and checks every output is bit-identical.
void expect_same_as_eager(Runtime& rt, const Graph& g, const CompileOptions& o) {
  auto run = [&](const CompileOptions& opts) {
    auto exe = rt.compile(g, opts);
    if (!exe) throw std::runtime_error(exe.status().to_string());
    Status s = (*exe)->set_input("x", testing::random_floats(64, 7));
    if (!s) throw std::runtime_error(s.to_string());
    s = (*exe)->run();
    if (!s) throw std::runtime_error(s.to_string());
    return testing::collect_outputs(**exe);
  };
  std::string why;
  EXPECT_TRUE(testing::bitwise_equal(run(CompileOptions::for_mode(ExecutionMode::kEager)), run(o), &why)) << why;
}

// A LongCat-style block: a main branch and a side branch (its own scope, stream and core limit)
// that both read `x`, joined by an add on the main stream.
struct TwoBranch {
  Graph g{"two_branch"};
  TwoBranch(int32_t side_limit, int main_ops = 3, int side_ops = 2, const std::string& side_scope_options = "",
            const std::string& main_scope_options = "") {
    Stream side = g.create_stream("moe");
    Event x_ready = g.create_event("x_ready"), side_done = g.create_event("side_done");
    Tensor x = g.input("x", DType::kF32, {64});
    Tensor s = x;
    g.record(x_ready);
    {
      SuperKernelScope scope(g, "part2_moe", side_scope_options);
      StreamScope on(g, side);
      LimitCoreNum limit(g, side_limit, side_limit);
      g.wait(x_ready);
      for (int i = 0; i < side_ops; ++i) s = add1(g, s, "side" + std::to_string(i));
      g.record(side_done);
    }
    Tensor m = x;
    {
      SuperKernelScope scope(g, "part2_main", main_scope_options);
      for (int i = 0; i < main_ops; ++i) m = add1(g, m, "main" + std::to_string(i));
      g.wait(side_done);
      m = add(g, m, s, "join");
    }
    g.output(m, "y");
  }
};

TEST(StreamFusion, TwoStreamsShareOneLaunchOnTheirOwnPartitions) {
  auto rt = make_runtime(3);
  TwoBranch b(1);
  auto exe = rt->compile(b.g, fused_opts());
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  const CompileReport& r = (*exe)->report();
  ASSERT_EQ(r.segments.size(), 1u);
  EXPECT_EQ(r.segments[0].scope, "part2_moe + part2_main");
  EXPECT_EQ(r.num_launches, 1u);
  // The limited stream takes the highest cores; the main stream the ones left.
  ASSERT_EQ(r.segments[0].partitions.size(), 2u);
  EXPECT_EQ(r.segments[0].partitions[0], "stream 'moe' cores 2-2 (LimitCoreNum 1)");
  EXPECT_EQ(r.segments[0].partitions[1], "stream 'default' cores 0-1 (no limit)");
  expect_same_as_eager(*rt, b.g, fused_opts());
}

TEST(StreamFusion, ScopeOptionAloneFusesTheStreams) {
  auto rt = make_runtime(2);
  TwoBranch b(1, 3, 2, "stream-fusion=1", "stream-fusion=1");
  auto exe = rt->compile(b.g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  ASSERT_EQ((*exe)->report().segments.size(), 1u);
  expect_same_as_eager(*rt, b.g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  // One scope without it keeps the branches apart: a stream switch at a scope change cuts.
  TwoBranch half(1, 3, 2, "stream-fusion=1", "");
  auto cut = rt->compile(half.g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(cut.has_value()) << cut.status().to_string();
  ASSERT_EQ((*cut)->report().segments.size(), 2u);
  EXPECT_EQ((*cut)->report().segments[0].cut, CutReason::kStreamLimit);
}

TEST(StreamFusion, EventsAndDataAreTheOnlyCrossStreamSyncPoints) {
  auto rt = make_runtime(3);
  TwoBranch b(1);
  auto text = explain(*rt, b.g, fused_opts());
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_TRUE(contains(*text, "  partition stream 'moe' cores 2-2 (LimitCoreNum 1)\n")) << *text;
  EXPECT_TRUE(contains(*text, "  partition stream 'default' cores 0-1 (no limit)\n")) << *text;
  // The join reads the side branch's result: a data dependency and the side_done event.
  EXPECT_TRUE(contains(*text, "cross-stream sync: op 'join' (stream 'default') waits for op 'side1' (stream 'moe')"))
      << *text;
  // The side branch runs before main0 in program order yet does not wait for it: x_ready was
  // recorded before any main op, so nothing orders them.
  EXPECT_FALSE(contains(*text, "op 'side0' (stream 'moe') waits for")) << *text;
  EXPECT_FALSE(contains(*text, "op 'main0' (stream 'default') waits for")) << *text;
}

TEST(StreamFusion, AnEventOrdersStreamsThatShareNoData) {
  auto rt = make_runtime(2);
  Graph g("event_only");
  Stream side = g.create_stream("side");
  Event e = g.create_event("after_a");
  Tensor x = g.input("x", DType::kF32, {64});
  Tensor a = add1(g, x, "a");
  g.record(e);
  Tensor b;
  {
    StreamScope on(g, side);
    g.wait(e);
    b = add1(g, x, "b");  // reads only x: only the event orders it after a
  }
  g.output(a, "ya");
  g.output(b, "yb");
  auto text = explain(*rt, g, fused_opts());
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_TRUE(contains(*text,
                       "cross-stream sync: op 'b' (stream 'side') waits for op 'a' (stream 'default'): event "
                       "'after_a'"))
      << *text;
  EXPECT_TRUE(contains(*text, "core 1:\n    WAIT core 0 >= 1\n    RUN 3")) << *text;
  expect_same_as_eager(*rt, g, fused_opts());
}

TEST(StreamFusion, StreamsWithoutLimitsShareCoresWhenTooFew) {
  auto rt = make_runtime(1);
  TwoBranch b(0);
  auto exe = rt->compile(b.g, fused_opts());
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  ASSERT_EQ((*exe)->report().segments[0].partitions.size(), 2u);
  EXPECT_EQ((*exe)->report().segments[0].partitions[0], "stream 'moe' cores 0-0 (no limit)");
  EXPECT_EQ((*exe)->report().segments[0].partitions[1], "stream 'default' cores 0-0 (no limit)");
  expect_same_as_eager(*rt, b.g, fused_opts());
}

TEST(StreamFusion, ThreeStreamsSplitTheCoresLeftEvenly) {
  auto rt = make_runtime(3);
  Graph g("three");
  Stream s1 = g.create_stream("s1"), s2 = g.create_stream("s2");
  Tensor x = g.input("x", DType::kF32, {64});
  Tensor a = add1(g, x, "a");
  Tensor b, c;
  {
    StreamScope on(g, s1);
    b = add1(g, x, "b");
  }
  {
    StreamScope on(g, s2);
    c = add1(g, x, "c");
  }
  g.output(add(g, add(g, a, b), c), "y");
  auto exe = rt->compile(g, fused_opts());
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  const auto& parts = (*exe)->report().segments.at(0).partitions;
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "stream 'default' cores 0-0 (no limit)");
  EXPECT_EQ(parts[1], "stream 's1' cores 1-1 (no limit)");
  EXPECT_EQ(parts[2], "stream 's2' cores 2-2 (no limit)");
  expect_same_as_eager(*rt, g, fused_opts());
}

TEST(StreamFusion, CoreLimitsThatDoNotFitAreErrors) {
  {
    auto rt = make_runtime(2);
    TwoBranch b(3);  // above the machine
    auto exe = rt->compile(b.g, fused_opts());
    ASSERT_FALSE(exe.has_value());
    EXPECT_TRUE(contains(exe.status().message(),
                         "op 'side0' on stream 'moe' has LimitCoreNum 3, more than the "
                         "machine's 2 cores"))
        << exe.status().to_string();
  }
  {
    auto rt = make_runtime(2);
    TwoBranch b(2);  // takes every core, none left for the main stream
    auto exe = rt->compile(b.g, fused_opts());
    ASSERT_FALSE(exe.has_value());
    EXPECT_TRUE(contains(exe.status().message(), "take all 2 cores and leave none for stream 'default'"))
        << exe.status().to_string();
  }
  {
    auto rt = make_runtime(3);
    Graph g("over");
    Stream s1 = g.create_stream("s1"), s2 = g.create_stream("s2");
    Tensor x = g.input("x", DType::kF32, {64});
    Tensor b, c;
    {
      StreamScope on(g, s1);
      LimitCoreNum limit(g, 2, 2);
      b = add1(g, x, "b");
    }
    {
      StreamScope on(g, s2);
      LimitCoreNum limit(g, 2, 2);
      c = add1(g, x, "c");
    }
    g.output(add(g, b, c), "y");
    auto exe = rt->compile(g, fused_opts());
    ASSERT_FALSE(exe.has_value());
    EXPECT_TRUE(
        contains(exe.status().message(), "stream 's1' 2 + stream 's2' 2 add up to 4, more than the machine's 3"))
        << exe.status().to_string();
  }
}

TEST(StreamFusion, CubeVectorSplitLayoutsAreNotSupportedYet) {
  auto rt = make_runtime(3, 60.0, 1);
  TwoBranch b(1);
  auto exe = rt->compile(b.g, fused_opts());
  ASSERT_FALSE(exe.has_value());
  EXPECT_EQ(exe.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(exe.status().message(), "cube/vector core split")) << exe.status().to_string();
}

}  // namespace
}  // namespace sk
