// Helpers for tests that compile graphs and look at the printed per-core programs:
//
//   auto exe = testing::compile_ok(rt, g, opts);                        // throws on a compile error
//   EXPECT_EQ(testing::count_per_core(exe->report().program_text, "WAIT"), (std::vector<int>{0, 0}));
//   testing::expect_same_as_graph(rt, g, opts, /*seed=*/5);             // input "x", bit for bit
#ifndef SUPERKERNEL_TESTS_COMMON_PROGRAM_CHECKS_H_
#define SUPERKERNEL_TESTS_COMMON_PROGRAM_CHECKS_H_

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/test_runtime.h"
#include "superkernel/runtime.h"

namespace sk::testing {

inline std::unique_ptr<Executable> compile_ok(Runtime& rt, const Graph& g, const CompileOptions& o) {
  auto exe = rt.compile(g, o);
  if (!exe) throw std::runtime_error(exe.status().to_string());
  return std::move(*exe);
}

// Counts the instructions starting with `opcode` in the printed program, per core ("  core N:"
// headers, over every launch in order).
inline std::vector<int> count_per_core(const std::string& program, const std::string& opcode) {
  std::vector<int> counts;
  std::istringstream in(program);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  core ", 0) == 0) {
      counts.push_back(0);
    } else if (!counts.empty() && line.find("    " + opcode) == 0) {
      ++counts.back();
    }
  }
  return counts;
}

// Runs `g` (one f32 input named "x", filled from `seed`) in graph mode and with `options`, and
// expects bit-identical outputs.
inline void expect_same_as_graph(Runtime& rt, const Graph& g, const CompileOptions& options, uint32_t seed) {
  auto ref = compile_ok(rt, g, CompileOptions::for_mode(ExecutionMode::kGraph));
  auto other = compile_ok(rt, g, options);
  auto xs = random_floats(static_cast<size_t>(shape_numel(g.tensor(g.find_tensor("x")).shape)), seed);
  ASSERT_TRUE(ref->set_input("x", xs).is_ok());
  ASSERT_TRUE(other->set_input("x", xs).is_ok());
  ASSERT_TRUE(ref->run().is_ok());
  Status s = other->run();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::string why;
  EXPECT_TRUE(bitwise_equal(collect_outputs(*ref), collect_outputs(*other), &why)) << why;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_PROGRAM_CHECKS_H_
