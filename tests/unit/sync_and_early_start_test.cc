// Early start (early_start / scope early-start) and sync choice (sync_choice / scope sync-choice):
// where the scheduler puts prologues, waits and barriers, checked on the printed program, and
// that the outputs stay bit-identical to graph mode.
#include <gtest/gtest.h>

#include <sstream>

#include "common/program_checks.h"
#include "common/test_runtime.h"
#include "program/program.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::compile_ok;
using testing::make_runtime;

Tensor unary(Graph& g, const std::string& kernel, Tensor x) {
  return call_kernel(g, kernel, {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, "")[0];
}

// A chain of `n` calls of `kernel` in one scope.
Graph chain(const std::string& kernel, int n, const std::string& scope_options, int64_t numel = 256) {
  Graph g;
  Tensor t = g.input("x", DType::kF32, {numel});
  {
    SuperKernelScope s(g, "chain", scope_options);
    for (int i = 0; i < n; ++i) t = unary(g, kernel, t);
  }
  g.output(t, "y");
  return g;
}

CompileOptions sk_opts() { return CompileOptions::for_mode(ExecutionMode::kSuperKernel); }

// Per launch and core, the instruction words ("RUN 3", "WAIT", "BARRIER group 1", ...).
std::vector<std::vector<std::vector<std::string>>> instrs(const std::string& program) {
  std::vector<std::vector<std::vector<std::string>>> out;
  std::istringstream in(program);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("launch ", 0) == 0) {
      out.emplace_back();
    } else if (line.rfind("  core ", 0) == 0) {
      out.back().emplace_back();
    } else if (line.rfind("    ", 0) == 0) {
      std::string text =
          line.substr(4, line.find("  #") == std::string::npos ? std::string::npos : line.find("  #") - 4);
      std::istringstream ws(text);
      std::string op, arg;
      ws >> op >> arg;
      if (op == "RUN" || op == "PROLOGUE" || op == "TILING") text = op + " " + arg;
      if (op == "WAIT" || op == "SIGNAL") text = op;
      out.back().back().push_back(text);
    }
  }
  return out;
}

int count(const std::vector<std::string>& core, const std::string& prefix) {
  int n = 0;
  for (const std::string& s : core) n += s.rfind(prefix, 0) == 0;
  return n;
}

void expect_same_as_graph(Runtime& rt, const Graph& g, const CompileOptions& o) {
  testing::expect_same_as_graph(rt, g, o, 7);
}

// ---- Early start -------------------------------------------------------------------------------

TEST(EarlyStart, LevelZeroKeepsEachPrologueRightBeforeItsRun) {
  auto rt = make_runtime(2);
  Graph g = chain("test.flip_warm.f32", 4, "");
  auto exe = compile_ok(*rt, g, sk_opts());
  EXPECT_EQ(exe->report().program_text.find("ahead"), std::string::npos) << exe->report().program_text;
  const auto launches = instrs(exe->report().program_text);
  for (const auto& core : launches[0])
    for (size_t i = 0; i < core.size(); ++i)
      if (core[i].rfind("PROLOGUE", 0) == 0) {
        ASSERT_LT(i + 1, core.size());
        EXPECT_EQ(core[i + 1], "RUN" + core[i].substr(8)) << exe->report().program_text;
      }
}

TEST(EarlyStart, LevelOneRunsThePrologueBeforeTheWaitsForTheInputs) {
  auto rt = make_runtime(2);
  for (const char* how : {"scope", "option"}) {
    Graph g = chain("test.flip_warm.f32", 4, std::string(how) == "scope" ? "early-start=1" : "");
    CompileOptions o = sk_opts();
    if (std::string(how) == "option") o.super_kernel_optimize_options.early_start = 1;
    auto exe = compile_ok(*rt, g, o);
    const std::string& text = exe->report().program_text;
    int prologues_before_waits = 0;
    const auto launches = instrs(text);
    for (const auto& core : launches[0]) {
      EXPECT_EQ(count(core, "PROLOGUE"), 4) << text;
      for (size_t i = 0; i + 1 < core.size(); ++i)
        if (core[i].rfind("PROLOGUE", 0) == 0 && core[i + 1] == "WAIT") ++prologues_before_waits;
    }
    // Ops 2..4 consume the other core's half on both cores: their prologues now precede the waits,
    // and say so to the kernel (SK_CORE_AHEAD).
    EXPECT_EQ(prologues_before_waits, 6) << how << "\n" << text;
    size_t ahead = 0;
    for (size_t at = text.find("] ahead"); at != std::string::npos; at = text.find("] ahead", at + 1)) ++ahead;
    EXPECT_EQ(ahead, 6u) << text;
    expect_same_as_graph(*rt, g, o);
  }
}

TEST(EarlyStart, BothBackendsTellAPrologueThatRunsAheadSo) {
  // test.flip_ahead_probe adds 1 to its output where its prologue saw SK_CORE_AHEAD. At level 1 on
  // two cores the first op's prologue is directly followed by its run (nothing to wait for) and
  // the second one's runs before the wait for the other core's half: y = flip(flip(x) + 0) + 1 = x + 1.
  // At level 0 no prologue runs ahead: y = x.
  auto rt = make_runtime(2);
  Graph g = chain("test.flip_ahead_probe.f32", 2, "", 64);
  const std::vector<float> x = testing::random_floats(64, 3);
  for (bool jit : {false, true})
    for (int level : {0, 1}) {
      CompileOptions o = sk_opts();
      o.super_kernel_optimize_options.early_start = level;
      o.super_kernel_optimize_options.jit = jit;
      auto exe = compile_ok(*rt, g, o);
      ASSERT_TRUE(exe->set_input("x", x).is_ok());
      ASSERT_TRUE(exe->run().is_ok());
      const std::vector<float> y = exe->output_f32("y");
      ASSERT_EQ(y.size(), x.size());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(y[i], x[i] + (level == 1 ? 1.0f : 0.0f))
            << "jit " << jit << " level " << level << " element " << i << "\n"
            << exe->report().program_text;
    }
}

TEST(EarlyStart, APrologueRunsOnItsOwnCoreBeforeItsRunAtEveryLevelAndCoreCount) {
  // test.flip_stamped fails unless its prologue stamped the core's workspace slice beforehand.
  for (int cores : {1, 2, 3}) {
    auto rt = make_runtime(cores);
    for (const char* level : {"early-start=0", "early-start=1", "early-start=2"}) {
      Graph g = chain("test.flip_stamped.f32", 5, level, 96);
      expect_same_as_graph(*rt, g, sk_opts());
    }
  }
}

// Two scopes; the second one's first op has a prologue that touches no workspace.
Graph two_scopes(const std::string& second_options, const std::string& second_kernel) {
  Graph g;
  Tensor t = g.input("x", DType::kF32, {256});
  {
    SuperKernelScope s(g, "a");
    t = unary(g, "test.flip.f32", t);
    t = unary(g, "test.flip.f32", t);
  }
  {
    SuperKernelScope s(g, "b", second_options);
    t = unary(g, second_kernel, t);
    t = unary(g, second_kernel, t);
  }
  g.output(t, "y");
  return g;
}

TEST(EarlyStart, LevelTwoStartsTheNextSuperKernelsProloguesInTheLaunchBefore) {
  auto rt = make_runtime(2);
  Graph g = two_scopes("early-start=2", "test.flip_warm.f32");
  auto exe = compile_ok(*rt, g, sk_opts());
  const std::string& text = exe->report().program_text;
  const auto launches = instrs(text);
  ASSERT_EQ(launches.size(), 2u) << text;
  EXPECT_NE(text.find(" early=2"), std::string::npos) << text;  // op 2: scope b's first op
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(launches[0][c].back(), "PROLOGUE 2") << text;
    EXPECT_NE(launches[1][c].front(), "PROLOGUE 2") << text;
    EXPECT_EQ(count(launches[1][c], "PROLOGUE 2"), 0) << text;
  }
  ASSERT_EQ(exe->report().segments.size(), 2u);
  EXPECT_EQ(exe->report().segments[1].schedule,
            "early-start=2 sync-choice=p2p: 2 waits, 2 signals, 0 barriers, 2 prologues ahead of their run, 2 "
            "prologues in the launch before");
  auto text_of_explain = explain(*rt, g, sk_opts());
  ASSERT_TRUE(text_of_explain.has_value());
  EXPECT_NE(text_of_explain->find("  schedule: early-start=2 sync-choice=p2p"), std::string::npos) << *text_of_explain;
  // The text is still the program's serial form.
  Program parsed;
  ASSERT_TRUE(parse_program(text, &parsed).is_ok());
  EXPECT_EQ(print_program(parsed), text);
  expect_same_as_graph(*rt, g, sk_opts());

  // A prologue that sets up its workspace stays in its own launch: the bytes may be in use before.
  Graph stamped = two_scopes("early-start=2", "test.flip_stamped.f32");
  auto exe2 = compile_ok(*rt, stamped, sk_opts());
  EXPECT_EQ(exe2->report().program_text.find(" early="), std::string::npos) << exe2->report().program_text;
  expect_same_as_graph(*rt, stamped, sk_opts());
}

TEST(EarlyStart, ParserRefusesAPrologueOfAnOpNeitherInTheLaunchNorEarly) {
  Program p;
  Status s = parse_program(
      "launch 0 \"x\" cores=1 segment=0 profile=0 ops=1 early=4\n  group 0 all: 0\n  core 0:\n    RUN 1 [0/1]\n"
      "    PROLOGUE 4 [0/1]\n    PROLOGUE 5 [0/1]\n",
      &p);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("op 5"), std::string::npos) << s.to_string();
}

// ---- Sync choice -------------------------------------------------------------------------------

TEST(SyncChoice, CostTurnsAllToAllBoundariesIntoBarriers) {
  auto rt = make_runtime(2);
  Graph p2p = chain("test.flip.f32", 6, "");
  auto a = compile_ok(*rt, p2p, sk_opts());
  const auto p2p_launches = instrs(a->report().program_text);
  for (const auto& core : p2p_launches[0]) {
    EXPECT_EQ(count(core, "WAIT"), 5) << a->report().program_text;
    EXPECT_EQ(count(core, "BARRIER"), 0);
  }
  for (const char* how : {"scope", "option"}) {
    Graph g = chain("test.flip.f32", 6, std::string(how) == "scope" ? "sync-choice=cost" : "");
    CompileOptions o = sk_opts();
    if (std::string(how) == "option") o.super_kernel_optimize_options.sync_choice = SyncChoice::kCost;
    auto exe = compile_ok(*rt, g, o);
    const std::string& text = exe->report().program_text;
    const auto launches = instrs(text);
    for (const auto& core : launches[0]) {
      EXPECT_EQ(count(core, "WAIT"), 0) << text;
      EXPECT_EQ(count(core, "SIGNAL"), 0) << text;
      EXPECT_EQ(count(core, "BARRIER group 0"), 5) << text;
    }
    expect_same_as_graph(*rt, g, o);
  }
}

TEST(SyncChoice, CostKeepsPointToPointWhereOnlySomeProducersMatter) {
  // 96 floats on 3 cores: core 0 reads core 2's third, core 1 its own, core 2 core 0's.
  auto rt = make_runtime(3);
  Graph g = chain("test.flip.f32", 4, "sync-choice=cost", 96);
  auto exe = compile_ok(*rt, g, sk_opts());
  const std::string& text = exe->report().program_text;
  const auto cores = instrs(text)[0];
  EXPECT_EQ(count(cores[0], "WAIT"), 3) << text;
  EXPECT_EQ(count(cores[1], "WAIT"), 0) << text;
  EXPECT_EQ(count(cores[2], "WAIT"), 3) << text;
  for (const auto& core : cores) EXPECT_EQ(count(core, "BARRIER"), 0) << text;
  expect_same_as_graph(*rt, g, sk_opts());
}

TEST(SyncChoice, BarriersNarrowToTheCoresOfTheKernelType) {
  // 3 cores, 1 of them cube: vector kernels run on cores 1-2, so their boundaries are barriers of
  // a "vector" group that core 0 never joins.
  auto rt = make_runtime(3, 60.0, 1);
  Graph g = chain("test.flip.f32", 4, "sync-choice=cost");
  auto exe = compile_ok(*rt, g, sk_opts());
  const std::string& text = exe->report().program_text;
  EXPECT_NE(text.find("group 1 vector: 1 2"), std::string::npos) << text;
  const auto cores = instrs(text)[0];
  EXPECT_TRUE(cores[0].empty()) << text;
  for (int c : {1, 2}) EXPECT_EQ(count(cores[c], "BARRIER group 1"), 3) << text;
  expect_same_as_graph(*rt, g, sk_opts());

  // 3 cores, 2 cube: cube kernels sync in a "cube" group of cores 0-1 (the super kernel spans all
  // three cores because it ends with a vector kernel on core 2).
  auto rt2 = make_runtime(3, 60.0, 2);
  Graph cube;
  {
    Tensor t = cube.input("x", DType::kF32, {256});
    SuperKernelScope s(cube, "mixed", "sync-choice=cost");
    for (int i = 0; i < 3; ++i) t = unary(cube, "test.flip_cube.f32", t);
    cube.output(unary(cube, "test.add1.f32", t), "y");
  }
  auto exe2 = compile_ok(*rt2, cube, sk_opts());
  const std::string& text2 = exe2->report().program_text;
  EXPECT_NE(text2.find("group 1 cube: 0 1"), std::string::npos) << text2;
  expect_same_as_graph(*rt2, cube, sk_opts());
}

TEST(SyncChoice, NoSyncWhereACoreReadsOnlyWhatItWrote) {
  auto rt = make_runtime(2);
  Graph g = chain("test.add1.f32", 5, "sync-choice=cost");
  auto exe = compile_ok(*rt, g, sk_opts());
  const auto launches = instrs(exe->report().program_text);
  for (const auto& core : launches[0]) {
    EXPECT_EQ(count(core, "WAIT"), 0);
    EXPECT_EQ(count(core, "BARRIER"), 0);
  }
}

}  // namespace
}  // namespace sk
