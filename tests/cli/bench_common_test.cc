// The STREAM triad `superkernel bench` divides by runs on the CPUs a runtime of that many cores
// uses, also after the runtime pinned the calling thread to its first CPU (as the first launch
// does), and the benchmarks' JSON counts the CPUs of the process, not those of that thread.
#include <gtest/gtest.h>

#include <algorithm>

#include "bench_common.h"

namespace sk {
namespace {

TEST(Triad, RunsOnTheRuntimesCpusWhateverTheCallerIsPinnedTo) {
  const std::vector<int> cpus = bench::allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to spread the triad over";
  cpu_set_t saved;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
  // What a runtime's first launch does to the thread that launches.
  ASSERT_TRUE(bench::pin_current_thread(cpus[0]));
  EXPECT_EQ(bench::machine_cores(), static_cast<int>(cpus.size()));
  const int threads = static_cast<int>(std::min<size_t>(cpus.size(), 4));
  std::vector<std::vector<int>> affinity;
  const double gb_per_s = bench::triad_gb_per_s(threads, 1, &affinity);
  ASSERT_EQ(affinity.size(), static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) EXPECT_EQ(affinity[t], std::vector<int>{cpus[t]}) << "triad thread " << t;
  EXPECT_GT(gb_per_s, 0.0);
  pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
}

}  // namespace
}  // namespace sk
