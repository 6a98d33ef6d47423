// The JIT backend, code preload and kernel replication: same results as the interpreter bit for
// bit, the same errors (a failing kernel, a deadlock the watchdog catches, the abort of the other
// cores), the PRELOAD instructions of the program, and replicas at distinct addresses. Nothing
// here measures or prints time.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <sstream>

#include "common/chain_graph.h"
#include "common/program_checks.h"
#include "common/test_runtime.h"
#include "packages/kernel_registry.h"
#include "program/program.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::compile_ok;
using testing::count_per_core;
using testing::make_runtime;

Tensor add1(Graph& g, Tensor x, const std::string& name = "") {
  return call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}

CompileOptions options(ExecutionMode mode, bool jit, PreloadCode preload = PreloadCode::kNone, int replicas = 0) {
  CompileOptions o = CompileOptions::for_mode(mode);
  o.super_kernel_optimize_options.jit = jit;
  o.super_kernel_optimize_options.preload_code = preload;
  o.super_kernel_optimize_options.kernel_replicas = replicas;
  return o;
}

std::unique_ptr<Graph> chain(bool scoped) { return testing::decode_chain(scoped); }

std::vector<float> run_chain(Runtime& rt, const Graph& g, const CompileOptions& o, int runs = 3) {
  auto exe = compile_ok(rt, g, o);
  // The JIT really runs the launches (its code exists), or the comparison would prove nothing.
  EXPECT_EQ(exe->report().jit_code_bytes > 0, o.super_kernel_optimize_options.jit && o.mode() != ExecutionMode::kEager);
  EXPECT_TRUE(exe->set_input("x", testing::random_floats(96, 4)).is_ok());
  for (int i = 0; i < runs; ++i) {
    Status s = exe->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return exe->output_f32("y");
}

TEST(Jit, SameOutputsAsTheInterpreterInEveryConfiguration) {
  for (int cores : {1, 2, 3}) {
    auto rt = make_runtime(cores);
    for (bool scoped : {false, true}) {
      auto g = chain(scoped);
      const std::vector<float> want = run_chain(*rt, *g, options(ExecutionMode::kEager, false));
      for (ExecutionMode m : {ExecutionMode::kGraph, ExecutionMode::kSuperKernel})
        for (PreloadCode p : {PreloadCode::kNone, PreloadCode::kPerFunc, PreloadCode::kMax})
          for (int replicas : {0, 2})
            for (bool jit : {false, true})
              ASSERT_EQ(run_chain(*rt, *g, options(m, jit, p, replicas)), want)
                  << execution_mode_name(m) << " jit=" << jit << " preload=" << preload_code_name(p)
                  << " replicas=" << replicas << " cores=" << cores << " scoped=" << scoped;
    }
  }
}

// Runs `g` with and without the JIT; both must fail with the same code and message, every run.
void expect_same_failure(Runtime& rt, const Graph& g, const std::vector<float>& x, StatusCode code,
                         const std::string& must_name) {
  std::string interpreter_message;
  for (bool jit : {false, true}) {
    auto exe = compile_ok(rt, g, options(ExecutionMode::kSuperKernel, jit));
    ASSERT_TRUE(exe->set_input("x", x).is_ok());
    for (int i = 0; i < 3; ++i) {
      Status s = exe->run();
      ASSERT_FALSE(s.is_ok()) << "jit=" << jit;
      EXPECT_EQ(s.code(), code) << s.to_string();
      EXPECT_NE(s.message().find(must_name), std::string::npos) << s.message();
      if (!jit) interpreter_message = s.message();
      EXPECT_EQ(s.message(), interpreter_message) << "jit=" << jit;
    }
  }
}

std::vector<uint8_t> fail_on(int32_t core) {
  std::vector<uint8_t> attrs(4);
  std::memcpy(attrs.data(), &core, 4);
  return attrs;
}

// Core 1's kernel fails while core 0 waits for its signal: core 0 is aborted (not left to the
// watchdog) and the kernel's error comes back, as the interpreter reports it.
TEST(Jit, FailingKernelAbortsTheOtherCoresWithTheInterpretersError) {
  auto rt = make_runtime(2, /*watchdog_seconds=*/60.0);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {512});
  {
    SuperKernelScope s(g, "s");
    t = add1(g, t);
    t = call_kernel(g, "test.fail.f32", {t}, {{DType::kF32, {512}, ""}}, fail_on(1), "fails")[0];
    t = call_kernel(g, "test.reverse_sync.f32", {t}, {{DType::kF32, {512}, ""}}, {}, "after")[0];
  }
  g.output(t, "y");
  expect_same_failure(*rt, g, std::vector<float>(512, 0.0f), StatusCode::kKernelError, "test.fail.f32");
}

TEST(Jit, FailingKernelOnTheLastCoreOfAPlainChain) {
  auto rt = make_runtime(3);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {300});
  {
    SuperKernelScope s(g, "s");
    t = call_kernel(g, "test.fail.f32", {add1(g, t)}, {{DType::kF32, {300}, ""}}, fail_on(2), "fails")[0];
    t = add1(g, t);
  }
  g.output(t, "y");
  expect_same_failure(*rt, g, std::vector<float>(300, 1.0f), StatusCode::kKernelError, "core 2");
}

TEST(Jit, WatchdogTurnsADeadlockIntoTheSameError) {
  auto rt = make_runtime(2, /*watchdog_seconds=*/0.3);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s");
    t = call_kernel(g, "test.hang.f32", {add1(g, t)}, {{DType::kF32, {64}, ""}}, {}, "stuck")[0];
  }
  g.output(t, "y");
  expect_same_failure(*rt, g, std::vector<float>(64, 0.0f), StatusCode::kDeadlock, "stuck");
}

// After failed runs, the next launches of the same executable (new epochs, cleared abort) work.
TEST(Jit, RecoversAfterAFailedRun) {
  auto rt = make_runtime(2);
  auto g = chain(true);
  const std::vector<float> want = run_chain(*rt, *g, options(ExecutionMode::kSuperKernel, false));
  Graph bad;
  Tensor t = bad.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(bad, "s");
    t = call_kernel(bad, "test.fail.f32", {add1(bad, t)}, {{DType::kF32, {64}, ""}}, fail_on(0), "fails")[0];
  }
  bad.output(t, "y");
  auto failing = compile_ok(*rt, bad, options(ExecutionMode::kSuperKernel, true));
  ASSERT_TRUE(failing->set_input("x", std::vector<float>(64, 0.0f)).is_ok());
  auto good = compile_ok(*rt, *g, options(ExecutionMode::kSuperKernel, true));
  ASSERT_TRUE(good->set_input("x", testing::random_floats(96, 4)).is_ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(failing->run().is_ok());
    ASSERT_TRUE(good->run().is_ok());
    EXPECT_EQ(good->output_f32("y"), want);
  }
}

// Tracing runs the interpreter; the JIT executable still traces every instruction.
TEST(Jit, TracedRunsUseTheInterpreterAndRecordEveryRun) {
  auto rt = make_runtime(2);
  auto g = chain(true);
  CompileOptions o = options(ExecutionMode::kSuperKernel, true);
  o.super_kernel_debug_options.debug_op_exec_trace = true;
  auto exe = compile_ok(*rt, *g, o);
  ASSERT_TRUE(exe->set_input("x", testing::random_floats(96, 4)).is_ok());
  ASSERT_TRUE(exe->run().is_ok());
  EXPECT_FALSE(exe->trace().empty());
  EXPECT_EQ(exe->output_f32("y"), run_chain(*rt, *g, options(ExecutionMode::kSuperKernel, false)));
}

TEST(CodePreload, ProgramPreloadsTheNextSubKernelBeforeEachRun) {
  auto rt = make_runtime(2);
  auto g = chain(true);
  auto none = compile_ok(*rt, *g, options(ExecutionMode::kSuperKernel, false));
  EXPECT_EQ(none->report().program_text.find("PRELOAD"), std::string::npos);
  auto per_func = compile_ok(*rt, *g, options(ExecutionMode::kSuperKernel, false, PreloadCode::kPerFunc));
  const std::string& text = per_func->report().program_text;
  // Per core: one at the start, then one before every RUN but the last (the kernels alternate).
  const std::vector<int> runs = count_per_core(text, "RUN"), preloads = count_per_core(text, "PRELOAD");
  ASSERT_EQ(runs.size(), 2u);
  for (size_t c = 0; c < runs.size(); ++c) EXPECT_EQ(preloads[c], runs[c]) << text;
  // The first PRELOAD names the core's first RUN, each later one the RUN after the one it precedes:
  // per core, the PRELOADed ops are the RUN ops in order (consecutive sub-kernels differ here).
  std::istringstream in(text);
  std::string line;
  std::vector<std::vector<std::string>> preloaded, ran;
  const auto op_of = [](const std::string& l, size_t at) { return l.substr(at, l.find(' ', at) - at); };
  while (std::getline(in, line)) {
    if (line.rfind("  core ", 0) == 0) {
      preloaded.emplace_back();
      ran.emplace_back();
    } else if (line.rfind("    PRELOAD ", 0) == 0) {
      EXPECT_NE(line.find(" per-func"), std::string::npos) << line;
      preloaded.back().push_back(op_of(line, 12));
    } else if (line.rfind("    RUN ", 0) == 0) {
      ran.back().push_back(op_of(line, 8));
    }
  }
  EXPECT_EQ(preloaded, ran);
  // The text is the serial form: it parses back and prints the same.
  Program parsed;
  ASSERT_TRUE(parse_program(text, &parsed).is_ok());
  EXPECT_EQ(print_program(parsed), text);
  EXPECT_FALSE(parse_program("launch 0 \"l\" cores=1 ops=0\n  group 0 all: 0\n  core 0:\n    PRELOAD 0 some\n", &parsed)
                   .is_ok());
}

TEST(CodePreload, ScopeOptionOverridesTheGlobalOne) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s", "preload-code=max:func-align=64");
    t = add(g, add1(g, t), t);
  }
  g.output(t, "y");
  auto exe = compile_ok(*rt, g, options(ExecutionMode::kSuperKernel, true));
  const std::string& text = exe->report().program_text;
  EXPECT_NE(text.find("PRELOAD"), std::string::npos) << text;
  EXPECT_NE(text.find(" max"), std::string::npos) << text;
  EXPECT_NE(text.find("func_align=64"), std::string::npos) << text;
  for (const std::string& w : exe->report().warnings) EXPECT_EQ(w.find("func_align"), std::string::npos) << w;
}

// func_align pads every generated per-core function to that boundary: with two cores the second
// function starts at the next 4096-byte boundary at least.
TEST(CodePreload, FuncAlignPadsTheGeneratedFunctions) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  t = add(g, add1(g, t), t);
  g.output(t, "y");
  CompileOptions o = options(ExecutionMode::kSuperKernel, true);
  const size_t plain = compile_ok(*rt, g, o)->report().jit_code_bytes;
  o.super_kernel_optimize_options.func_align = 4096;
  auto aligned = compile_ok(*rt, g, o);
  EXPECT_LT(plain, 4096u);
  EXPECT_GT(aligned->report().jit_code_bytes, 4096u);
  ASSERT_TRUE(aligned->set_input("x", std::vector<float>(64, 1.0f)).is_ok());
  ASSERT_TRUE(aligned->run().is_ok());
  EXPECT_EQ(aligned->output_f32("y"), std::vector<float>(64, 3.0f));
}

TEST(Jit, ExplainNamesTheBackendReplicasAndPreloads) {
  auto rt = make_runtime(2);
  auto g = chain(true);
  auto text = explain(*rt, *g, options(ExecutionMode::kSuperKernel, true, PreloadCode::kMax, 2));
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_NE(text->find("backend: x86-64 JIT"), std::string::npos) << *text;
  EXPECT_NE(text->find("kernel replicas: 2 copies"), std::string::npos) << *text;
  EXPECT_NE(text->find("PRELOAD"), std::string::npos) << *text;
  auto plain = explain(*rt, *g, options(ExecutionMode::kSuperKernel, false));
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->find("backend:"), std::string::npos) << *plain;
  EXPECT_EQ(plain->find("PRELOAD"), std::string::npos) << *plain;
}

TEST(KernelReplicas, CopiesLiveAtDistinctAddresses) {
  KernelRegistry reg;
  ASSERT_TRUE(reg.load_package(builtin_package_path()).is_ok());
  const KernelEntry* add = reg.find("add.f32");
  ASSERT_NE(add, nullptr);
  auto three = reg.replicas(*add, 3);
  ASSERT_TRUE(three.has_value()) << three.status().to_string();
  ASSERT_EQ(three->size(), 3u);
  EXPECT_EQ((*three)[0], add->desc);
  std::set<const void*> entries;
  for (const sk_kernel_desc* d : *three) {
    EXPECT_STREQ(d->name, "add.f32");
    entries.insert(reinterpret_cast<const void*>(d->run));
  }
  EXPECT_EQ(entries.size(), 3u);
  // Asking again reuses the copies already loaded.
  auto again = reg.replicas(*add, 2);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ((*again)[1], (*three)[1]);
}

TEST(KernelReplicas, OptionIsBoundedAndInMemoryPackagesCannotBeCopied) {
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  ASSERT_TRUE(o.set("super_kernel_optimize_options.kernel_replicas", "65").is_ok());
  Status s = o.validate();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("kernel_replicas"), std::string::npos) << s.message();

  KernelRegistry reg;
  static const sk_kernel_desc kDesc = {SK_KERNEL_ABI_VERSION,
                                       "mem.k",
                                       SK_KERNEL_VECTOR,
                                       SK_FUSIBLE,
                                       [](const sk_kernel_args*, const sk_core_ctx*) { return int32_t{SK_OK}; },
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       0};
  static const sk_kernel_package kTable = {SK_KERNEL_ABI_VERSION, "mem", 1, &kDesc};
  ASSERT_TRUE(reg.add_package(&kTable, "in memory").is_ok());
  auto r = reg.replicas(*reg.find("mem.k"), 2);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("not loaded from a file"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace sk
