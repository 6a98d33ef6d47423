// Shared helpers for runtime tests: a runtime sized for CI (2 CPUs), deterministic inputs, and
// bitwise comparison of every output across execution modes.
#ifndef SUPERKERNEL_TESTS_COMMON_TEST_RUNTIME_H_
#define SUPERKERNEL_TESTS_COMMON_TEST_RUNTIME_H_

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "superkernel/runtime.h"

namespace sk::testing {

// A runtime for tests: may use more cores than CPUs (tests run side by side on 2-CPU machines),
// threads unpinned, short spins so oversubscribed waits sleep soon.
inline std::shared_ptr<Runtime> make_runtime(int cores, double watchdog_seconds = 60.0, int cube_cores = 0,
                                             LoadPolicy load_policy = LoadPolicy::kAdaptive) {
  RuntimeOptions o;
  o.load_policy = load_policy;
  o.num_cores = cores;
  o.cube_cores = cube_cores;
  o.allow_oversubscribe = true;
  o.pin_threads = false;
  o.spin_us = 20;
  // Small chunks: the random graphs' GEMVs are shared with the helper on one-thread runtimes.
  o.chunk_bytes = 4096;
  o.watchdog_seconds = watchdog_seconds;
#ifdef SK_TEST_KERNELS_PATH
  o.kernel_packages = {SK_TEST_KERNELS_PATH};
#endif
  auto rt = Runtime::create(o);
  if (!rt) throw std::runtime_error(rt.status().to_string());
  return *rt;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Raw bytes of every output (and variable) of an executable after a run.
struct RunResult {
  std::vector<std::string> names;
  std::vector<std::vector<uint8_t>> bytes;
};

inline RunResult collect_outputs(const Executable& exe) {
  RunResult r;
  for (const std::string& name : exe.output_names()) {
    auto t = exe.tensor(name);
    std::vector<uint8_t> buf(t->bytes());
    (void)exe.read(name, buf.data(), buf.size());
    r.names.push_back(name);
    r.bytes.push_back(std::move(buf));
  }
  return r;
}

inline bool bitwise_equal(const RunResult& a, const RunResult& b, std::string* why) {
  if (a.names != b.names) {
    *why = "different output names";
    return false;
  }
  for (size_t i = 0; i < a.names.size(); ++i) {
    if (a.bytes[i].size() != b.bytes[i].size() ||
        std::memcmp(a.bytes[i].data(), b.bytes[i].data(), a.bytes[i].size()) != 0) {
      *why = "output '" + a.names[i] + "' differs";
      return false;
    }
  }
  return true;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_TEST_RUNTIME_H_
