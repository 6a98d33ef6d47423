// Recompute instead of sync (super_kernel_optimize_options.recompute, scope option recompute):
// which ops every core computes whole, which not and why, the per-core programs that result, and
// bit-identical outputs against eager and graph mode at 1, 2 and 3 cores.
#include <gtest/gtest.h>

#include <sstream>

#include "common/program_checks.h"
#include "common/test_runtime.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::compile_ok;
using testing::make_runtime;

CompileOptions sk_opts(bool recompute) {
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  o.super_kernel_optimize_options.recompute = recompute;
  return o;
}

Tensor weight(Graph& g, const std::string& name, Shape shape, uint32_t seed, float scale = 0.2f) {
  return g.constant_f32(name, shape,
                        testing::random_floats(static_cast<size_t>(shape_numel(shape)), seed, -scale, scale));
}
Tensor gamma(Graph& g, const std::string& name, int64_t d, uint32_t seed) {
  return g.constant_f32(name, {d}, testing::random_floats(static_cast<size_t>(d), seed, 0.9f, 1.1f));
}

// matvec -> rms_norm -> matvec, `repeats` times, on `rows` rows of width `d`, in one scope.
Graph matvec_norm_chain(int repeats, int64_t rows = 1, int64_t d = 64, const std::string& scope_options = "") {
  Graph g("matvec_norm_chain");
  Tensor x = g.input("x", DType::kF32, {rows, d});
  Tensor w = weight(g, "w", {d, d}, 1);
  Tensor gm = gamma(g, "gamma", d, 2);
  SuperKernelScope scope(g, "chain", scope_options);
  Tensor t = x;
  for (int i = 0; i < repeats; ++i)
    t = rms_norm(g, matmul(g, t, w, "mv" + std::to_string(i)), gm, 1e-6f, "norm" + std::to_string(i));
  t = matmul(g, t, w, "mv_out");
  g.output(t, "y");
  return g;
}

// A decoder-like block on one token: rms_norm, q/k/v projections, a stand-in for attention, output
// projection, residual, rms_norm, SwiGLU MLP, residual; no scopes (whole-graph fusion).
Graph decoder_block(int64_t d = 64, int64_t ffn = 128) {
  Graph g("decoder_block");
  Tensor x = g.input("x", DType::kF32, {1, d});
  Tensor h = rms_norm(g, x, gamma(g, "attn_norm", d, 1), 1e-6f, "attn_norm");
  Tensor q = matmul(g, h, weight(g, "wq", {d, d}, 2), "q");
  Tensor k = matmul(g, h, weight(g, "wk", {d, d}, 3), "k");
  Tensor v = matmul(g, h, weight(g, "wv", {d, d}, 4), "v");
  Tensor mixed = add(g, softmax(g, mul(g, q, k, "qk"), "probs"), v, "attn");
  Tensor r = add(g, x, matmul(g, mixed, weight(g, "wo", {d, d}, 5), "o"), "residual1");
  Tensor h2 = rms_norm(g, r, gamma(g, "ffn_norm", d, 6), 1e-6f, "ffn_norm");
  Tensor gate = matmul(g, h2, weight(g, "w_gate", {ffn, d}, 7), "gate");
  Tensor up = matmul(g, h2, weight(g, "w_up", {ffn, d}, 8), "up");
  Tensor down = matmul(g, silu_mul(g, gate, up, "act"), weight(g, "w_down", {d, ffn}, 9), "down");
  g.output(add(g, r, down, "residual2"), "y");
  return g;
}

testing::RunResult run(Runtime& rt, const Graph& g, const CompileOptions& o) {
  auto exe = compile_ok(rt, g, o);
  const Shape& shape = g.tensor(g.find_tensor("x")).shape;
  Status s = exe->set_input("x", testing::random_floats(static_cast<size_t>(shape_numel(shape)), 7));
  if (s) s = exe->run();
  if (!s) throw std::runtime_error(s.to_string());
  return testing::collect_outputs(*exe);
}

// Every recompute decision of the compile, one per line.
std::vector<std::string> decisions(const CompileReport& r) {
  std::vector<std::string> out;
  for (const SegmentReport& s : r.segments) out.insert(out.end(), s.recompute.begin(), s.recompute.end());
  return out;
}
int count_containing(const std::vector<std::string>& lines, const std::string& what) {
  int n = 0;
  for (const std::string& l : lines) n += l.find(what) != std::string::npos;
  return n;
}
std::string decision_for(const CompileReport& r, const std::string& op) {
  for (const std::string& l : decisions(r))
    if (l.rfind("op '" + op + "'", 0) == 0) return l;
  return "";
}

// Per core of the printed program, the WAITs between a RUN of `from_kernel` and the next RUN of
// `to_kernel`.
int waits_between(const std::string& program, const std::string& from_kernel, const std::string& to_kernel) {
  std::istringstream in(program);
  std::string line;
  bool armed = false;
  int waits = 0;
  while (std::getline(in, line)) {
    if (line.rfind("  core ", 0) == 0) armed = false;
    if (line.find("RUN ") != std::string::npos) {
      if (line.find("(" + to_kernel + ")") != std::string::npos) armed = false;
      if (line.find("(" + from_kernel + ")") != std::string::npos) armed = true;
    }
    if (armed && line.find("WAIT ") != std::string::npos) ++waits;
  }
  return waits;
}
int count_lines(const std::string& program, const std::string& what) {
  int n = 0;
  for (size_t at = program.find(what); at != std::string::npos; at = program.find(what, at + 1)) ++n;
  return n;
}

void expect_all_modes_identical(const Graph& g) {
  auto one = make_runtime(1);
  const testing::RunResult reference = run(*one, g, CompileOptions::for_mode(ExecutionMode::kEager));
  for (int cores : {1, 2, 3}) {
    auto rt = make_runtime(cores);
    std::string why;
    EXPECT_TRUE(testing::bitwise_equal(reference, run(*rt, g, CompileOptions::for_mode(ExecutionMode::kGraph)), &why))
        << "graph mode, cores " << cores << ": " << why;
    for (bool on : {false, true})
      EXPECT_TRUE(testing::bitwise_equal(reference, run(*rt, g, sk_opts(on)), &why))
          << "superkernel recompute=" << on << ", cores " << cores << ": " << why;
  }
}

// ---- Which ops are recomputed ----------------------------------------------------------------

TEST(Recompute, NormBetweenMatvecsRunsOnEveryCoreAndItsSyncDisappears) {
  auto rt = make_runtime(2);
  Graph g = matvec_norm_chain(1);
  auto on = compile_ok(*rt, g, sk_opts(true));
  const std::string d = decision_for(on->report(), "norm0");
  EXPECT_NE(d.find("recomputed on cores 0,1"), std::string::npos) << d;
  EXPECT_NE(d.find("'mv_out' reads it without a sync"), std::string::npos) << d;
  const std::string& program = on->report().program_text;
  // Core 1 runs its own copy of the norm; the matvec after it runs as two per-core plan ops.
  EXPECT_NE(program.find("norm0@core1 (rms_norm.f32)"), std::string::npos) << program;
  EXPECT_NE(program.find("[1/2]  # mv_out@core1 (matmul.f32)"), std::string::npos) << program;
  EXPECT_NE(program.find("[0/2]  # mv_out (matmul.f32)"), std::string::npos) << program;
  EXPECT_EQ(waits_between(program, "rms_norm.f32", "matmul.f32"), 0) << program;

  auto off = compile_ok(*rt, g, sk_opts(false));
  EXPECT_GT(waits_between(off->report().program_text, "rms_norm.f32", "matmul.f32"), 0) << off->report().program_text;
  // The graph has the same ops either way; the copies live in the arena the report describes.
  EXPECT_EQ(on->report().num_ops, off->report().num_ops);
  EXPECT_GE(on->report().unplanned_bytes, off->report().unplanned_bytes + 64 * 4);
}

TEST(Recompute, ChainOfTheDispatchBenchHasOneSyncPerMatvec) {
  auto rt = make_runtime(2);
  const int repeats = 20;
  Graph g = matvec_norm_chain(repeats);
  auto on = compile_ok(*rt, g, sk_opts(true));
  EXPECT_EQ(count_containing(decisions(on->report()), "recomputed on cores 0,1"), repeats);
  // Each core waits once per matvec, for the other core's rows, and both wait at the same time;
  // without recompute core 1 also waits for the norm core 0 ran after its own wait: two hops in a
  // row on the critical path.
  const std::string& program = on->report().program_text;
  EXPECT_EQ(waits_between(program, "rms_norm.f32", "matmul.f32"), 0) << program;
  EXPECT_EQ(waits_between(program, "matmul.f32", "rms_norm.f32"), 2 * repeats) << program;
  auto off = compile_ok(*rt, g, sk_opts(false));
  EXPECT_EQ(waits_between(off->report().program_text, "rms_norm.f32", "matmul.f32"), repeats)
      << off->report().program_text;
  EXPECT_EQ(waits_between(off->report().program_text, "matmul.f32", "rms_norm.f32"), repeats)
      << off->report().program_text;
  expect_all_modes_identical(g);
}

TEST(Recompute, DecoderBlockIsBitIdenticalAndRecomputesItsNorms) {
  Graph g = decoder_block();
  auto rt = make_runtime(2);
  auto on = compile_ok(*rt, g, sk_opts(true));
  EXPECT_NE(decision_for(on->report(), "attn_norm").find("recomputed on cores 0,1"), std::string::npos)
      << decision_for(on->report(), "attn_norm");
  // The residual add is recomputed, and so is the norm that reads its per-core copies.
  EXPECT_NE(decision_for(on->report(), "residual1").find("recomputed on cores 0,1"), std::string::npos)
      << decision_for(on->report(), "residual1");
  EXPECT_NE(decision_for(on->report(), "ffn_norm").find("recomputed on cores 0,1"), std::string::npos)
      << decision_for(on->report(), "ffn_norm");
  EXPECT_EQ(waits_between(on->report().program_text, "rms_norm.f32", "matmul.f32"), 0) << on->report().program_text;
  expect_all_modes_identical(g);
}

TEST(Recompute, ScopeOptionOverridesTheCompileOption) {
  auto rt = make_runtime(2);
  Graph forced_on = matvec_norm_chain(2, 1, 64, "recompute=1");
  auto a = compile_ok(*rt, forced_on, sk_opts(false));
  EXPECT_EQ(count_containing(decisions(a->report()), "recomputed on"), 2);
  Graph forced_off = matvec_norm_chain(2, 1, 64, "recompute=0");
  auto b = compile_ok(*rt, forced_off, sk_opts(true));
  EXPECT_EQ(decisions(b->report()), std::vector<std::string>{"off: scope option recompute=0"});
  EXPECT_GT(waits_between(b->report().program_text, "rms_norm.f32", "matmul.f32"), 0);
  auto c = compile_ok(*rt, matvec_norm_chain(2), sk_opts(false));
  EXPECT_EQ(decisions(c->report()),
            std::vector<std::string>{"off: option super_kernel_optimize_options.recompute=false"});
}

// ---- Which ops are not, and why ----------------------------------------------------------------

TEST(Recompute, ManyRowsAreTooCostly) {
  auto rt = make_runtime(2);
  Graph g = matvec_norm_chain(1, /*rows=*/64);
  auto exe = compile_ok(*rt, g, sk_opts(true));
  const std::string d = decision_for(exe->report(), "norm0");
  EXPECT_NE(d.find("not recomputed: too costly"), std::string::npos) << d;
  EXPECT_EQ(exe->report().program_text.find("@core1"), std::string::npos);
}

TEST(Recompute, ConsumerReadingOnlyItsOwnCoresRowsHasNoSyncToRemove) {
  auto rt = make_runtime(2);
  Graph g("own_rows");
  Tensor x = g.input("x", DType::kF32, {2, 64});
  Tensor h = matmul(g, x, weight(g, "w", {64, 64}, 1), "mv");
  Tensor n = rms_norm(g, h, gamma(g, "gamma", 64, 2), 1e-6f, "norm");
  g.output(add(g, n, n, "twice"), "y");
  auto exe = compile_ok(*rt, g, sk_opts(true));
  const std::string d = decision_for(exe->report(), "norm");
  EXPECT_NE(d.find("not recomputed: its consumers read only what their own core wrote"), std::string::npos) << d;
  expect_all_modes_identical(g);
}

TEST(Recompute, ElementwiseAfterElementwiseWouldOnlyMoveTheSync) {
  auto rt = make_runtime(2);
  Graph g("elementwise_chain");
  Tensor x = g.input("x", DType::kF32, {1, 64});
  Tensor doubled = add(g, x, x, "double");
  Tensor squared = mul(g, doubled, doubled, "square");
  g.output(matmul(g, squared, weight(g, "w", {64, 64}, 1), "mv"), "y");
  auto exe = compile_ok(*rt, g, sk_opts(true));
  const std::string first = decision_for(exe->report(), "double");
  EXPECT_NE(first.find("not recomputed: its consumers read only what their own core wrote"), std::string::npos)
      << first;
  const std::string second = decision_for(exe->report(), "square");
  EXPECT_NE(second.find("not recomputed: no core waits for another before it"), std::string::npos) << second;
  expect_all_modes_identical(g);
}

TEST(Recompute, InputFromBeforeTheSegmentNeedsNoSyncAtAll) {
  auto rt = make_runtime(2);
  Graph g("input_then_norm");
  Tensor x = g.input("x", DType::kF32, {1, 64});
  Tensor n = rms_norm(g, x, gamma(g, "gamma", 64, 2), 1e-6f, "norm");
  g.output(matmul(g, n, weight(g, "w", {64, 64}, 1), "mv"), "y");
  auto exe = compile_ok(*rt, g, sk_opts(true));
  const std::string d = decision_for(exe->report(), "norm");
  EXPECT_NE(d.find("recomputed on cores 0,1"), std::string::npos) << d;
  EXPECT_EQ(count_lines(exe->report().program_text, "WAIT "), 0) << exe->report().program_text;
  expect_all_modes_identical(g);
}

TEST(Recompute, OutputReadOnAnotherStreamIsNotRecomputed) {
  auto rt = make_runtime(2);
  Graph g("two_streams");
  Stream side = g.create_stream("side");
  Event ready = g.create_event("ready");
  Tensor x = g.input("x", DType::kF32, {1, 64});
  Tensor w = weight(g, "w", {64, 64}, 1);
  Tensor n, y;
  {
    SuperKernelScope scope(g, "main");
    n = rms_norm(g, matmul(g, x, w, "mv"), gamma(g, "gamma", 64, 2), 1e-6f, "norm");
    y = matmul(g, n, w, "mv2");
    g.record(ready);
  }
  {
    SuperKernelScope scope(g, "side");
    StreamScope on(g, side);
    g.wait(ready);
    g.output(add(g, n, n, "side_add"), "z");
  }
  g.output(y, "y");
  auto exe = compile_ok(*rt, g, sk_opts(true));
  const std::string d = decision_for(exe->report(), "norm");
  EXPECT_NE(d.find("not recomputed: its output is read by op 'side_add' on stream 'side'"), std::string::npos) << d;
}

TEST(Recompute, ConsumerReadingThroughAViewKeepsTheSync) {
  auto rt = make_runtime(2);
  Graph g("view_consumer");
  Tensor x = g.input("x", DType::kF32, {1, 64});
  Tensor w = weight(g, "w", {64, 64}, 1);
  Tensor n = rms_norm(g, matmul(g, x, w, "mv"), gamma(g, "gamma", 64, 2), 1e-6f, "norm");
  g.output(matmul(g, g.reshape(n, {1, 64}, "norm_view"), w, "mv2"), "y");
  auto exe = compile_ok(*rt, g, sk_opts(true));
  const std::string d = decision_for(exe->report(), "norm");
  EXPECT_NE(d.find("not recomputed: op 'mv2' reads its output through a view"), std::string::npos) << d;
  expect_all_modes_identical(g);
}

TEST(Recompute, OpsOutsideEverySegmentAreLeftAlone) {
  auto rt = make_runtime(2);
  Graph g("outside");
  Tensor x = g.input("x", DType::kF32, {1, 64});
  Tensor w = weight(g, "w", {64, 64}, 1);
  Tensor h;
  {
    SuperKernelScope scope(g, "first");
    h = matmul(g, x, w, "mv");
  }
  Tensor n = rms_norm(g, h, gamma(g, "gamma", 64, 2), 1e-6f, "norm");  // in no scope: unfused
  Tensor y;
  {
    SuperKernelScope scope(g, "second");
    y = matmul(g, n, w, "mv2");
  }
  g.output(y, "y");
  auto exe = compile_ok(*rt, g, sk_opts(true));
  EXPECT_TRUE(decisions(exe->report()).empty());
  EXPECT_EQ(exe->report().program_text.find("@core"), std::string::npos);
  expect_all_modes_identical(g);
}

TEST(Recompute, OneCoreHasNothingToDecide) {
  auto rt = make_runtime(1);
  auto exe = compile_ok(*rt, matvec_norm_chain(2), sk_opts(true));
  EXPECT_TRUE(decisions(exe->report()).empty());
}

TEST(Recompute, DebugModesTurnItOffAndSayWhy) {
  auto rt = make_runtime(2);
  Graph g = matvec_norm_chain(1);
  CompileOptions dump = sk_opts(true);
  dump.dump = true;
  EXPECT_EQ(decisions(compile_ok(*rt, g, dump)->report()),
            std::vector<std::string>{"off: the data dump compares outputs op by op"});
  CompileOptions checked = sk_opts(true);
  checked.super_kernel_debug_options.debug_cross_core_sync_check = true;
  EXPECT_EQ(decisions(compile_ok(*rt, g, checked)->report()),
            std::vector<std::string>{"off: debug_cross_core_sync_check runs the plan op by op"});
  CompileOptions barriers = sk_opts(true);
  barriers.super_kernel_debug_options.debug_sync_all = true;
  EXPECT_EQ(decisions(compile_ok(*rt, g, barriers)->report()),
            std::vector<std::string>{"off: debug-sync-all puts a barrier after every op"});
}

// ---- explain, options and errors ---------------------------------------------------------------

TEST(Recompute, ExplainPrintsEachDecision) {
  auto rt = make_runtime(2);
  auto text = explain(*rt, matvec_norm_chain(1, 64), sk_opts(true));
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_NE(text->find("  recompute: op 'norm0' (rms_norm.f32): not recomputed: too costly"), std::string::npos)
      << *text;
  auto on = explain(*rt, matvec_norm_chain(1), sk_opts(true));
  ASSERT_TRUE(on.has_value());
  EXPECT_NE(on->find("  recompute: op 'norm0' (rms_norm.f32): recomputed on cores 0,1"), std::string::npos) << *on;
}

TEST(Recompute, OptionAndScopeValuesAreCheckedAndNamed) {
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  EXPECT_FALSE(o.super_kernel_optimize_options.recompute);  // off by default (measured no faster)
  EXPECT_TRUE(o.set("super_kernel_optimize_options.recompute", "true").is_ok());
  EXPECT_TRUE(o.super_kernel_optimize_options.recompute);
  EXPECT_TRUE(o.set("super_kernel_optimize_options.recompute", "false").is_ok());
  EXPECT_FALSE(o.super_kernel_optimize_options.recompute);
  Status bad = o.set("super_kernel_optimize_options.recompute", "maybe");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("super_kernel_optimize_options.recompute"), std::string::npos) << bad.to_string();
  EXPECT_TRUE(o.validate().is_ok());

  auto rt = make_runtime(2);
  auto exe = rt->compile(matvec_norm_chain(1, 1, 64, "recompute=2"), sk_opts(true));
  ASSERT_FALSE(exe.has_value());
  EXPECT_NE(exe.status().message().find("recompute"), std::string::npos) << exe.status().to_string();
  EXPECT_NE(exe.status().message().find("'chain'"), std::string::npos) << exe.status().to_string();
}

TEST(Recompute, PrintAfterShowsTheRewrittenPlanAndMemory) {
  auto rt = make_runtime(2);
  CompileOptions o = sk_opts(true);
  o.print_after = "recompute";
  auto exe = compile_ok(*rt, matvec_norm_chain(1), o);
  const std::string& dump = exe->report().pass_dumps;
  EXPECT_NE(dump.find("-- after recompute --"), std::string::npos) << dump;
  EXPECT_NE(dump.find("norm0@core1 (rms_norm.f32) cores 1"), std::string::npos) << dump;
  EXPECT_NE(dump.find("norm0@core1 @"), std::string::npos) << dump;  // the copy has arena bytes
}

}  // namespace
}  // namespace sk
