// Superkernel mode: segmentation and cut reasons, the per-core programs the scheduler emits,
// scope options at run time, errors, and long runs of launches.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "common/program_checks.h"
#include "common/test_runtime.h"
#include "program/program.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::count_per_core;
using testing::make_runtime;

Tensor add1(Graph& g, Tensor x, const std::string& name = "") {
  return call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}
Tensor opaque(Graph& g, Tensor x, const std::string& name) {
  return call_kernel(g, "test.opaque_add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}
Tensor halve_on_host(Graph& g, Tensor x, const std::string& name) {
  return g.host_op(name,
                   [](HostOpContext& ctx) {
                     auto* in = static_cast<const float*>(ctx.inputs[0].data);
                     auto* out = static_cast<float*>(ctx.outputs[0].data);
                     for (size_t i = 0; i < ctx.outputs[0].bytes() / 4; ++i) out[i] = 0.5f * in[i];
                     return Status::ok();
                   },
                   {x}, {{DType::kF32, g.tensor(x).shape, ""}})[0];
}

CompileOptions sk_opts() { return CompileOptions::for_mode(ExecutionMode::kSuperKernel); }

std::unique_ptr<Executable> compile_ok(Runtime& rt, const Graph& g, const CompileOptions& o = sk_opts()) {
  return testing::compile_ok(rt, g, o);
}

void expect_same_as_graph(Runtime& rt, const Graph& g, const CompileOptions& sk = sk_opts()) {
  testing::expect_same_as_graph(rt, g, sk, 5);
}

// ---- Segmentation -------------------------------------------------------------------------------

TEST(Segmentation, NoScopesFusesTheWholeGraph) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  for (int i = 0; i < 5; ++i) t = add1(g, t);
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const CompileReport& r = exe->report();
  ASSERT_EQ(r.segments.size(), 1u);
  EXPECT_EQ(r.segments[0].ops.size(), 5u);
  EXPECT_EQ(r.segments[0].scope, "<graph>");
  EXPECT_EQ(r.segments[0].cut, CutReason::kGraphEnd);
  EXPECT_EQ(r.num_launches, 1u);
  expect_same_as_graph(*rt, g);
}

TEST(Segmentation, NonFusibleKernelCutsAndFusionResumes) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "layer");
    t = add1(g, add1(g, t));
    t = opaque(g, t, "opaque");
    t = add1(g, add1(g, t));
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const CompileReport& r = exe->report();
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_EQ(r.segments[0].cut, CutReason::kOpUnsupported);
  EXPECT_EQ(g.op(r.segments[0].cut_op).name, "opaque");
  EXPECT_EQ(r.segments[1].ops.size(), 2u);
  ASSERT_EQ(r.unfused.size(), 1u);
  EXPECT_EQ(r.unfused[0].reason, CutReason::kOpUnsupported);
  EXPECT_EQ(r.num_launches, 3u);
  expect_same_as_graph(*rt, g);
}

TEST(Segmentation, HostOpOutsideScopesCutsWithHostOpReason) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = add1(g, add1(g, g.input("x", DType::kF32, {64})));
  t = halve_on_host(g, t, "host_half");
  g.output(add1(g, t), "y");
  auto exe = compile_ok(*rt, g);
  const CompileReport& r = exe->report();
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_EQ(r.segments[0].cut, CutReason::kHostOp);
  EXPECT_EQ(g.op(r.segments[0].cut_op).name, "host_half");
  expect_same_as_graph(*rt, g);
}

TEST(Segmentation, HostOpInsideAScopeIsAGraphBreakError) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "attn");
    t = halve_on_host(g, add1(g, t), "callback");
  }
  g.output(t, "y");
  auto exe = rt->compile(g, sk_opts());
  ASSERT_FALSE(exe.has_value());
  EXPECT_NE(exe.status().message().find("scope 'attn'"), std::string::npos) << exe.status().message();
  EXPECT_NE(exe.status().message().find("'callback'"), std::string::npos);
  EXPECT_NE(exe.status().message().find("graph break"), std::string::npos);
}

TEST(Segmentation, StrictScopeCheckAbortFailsNamingScopeAndOp) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "strict", "strict-scope-check=abort");
    t = opaque(g, add1(g, t), "blocker");
  }
  g.output(t, "y");
  auto exe = rt->compile(g, sk_opts());
  ASSERT_FALSE(exe.has_value());
  EXPECT_NE(exe.status().message().find("scope 'strict'"), std::string::npos);
  EXPECT_NE(exe.status().message().find("'blocker'"), std::string::npos);
  EXPECT_NE(exe.status().message().find("strict-scope-check=abort"), std::string::npos);
}

TEST(Segmentation, StrictScopeCheckBypassRunsTheScopeUnfusedWithAWarning) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "lenient", "strict-scope-check=bypass");
    t = add1(g, halve_on_host(g, add1(g, t), "cb"));
  }
  {
    SuperKernelScope s(g, "fused");
    t = add1(g, add1(g, t));
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const CompileReport& r = exe->report();
  ASSERT_EQ(r.segments.size(), 1u);
  EXPECT_EQ(r.segments[0].scope, "fused");
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("scope 'lenient'"), std::string::npos);
  int bypassed = 0;
  for (const UnfusedOp& u : r.unfused) bypassed += u.reason == CutReason::kScopeBypassed;
  EXPECT_EQ(bypassed, 2);
  expect_same_as_graph(*rt, g);
}

TEST(Segmentation, ScopeBoundariesAndUnscopedOpsCut) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "a");
    t = add1(g, add1(g, t));
  }
  {
    SuperKernelScope s(g, "b");
    t = add1(g, t, "first_of_b");
  }
  t = add1(g, t, "loose");
  {
    SuperKernelScope s(g, "a");  // same name again: the same scope, but not adjacent
    t = add1(g, t);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const CompileReport& r = exe->report();
  ASSERT_EQ(r.segments.size(), 3u);
  EXPECT_EQ(r.segments[0].cut, CutReason::kScopeBoundary);
  EXPECT_EQ(g.op(r.segments[0].cut_op).name, "first_of_b");
  EXPECT_EQ(r.segments[1].cut, CutReason::kNotFused);
  EXPECT_EQ(g.op(r.segments[1].cut_op).name, "loose");
  EXPECT_EQ(r.segments[2].scope, "a");
  expect_same_as_graph(*rt, g);
}

TEST(Segmentation, DoNotFuseMarkerWinsInsideAScope) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "outer");
    t = add1(g, t);
    {
      SuperKernelScope none(g, "");
      t = add1(g, t, "excluded");
    }
    t = add1(g, t);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const CompileReport& r = exe->report();
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_EQ(r.segments[0].cut, CutReason::kNotFused);
  EXPECT_EQ(g.op(r.segments[0].cut_op).name, "excluded");
}

TEST(Segmentation, NestedScopesWithDifferentStacksAreDifferentSegments) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope outer(g, "outer");
    t = add1(g, t);
    {
      SuperKernelScope inner(g, "inner");
      t = add1(g, add1(g, t));
    }
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  ASSERT_EQ(exe->report().segments.size(), 2u);
  EXPECT_EQ(exe->report().segments[1].scope, "outer/inner");
  EXPECT_EQ(exe->report().segments[0].cut, CutReason::kScopeBoundary);
}

TEST(Segmentation, SecondStreamInAScopeWithoutStreamFusionIsAnError) {
  auto rt = make_runtime(2);
  Graph g;
  Stream side = g.create_stream("side");
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s");
    t = add1(g, t);
    StreamScope on(g, side);
    t = add1(g, t, "on_side");
  }
  g.output(t, "y");
  auto exe = rt->compile(g, sk_opts());
  ASSERT_FALSE(exe.has_value());
  const std::string msg = exe.status().message();
  EXPECT_NE(msg.find("op 'on_side' on stream 'side'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stream-fusion=1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("super_kernel_optimize_options.stream_fusion"), std::string::npos) << msg;
  // Eager and graph mode run the same graph in program order.
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph})
    EXPECT_TRUE(rt->compile(g, CompileOptions::for_mode(m)).has_value()) << execution_mode_name(m);
}

TEST(Segmentation, StreamSwitchAtAScopeChangeCutsWithStreamLimit) {
  auto rt = make_runtime(2);
  Graph g;
  Stream side = g.create_stream("side");
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "a");
    t = add1(g, t);
  }
  {
    SuperKernelScope s(g, "b");
    StreamScope on(g, side);
    t = add1(g, t, "on_side");
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  ASSERT_EQ(exe->report().segments.size(), 2u);
  EXPECT_EQ(exe->report().segments[0].cut, CutReason::kStreamLimit);
  EXPECT_EQ(g.op(exe->report().segments[0].cut_op).name, "on_side");
}

TEST(Segmentation, ViewsAndEventsNeverCut) {
  auto rt = make_runtime(2);
  Graph g;
  Event e = g.create_event("e");
  Tensor t = g.input("x", DType::kF32, {8, 8});
  {
    SuperKernelScope s(g, "s");
    t = add1(g, t);
    g.record(e);
    Tensor v = g.reshape(t, {64});
    g.wait(e);
    t = copy(g, g.transpose(g.reshape(add1(g, v), {8, 8}), {1, 0}));
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  ASSERT_EQ(exe->report().segments.size(), 1u);
  EXPECT_EQ(exe->report().segments[0].ops.size(), 3u);
  expect_same_as_graph(*rt, g);
}

TEST(Segmentation, SplitModeDividesASegment) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s", "split-mode=3");
    for (int i = 0; i < 7; ++i) t = add1(g, t);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const auto& segs = exe->report().segments;
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[0].cut, CutReason::kSplitMode);
  EXPECT_EQ(segs[1].cut, CutReason::kSplitMode);
  EXPECT_EQ(segs[2].cut, CutReason::kGraphEnd);
  EXPECT_EQ(segs[0].ops.size() + segs[1].ops.size() + segs[2].ops.size(), 7u);
  expect_same_as_graph(*rt, g);
}

TEST(Segmentation, BadScopeOptionsFailCompilationNamingTheKey) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s", "feed-sync-all=2");
    t = add1(g, t);
  }
  g.output(t, "y");
  auto exe = rt->compile(g, sk_opts());
  ASSERT_FALSE(exe.has_value());
  EXPECT_NE(exe.status().message().find("'feed-sync-all'"), std::string::npos);
  // Graph and eager modes do not fuse, but a malformed option is the same error in every mode.
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph}) {
    auto plain = rt->compile(g, CompileOptions::for_mode(m));
    ASSERT_FALSE(plain.has_value()) << execution_mode_name(m);
    EXPECT_EQ(plain.status().message(), exe.status().message()) << execution_mode_name(m);
  }
}

// ---- Scheduling --------------------------------------------------------------------------------

TEST(Schedule, SamePartitionChainsNeedNoSync) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(g, "chain");
    for (int i = 0; i < 10; ++i) t = add1(g, t);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const std::string& prog = exe->report().program_text;
  EXPECT_EQ(count_per_core(prog, "WAIT"), (std::vector<int>{0, 0})) << prog;
  EXPECT_EQ(count_per_core(prog, "BARRIER"), (std::vector<int>{0, 0})) << prog;
  EXPECT_EQ(count_per_core(prog, "RUN"), (std::vector<int>{10, 10}));
  expect_same_as_graph(*rt, g);
}

TEST(Schedule, CrossCoreDataFlowGetsPointToPointWaits) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {1, 64});
  std::vector<float> wv(64 * 64, 0.01f), gv(64, 1.0f);
  Tensor w = g.constant_f32("w", {64, 64}, wv);
  Tensor gamma = g.constant_f32("gamma", {64}, gv);
  Tensor t = x;
  {
    SuperKernelScope s(g, "mv");
    for (int i = 0; i < 4; ++i) t = rms_norm(g, matmul(g, t, w), gamma, 1e-6f);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const std::string& prog = exe->report().program_text;
  std::vector<int> waits = count_per_core(prog, "WAIT");
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_GT(waits[0] + waits[1], 0) << prog;
  EXPECT_EQ(count_per_core(prog, "BARRIER"), (std::vector<int>{0, 0})) << prog;
  expect_same_as_graph(*rt, g);
}

TEST(Schedule, DebugSyncAllPutsABarrierBetweenSubKernels) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(g, "chain", "debug-sync-all=1");
    for (int i = 0; i < 6; ++i) t = add1(g, t);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  EXPECT_EQ(count_per_core(exe->report().program_text, "BARRIER"), (std::vector<int>{5, 5}));
  CompileOptions global = sk_opts();
  global.super_kernel_debug_options.debug_sync_all = true;
  Graph g2;
  Tensor u = g2.input("x", DType::kF32, {256});
  for (int i = 0; i < 4; ++i) u = add1(g2, u);
  g2.output(u, "y");
  auto exe2 = compile_ok(*rt, g2, global);
  EXPECT_EQ(count_per_core(exe2->report().program_text, "BARRIER"), (std::vector<int>{3, 3}));
  expect_same_as_graph(*rt, g, sk_opts());
}

Graph reverse_graph(const std::string& scope_options) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {101});
  Tensor t;
  {
    SuperKernelScope s(g, "rev", scope_options);
    Tensor a = add1(g, x);
    LimitCoreNum one(g, 0, 1);
    t = call_kernel(g, "test.reverse_sync.f32", {a}, {{DType::kF32, {101}, ""}}, {}, "reverse")[0];
  }
  g.output(t, "y");
  return g;
}

TEST(Schedule, SyncAllOnFewerCoresNeedsFeedSyncAll) {
  auto rt = make_runtime(2);
  Graph bad = reverse_graph("");
  auto exe = rt->compile(bad, sk_opts());
  ASSERT_FALSE(exe.has_value());
  EXPECT_NE(exe.status().message().find("scope 'rev'"), std::string::npos);
  EXPECT_NE(exe.status().message().find("'reverse'"), std::string::npos);
  EXPECT_NE(exe.status().message().find("feed-sync-all=1"), std::string::npos);

  Graph good = reverse_graph("feed-sync-all=1");
  auto fed = compile_ok(*rt, good);
  // The idle core joins the kernel's one sync_all.
  EXPECT_EQ(count_per_core(fed->report().program_text, "BARRIER"), (std::vector<int>{0, 1}));
  expect_same_as_graph(*rt, good);
}

// A reversal through the workspace with sync_cores, on 2 of the scope's 3 cores.
Graph reverse_cores_graph(const char* kernel, bool tail = true) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {101});
  Tensor t;
  {
    SuperKernelScope s(g, "rev");
    Tensor a = add1(g, x);
    LimitCoreNum two(g, 0, 2);
    t = call_kernel(g, kernel, {a}, {{DType::kF32, {101}, ""}}, {}, "reverse")[0];
    if (tail) t = add1(g, t);
  }
  g.output(t, "y");
  return g;
}

TEST(Schedule, SyncCoresOnFewerCoresNeedsNoFeeding) {
  auto rt = make_runtime(3);
  const Graph g = reverse_cores_graph("test.reverse_cores.f32");
  auto exe = compile_ok(*rt, g);
  // The idle core joins nothing: no feed barriers, no feed-sync-all needed.
  EXPECT_EQ(count_per_core(exe->report().program_text, "BARRIER"), (std::vector<int>{0, 0, 0}));
  const std::vector<float> xs = testing::random_floats(101, 9);
  std::vector<float> want(101);
  for (int i = 0; i < 101; ++i) want[i] = xs[100 - i] + 2.0f;
  CompileOptions jit = sk_opts();
  jit.super_kernel_optimize_options.jit = true;
  CompileOptions checked = sk_opts();
  checked.super_kernel_debug_options.debug_cross_core_sync_check = true;
  for (const CompileOptions& o : {sk_opts(), jit, checked, CompileOptions::for_mode(ExecutionMode::kGraph),
                                  CompileOptions::for_mode(ExecutionMode::kEager)}) {
    auto e = compile_ok(*rt, g, o);
    ASSERT_TRUE(e->set_input("x", xs).is_ok());
    for (int run = 0; run < 3; ++run) {  // later runs count their syncs from the new epoch
      Status s = e->run();
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      std::vector<float> got(101);
      ASSERT_TRUE(e->read("y", got.data(), got.size() * sizeof(float)).is_ok());
      EXPECT_EQ(got, want) << execution_mode_name(o.mode()) << (o.super_kernel_optimize_options.jit ? " jit" : "")
                           << " run " << run;
    }
  }
}

TEST(SuperKernelRun, SyncCoresDeadlockNamesTheOp) {
  auto rt = make_runtime(3, 0.3);
  // No op after it: only core 0's wait inside the kernel can time out.
  auto exe = compile_ok(*rt, reverse_cores_graph("test.hang_cores.f32", false));
  ASSERT_TRUE(exe->set_input("x", std::vector<float>(101, 0.0f)).is_ok());
  Status s = exe->run();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDeadlock);
  EXPECT_NE(s.message().find("sync_cores of op 'reverse'"), std::string::npos) << s.message();
}

// sync_cores where the runtime does not run the cores together: an error naming kernel and op.
TEST(SuperKernelRun, SyncCoresWithoutTheFlagOrFromAPrologueIsAnError) {
  auto rt = make_runtime(2);
  const struct {
    const char* kernel;
    const char* why;
  } cases[] = {{"test.undeclared_cores.f32", "without the SK_SYNCS_CORES flag"},
               {"test.prologue_cores.f32", "from its prologue (only run may)"}};
  for (const auto& c : cases) {
    auto exe = compile_ok(*rt, reverse_cores_graph(c.kernel));
    ASSERT_TRUE(exe->set_input("x", std::vector<float>(101, 0.0f)).is_ok());
    Status s = exe->run();
    ASSERT_FALSE(s.is_ok()) << c.kernel;
    EXPECT_EQ(s.code(), StatusCode::kKernelError) << s.message();
    EXPECT_NE(s.message().find(std::string("kernel '") + c.kernel + "' (op 'reverse')"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
  }
}

TEST(Schedule, DebugCoreNumsNarrowTheSegment) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(g, "narrow", "debug-aic-num=0:debug-aiv-num=1");
    for (int i = 0; i < 3; ++i) t = add1(g, t);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  EXPECT_EQ(exe->report().segments[0].num_cores, 1);
  expect_same_as_graph(*rt, g);

  // Values above the hardware never raise the count.
  Graph wide;
  Tensor u = wide.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(wide, "wide", "debug-aiv-num=64");
    u = add1(wide, u);
  }
  wide.output(u, "y");
  EXPECT_EQ(compile_ok(*rt, wide)->report().segments[0].num_cores, 2);

  // No core left for a cube kernel.
  Graph cube;
  Tensor v = cube.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(cube, "vec_only", "debug-aic-num=0:debug-aiv-num=2");
    v = call_kernel(cube, "test.add1_cube.f32", {v}, {{DType::kF32, {256}, ""}}, {}, "mm_like")[0];
  }
  cube.output(v, "y");
  auto err = rt->compile(cube, sk_opts());
  ASSERT_FALSE(err.has_value());
  EXPECT_NE(err.status().message().find("'mm_like'"), std::string::npos);
  EXPECT_NE(err.status().message().find("scope 'vec_only'"), std::string::npos);
}

TEST(Schedule, ProfilingRecordsOnlyItsScope) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(g, "profiled", "profiling=1");
    t = add1(g, add1(g, t, "p1"), "p2");
  }
  {
    SuperKernelScope s(g, "quiet");
    t = add1(g, t, "q1");
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  ASSERT_TRUE(exe->set_input("x", std::vector<float>(256, 0.0f)).is_ok());
  ASSERT_TRUE(exe->run().is_ok());
  int runs = 0;
  for (const TraceEvent& e : exe->trace()) {
    if (e.kind == TraceKind::kRun) ++runs;
    if (e.kind != TraceKind::kBarrier) {
      EXPECT_TRUE(e.op == "p1" || e.op == "p2") << e.op;
    }
  }
  EXPECT_EQ(runs, 4);  // two ops on two cores
}

TEST(Schedule, TilingSinkRunsOnDeviceOnceItsInputsAreReady) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {300});
  {
    SuperKernelScope s(g, "sink");
    t = add1(g, t, "producer");
    t = call_kernel(g, "test.scale_by_first.f32", {t}, {{DType::kF32, {300}, ""}}, {}, "scaled")[0];
    t = add1(g, t, "consumer");
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const std::string& prog = exe->report().program_text;
  std::vector<int> tilings = count_per_core(prog, "TILING");
  ASSERT_EQ(tilings.size(), 2u);
  EXPECT_EQ(tilings[0] + tilings[1], 1) << prog;
  // Both cores need x[0], which only core 0 produced, and core 1 needs core 0's tiling.
  EXPECT_GE(count_per_core(prog, "WAIT")[1], 1) << prog;
  auto xs = testing::random_floats(300, 4);
  ASSERT_TRUE(exe->set_input("x", xs).is_ok());
  ASSERT_TRUE(exe->run().is_ok());
  auto y = exe->output_f32("y");
  for (size_t i = 0; i < 300; ++i) ASSERT_EQ(y[i], (xs[i] + 1.0f) * (xs[0] + 1.0f) + 1.0f) << i;
  expect_same_as_graph(*rt, g);
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph}) {
    auto other = compile_ok(*rt, g, CompileOptions::for_mode(m));
    ASSERT_TRUE(other->set_input("x", xs).is_ok());
    ASSERT_TRUE(other->run().is_ok());
    EXPECT_EQ(other->output_f32("y"), y) << execution_mode_name(m);
  }
}

// ---- Run time ----------------------------------------------------------------------------------

TEST(SuperKernelRun, KernelErrorStopsEveryCoreAndNamesKernelAndCore) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {512});
  int32_t fail_core = 1;
  std::vector<uint8_t> attrs(4);
  std::memcpy(attrs.data(), &fail_core, 4);
  {
    SuperKernelScope s(g, "s");
    t = add1(g, t);
    t = call_kernel(g, "test.fail.f32", {t}, {{DType::kF32, {512}, ""}}, attrs, "fails")[0];
    // Core 0 would wait for core 1's half of 'fails' here (a reversal reads every byte).
    t = call_kernel(g, "test.reverse_sync.f32", {t}, {{DType::kF32, {512}, ""}}, {}, "after")[0];
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  ASSERT_TRUE(exe->set_input("x", std::vector<float>(512, 0.0f)).is_ok());
  for (int i = 0; i < 3; ++i) {
    Status s = exe->run();
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kKernelError);
    EXPECT_NE(s.message().find("test.fail.f32"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("core 1"), std::string::npos) << s.message();
  }
}

TEST(SuperKernelRun, WatchdogReportsADeadlockInsideASegment) {
  auto rt = make_runtime(2, 0.3);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s");
    t = call_kernel(g, "test.hang.f32", {add1(g, t)}, {{DType::kF32, {64}, ""}}, {}, "stuck")[0];
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  ASSERT_TRUE(exe->set_input("x", std::vector<float>(64, 0.0f)).is_ok());
  Status s = exe->run();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDeadlock);
  EXPECT_NE(s.message().find("segment 0"), std::string::npos) << s.message();
}

TEST(SuperKernelRun, TenThousandLaunchesWithoutAHang) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {1, 32});
  std::vector<float> wv(32 * 32, 0.03f), gv(32, 1.0f);
  Tensor w = g.constant_f32("w", {32, 32}, wv);
  Tensor gamma = g.constant_f32("gamma", {32}, gv);
  Tensor t = x;
  {
    SuperKernelScope s(g, "s");
    for (int i = 0; i < 3; ++i) t = rms_norm(g, matmul(g, t, w), gamma, 1e-6f);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  auto xs = testing::random_floats(32, 1);
  ASSERT_TRUE(exe->set_input("x", xs).is_ok());
  ASSERT_TRUE(exe->run().is_ok());
  const std::vector<float> first = exe->output_f32("y");
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(exe->run().is_ok()) << "launch " << i;
  EXPECT_EQ(exe->output_f32("y"), first);
}

TEST(SuperKernelRun, DumpCoversFusedSubKernelsAndMatchesGraphMode) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {1, 64});
  std::vector<float> wv(64 * 64, 0.02f), gv(64, 1.0f);
  Tensor w = g.constant_f32("w", {64, 64}, wv);
  Tensor gamma = g.constant_f32("gamma", {64}, gv);
  Tensor t = x;
  {
    SuperKernelScope s(g, "s");
    for (int i = 0; i < 3; ++i) t = rms_norm(g, matmul(g, t, w), gamma, 1e-6f);
  }
  g.output(t, "y");
  auto xs = testing::random_floats(64, 2);
  std::vector<std::vector<DumpRecord>> dumps;
  for (ExecutionMode m : {ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    CompileOptions o = CompileOptions::for_mode(m);
    o.dump = true;
    auto exe = compile_ok(*rt, g, o);
    ASSERT_TRUE(exe->set_input("x", xs).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    dumps.push_back(exe->dump());
  }
  ASSERT_EQ(dumps[1].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(dumps[0][i].op, dumps[1][i].op);
    EXPECT_EQ(dumps[0][i].data, dumps[1][i].data) << dumps[0][i].op;
  }
}

TEST(Explain, ShowsSegmentsCutReasonsAndPrograms) {
  auto rt = make_runtime(2);
  Graph g("explained");
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "block");
    t = add1(g, t, "a");
    t = opaque(g, t, "not_fusible");
    t = add1(g, t, "b");
  }
  g.output(t, "y");
  auto text = explain(*rt, g, sk_opts());
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_NE(text->find("segment 0 scope 'block'"), std::string::npos) << *text;
  EXPECT_NE(text->find("OP_UNSUPPORTED at op 'not_fusible'"), std::string::npos) << *text;
  EXPECT_NE(text->find("unfused op 'not_fusible': OP_UNSUPPORTED"), std::string::npos) << *text;
  EXPECT_NE(text->find("core 1:"), std::string::npos) << *text;
  EXPECT_NE(text->find("RUN"), std::string::npos) << *text;
  // Stable text: the same graph and options explain the same way (so outputs can be diffed).
  auto again = explain(*rt, g, sk_opts());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *text);
}

TEST(Explain, PrintAfterShowsThePassesResult) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s");
    t = add1(g, add1(g, t, "first"), "second");
  }
  g.output(t, "y");
  CompileOptions o = sk_opts();
  o.print_after = "segment";
  auto text = explain(*rt, g, o);
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_NE(text->find("-- after segment --"), std::string::npos) << *text;
  EXPECT_NE(text->find("passes: verify "), std::string::npos) << *text;  // timings beside the dumps
  EXPECT_NE(text->find("ops first second"), std::string::npos) << *text;
  o.print_after = "no_such_pass";
  auto bad = explain(*rt, g, o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("'no_such_pass'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("schedule"), std::string::npos);
}

TEST(ProgramText, RoundTripsThroughTheParser) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {1, 64});
  std::vector<float> wv(64 * 64, 0.01f), gv(64, 1.0f);
  Tensor w = g.constant_f32("w", {64, 64}, wv);
  Tensor gamma = g.constant_f32("gamma", {64}, gv);
  Tensor t = x;
  {
    SuperKernelScope s(g, "a", "profiling=1");
    t = rms_norm(g, matmul(g, t, w), gamma, 1e-6f);
    t = call_kernel(g, "test.scale_by_first.f32", {t}, {{DType::kF32, {1, 64}, ""}}, {}, "sink")[0];
  }
  t = halve_on_host(g, t, "host");
  t = opaque(g, t, "unfused");
  g.output(t, "y");
  auto exe = compile_ok(*rt, g);
  const std::string& text = exe->report().program_text;
  Program parsed;
  ASSERT_TRUE(parse_program(text, &parsed).is_ok()) << parse_program(text, &parsed).to_string();
  EXPECT_EQ(print_program(parsed), text);
  ASSERT_EQ(parsed.launches.size(), 2u);
  EXPECT_TRUE(parsed.launches[0].profile);
  EXPECT_EQ(parsed.launches[0].segment, 0);
  EXPECT_EQ(parsed.launches[1].segment, -1);

  Program bad;
  Status s = parse_program("launch 0 \"x\" cores=2\n  core 0:\n    JUMP 3\n", &bad);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("line 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("JUMP"), std::string::npos);
}

// Text that would make a backend index out of range or deadlock is refused, naming the line.
TEST(ProgramText, ParserRefusesStructurallyBrokenPrograms) {
  const std::string head = "launch 0 \"x\" cores=2 ops=1,2\n  group 0 all: 0 1\n  core 0:\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"launch 0 \"x\" cores=2\n  core 0:\n    SIGNAL 1\n", "no barrier group"},
      {"launch 0 \"x\" cores=2\n  group 0 all: 0 5\n", "group core out of range"},
      {"launch 0 \"x\" cores=2\n  group 1 all: 0 1\n", "numbered in order"},
      {head + "    WAIT core 0 >= 1\n", "not another core"},
      {head + "    WAIT core 1 >= 0\n", "count must be >= 1"},
      {head + "    BARRIER group 3\n", "does not declare"},
      {head + "    RUN 7 [0/2]\n", "op 7 is not one of the launch's ops"},
      {head + "    RUN 1 [2/2]\n", "kernel core id out of range"},
      {head + "    TILING 9\n", "op 9 is not one of the launch's ops"},
      {head + "    SIGNAL 0\n", "count >= 1"},
      {"host -1\n", "op index >= 0"},
  };
  for (const auto& [text, needle] : cases) {
    Program p;
    Status s = parse_program(text, &p);
    ASSERT_FALSE(s.is_ok()) << text;
    EXPECT_NE(s.message().find("line "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
  Program ok;
  EXPECT_TRUE(parse_program(head + "    RUN 1 [0/2]\n    SIGNAL 1\n  core 1:\n    WAIT core 0 >= 1\n", &ok).is_ok());
}

}  // namespace
}  // namespace sk
