// Tiling sink inside a fused MoE: the grouped matmuls (tiling-sink kernels whose tiling reads the
// per-expert counts) fuse into the MoE's super kernel with a TILING step in the per-core
// programs; with tiling-sink off (compile option or scope option) each one cuts the segment
// (TILING_SINK) and runs unfused. Every mode and setting gives the same bits, including with
// skewed routing and empty experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/moe_block.h"
#include "common/test_runtime.h"
#include "superkernel/compile.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;

constexpr int64_t kHidden = 32;
const testing::MoeBlockShape kShape{6, 2, 2, 16};

// Expert 0 draws every token, experts 3 and 4 and zero expert 7 draw none; the second choice
// spreads over experts 1, 2, 5 and zero expert 6.
const std::vector<float> kSkewedBias = {8.0f, 0.0f, 0.0f, -30.0f, -30.0f, 0.0f, 0.0f, -30.0f};

// x [tokens, kHidden] -> the MoE block in scope "moe" (with `scope_options`) -> y, and counts.
// With `moe_stream`, the block runs on stream "moe" beside an op of the main stream, both scopes
// stream-fused, and a main-stream add joins them.
Graph build_moe(int64_t tokens, const std::string& scope_options = "", bool moe_stream = false) {
  Graph g("moe");
  std::mt19937 rng(5);
  Tensor x = g.input("x", DType::kF32, {tokens, kHidden});
  testing::MoeBlockWeights w = testing::moe_block_weights(g, kShape, kHidden, rng, kSkewedBias);
  Stream side = moe_stream ? g.create_stream("moe") : g.current_stream();
  Event x_ready = g.create_event("x_ready"), moe_done = g.create_event("moe_done");
  if (moe_stream) g.record(x_ready);
  testing::MoeBlockOutput moe;
  {
    SuperKernelScope scope(g, "moe", scope_options);
    StreamScope on(g, side);
    if (moe_stream) g.wait(x_ready);
    moe = testing::moe_block(g, x, kShape, w, "moe.");
    if (moe_stream) g.record(moe_done);
  }
  Tensor y = moe.out;
  if (moe_stream) {
    SuperKernelScope scope(g, "main", "stream-fusion=1");
    Tensor main = softmax(g, x, "main.softmax");
    g.wait(moe_done);
    y = add(g, main, moe.out, "main.join");
  }
  g.output(y, "y");
  g.output(moe.counts, "counts");
  return g;
}

CompileOptions superkernel(bool tiling_sink) {
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  o.super_kernel_optimize_options.tiling_sink = tiling_sink;
  return o;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The printed program split into launches: each launch's header line and its instructions.
std::vector<std::string> launches_of(const std::string& program_text) {
  std::vector<std::string> out;
  std::istringstream in(program_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("launch ", 0) == 0) out.emplace_back();
    if (!out.empty()) out.back() += line + "\n";
  }
  return out;
}

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::vector<std::string> names_of(const Graph& g, const std::vector<int32_t>& ops) {
  std::vector<std::string> names;
  for (int32_t op : ops) names.push_back(g.op(op).name);
  return names;
}

TEST(TilingSink, FusedMoeTilesInsideTheSuperKernel) {
  auto rt = make_runtime(2);
  Graph g = build_moe(4);
  auto exe = rt->compile(g, superkernel(true));
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  const CompileReport& r = (*exe)->report();
  ASSERT_EQ(r.segments.size(), 1u);
  EXPECT_EQ(names_of(g, r.segments[0].ops),
            (std::vector<std::string>{"moe.router_logits", "moe.router", "moe.dispatch", "moe.gate_up", "moe.act",
                                      "moe.down", "moe.combine"}));
  EXPECT_TRUE(r.unfused.empty());
  EXPECT_EQ(r.num_launches, 1u);
  // One TILING per grouped matmul, on its first core, inside the one launch.
  const std::vector<std::string> launches = launches_of(r.program_text);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(count_of(launches[0], "    TILING "), 2) << launches[0];
  EXPECT_TRUE(contains(launches[0], "TILING 3  # moe.gate_up (grouped_matmul.f32)")) << launches[0];
  EXPECT_TRUE(contains(launches[0], "TILING 5  # moe.down (grouped_matmul.f32)")) << launches[0];
}

TEST(TilingSink, OffCutsTheSegmentAtEachTilingSinkOp) {
  auto rt = make_runtime(2);
  Graph g = build_moe(4);
  auto exe = rt->compile(g, superkernel(false));
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  const CompileReport& r = (*exe)->report();
  ASSERT_EQ(r.segments.size(), 3u);
  EXPECT_EQ(names_of(g, r.segments[0].ops),
            (std::vector<std::string>{"moe.router_logits", "moe.router", "moe.dispatch"}));
  EXPECT_EQ(names_of(g, r.segments[1].ops), (std::vector<std::string>{"moe.act"}));
  EXPECT_EQ(names_of(g, r.segments[2].ops), (std::vector<std::string>{"moe.combine"}));
  EXPECT_EQ(r.segments[0].cut, CutReason::kTilingSink);
  EXPECT_EQ(g.op(r.segments[0].cut_op).name, "moe.gate_up");
  EXPECT_EQ(r.segments[1].cut, CutReason::kTilingSink);
  EXPECT_EQ(g.op(r.segments[1].cut_op).name, "moe.down");
  EXPECT_EQ(r.segments[2].cut, CutReason::kGraphEnd);
  ASSERT_EQ(r.unfused.size(), 2u);
  for (const UnfusedOp& u : r.unfused) EXPECT_EQ(u.reason, CutReason::kTilingSink);
  // Each grouped matmul runs in a launch of its own, its TILING first, then a barrier; the
  // super kernels have no TILING left.
  const std::vector<std::string> launches = launches_of(r.program_text);
  ASSERT_EQ(launches.size(), 5u);
  EXPECT_EQ(r.num_launches, 5u);
  for (size_t i : {0u, 2u, 4u}) {
    EXPECT_TRUE(contains(launches[i], "\"segment ")) << launches[i];
    EXPECT_FALSE(contains(launches[i], "TILING")) << launches[i];
  }
  EXPECT_TRUE(contains(launches[1], "graph ops from 'moe.gate_up'")) << launches[1];
  EXPECT_TRUE(contains(launches[1], "TILING 3  # moe.gate_up (grouped_matmul.f32)\n    BARRIER group 0"))
      << launches[1];
  EXPECT_TRUE(contains(launches[3], "graph ops from 'moe.down'")) << launches[3];
  EXPECT_TRUE(contains(launches[3], "TILING 5  # moe.down (grouped_matmul.f32)\n    BARRIER group 0")) << launches[3];

  auto text = explain(*rt, g, superkernel(false));
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_TRUE(contains(*text,
                       "cut TILING_SINK at op 'moe.gate_up' (op 'moe.gate_up' (kernel 'grouped_matmul.f32') is "
                       "a tiling-sink kernel and super_kernel_optimize_options.tiling_sink is false"))
      << *text;
  EXPECT_TRUE(contains(*text, "unfused op 'moe.down': TILING_SINK\n")) << *text;
}

TEST(TilingSink, ScopeOptionOverridesTheCompileOption) {
  auto rt = make_runtime(2);
  Graph off = build_moe(4, "tiling-sink=0");
  auto cut = rt->compile(off, superkernel(true));
  ASSERT_TRUE(cut.has_value()) << cut.status().to_string();
  ASSERT_EQ((*cut)->report().segments.size(), 3u);
  EXPECT_EQ((*cut)->report().segments[0].cut, CutReason::kTilingSink);
  EXPECT_TRUE(contains((*cut)->report().segments[0].cut_detail, "scope 'moe' has tiling-sink=0"))
      << (*cut)->report().segments[0].cut_detail;

  // The cut is asked for, not an op that cannot fuse: strict-scope-check leaves it alone.
  Graph strict = build_moe(4, "tiling-sink=0:strict-scope-check=abort");
  auto strict_cut = rt->compile(strict, superkernel(true));
  ASSERT_TRUE(strict_cut.has_value()) << strict_cut.status().to_string();
  EXPECT_EQ((*strict_cut)->report().segments[0].cut, CutReason::kTilingSink);

  Graph on = build_moe(4, "tiling-sink=1");
  auto fused = rt->compile(on, superkernel(false));
  ASSERT_TRUE(fused.has_value()) << fused.status().to_string();
  EXPECT_EQ((*fused)->report().segments.size(), 1u);
  EXPECT_TRUE((*fused)->report().unfused.empty());
}

TEST(TilingSink, InvalidScopeValueNamesTheScopeAndOptionInEveryMode) {
  auto rt = make_runtime(1);
  Graph g = build_moe(2, "tiling-sink=yes");
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto exe = rt->compile(g, CompileOptions::for_mode(mode));
    ASSERT_FALSE(exe.has_value()) << execution_mode_name(mode);
    const std::string msg = exe.status().message();
    EXPECT_TRUE(contains(msg, "scope 'moe' option 'tiling-sink': invalid value 'yes' (expected 0 or 1)")) << msg;
  }
}

// eager, graph, superkernel with tiling sink on and off: the same bits at 1, 2 and 3 cores, for
// token counts that leave experts empty and pile every token on expert 0.
TEST(TilingSink, SkewedAndEmptyExpertsAreBitIdenticalInEveryModeAndSetting) {
  std::vector<std::shared_ptr<Runtime>> runtimes = {make_runtime(1), make_runtime(2), make_runtime(3)};
  for (bool moe_stream : {false, true}) {
    for (int64_t tokens : {1, 3, 8, 17}) {
      Graph g = build_moe(tokens, moe_stream ? "stream-fusion=1" : "", moe_stream);
      const std::vector<float> x = testing::random_floats(static_cast<size_t>(tokens * kHidden), 11);
      auto run = [&](Runtime& rt, const CompileOptions& o) {
        auto exe = rt.compile(g, o);
        if (!exe) throw std::runtime_error(exe.status().to_string());
        Status s = (*exe)->set_input("x", x);
        if (s) s = (*exe)->run();
        if (!s) throw std::runtime_error(s.to_string());
        return testing::collect_outputs(**exe);
      };
      const testing::RunResult reference = run(*runtimes[0], CompileOptions::for_mode(ExecutionMode::kEager));
      // Guard against a vacuous comparison: the routing is as skewed as intended.
      const auto names = reference.names;
      const size_t at = static_cast<size_t>(std::find(names.begin(), names.end(), "counts") - names.begin());
      ASSERT_LT(at, names.size());
      std::vector<int32_t> counts(static_cast<size_t>(kShape.experts));
      ASSERT_EQ(reference.bytes[at].size(), counts.size() * sizeof(int32_t));
      std::memcpy(counts.data(), reference.bytes[at].data(), reference.bytes[at].size());
      EXPECT_EQ(counts[0], tokens);
      EXPECT_EQ(counts[3], 0);
      EXPECT_EQ(counts[4], 0);
      for (auto& rt : runtimes) {
        const std::string where = "tokens " + std::to_string(tokens) + (moe_stream ? " moe stream" : "") + " cores " +
                                  std::to_string(rt->num_cores());
        std::string why;
        EXPECT_TRUE(testing::bitwise_equal(reference, run(*rt, CompileOptions::for_mode(ExecutionMode::kGraph)), &why))
            << where << " graph: " << why;
        for (bool sink : {true, false}) {
          CompileOptions o = superkernel(sink);
          auto exe = rt->compile(g, o);
          ASSERT_TRUE(exe.has_value()) << where << ": " << exe.status().to_string();
          // With the sink on the block is one super kernel (beside the main stream's op when
          // stream-fused); off, the two grouped matmuls run outside it.
          EXPECT_EQ((*exe)->report().unfused.size(), sink ? 0u : 2u) << where;
          if (moe_stream && sink) {
            ASSERT_EQ((*exe)->report().segments.size(), 1u) << where;
            EXPECT_EQ((*exe)->report().segments[0].scope, "moe + main") << where;
          }
          EXPECT_TRUE(testing::bitwise_equal(reference, run(*rt, o), &why))
              << where << " superkernel tiling_sink=" << sink << ": " << why;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sk
