// The bandwidth bound every benchmark reports its weight-streaming figures against
// (bench/bandwidth.h): the larger of the read-only sweep's best point and the triad, bytes counted
// as STREAM counts them, every measurement on the runtime's CPUs. No timing is asserted: only
// that the rules hold for whatever the machine measured.
#include <gtest/gtest.h>

#include <algorithm>

#include "bandwidth.h"

namespace sk::bench {
namespace {

TEST(BandwidthBound, IsTheLargerOfTheReadSweepAndTheTriad) {
  EXPECT_EQ(bound_of(30.0, 25.0), 30.0);
  EXPECT_EQ(bound_of(20.0, 25.0), 25.0);
  EXPECT_EQ(best_read({{64u << 20, false, 19.0}, {64u << 20, true, 28.5}, {256u << 20, false, 27.0}}), 28.5);
  EXPECT_EQ(best_read({}), 0.0);
}

TEST(BandwidthBound, CountsBytesAsStreamDoes) {
  // A triad over n floats per array moves 3 arrays; a read pass its buffer once.
  EXPECT_EQ(triad_bytes(size_t{1} << 24), 3.0 * (size_t{1} << 24) * 4);
  EXPECT_EQ(read_bytes(size_t{256} << 20), static_cast<double>(size_t{256} << 20));
  EXPECT_DOUBLE_EQ(gb_per_s(3e9, 0.1), 30.0);
  BandwidthBound b;
  b.gb_per_s = 30.0;
  EXPECT_DOUBLE_EQ(percent_of_bound(1.5e9, 0.1, b), 50.0);
  b.gb_per_s = 0;
  EXPECT_EQ(percent_of_bound(1.5e9, 0.1, b), 0.0);
}

TEST(BandwidthBound, MeasuredBoundIsTheMaxOfItsParts) {
  const int threads = std::min(2, machine_cores());
  const BandwidthBound b = measure_bandwidth_bound(threads, 1);
  ASSERT_EQ(b.reads.size(), 8u);  // 2x and 8x the LLC, 4 KiB and huge pages, 1 and 4 streams
  for (const ReadPoint& r : b.reads) {
    EXPECT_GT(r.footprint_bytes, llc_bytes()) << "a read point inside the LLC measures the cache";
    EXPECT_GT(r.gb_per_s, 0.0);
  }
  EXPECT_EQ(b.read_gb_per_s, best_read(b.reads));
  EXPECT_EQ(b.gb_per_s, std::max(b.read_gb_per_s, b.triad_gb_per_s));
  EXPECT_EQ(b.threads, threads);
  EXPECT_STREQ(b.source(), b.read_gb_per_s >= b.triad_gb_per_s ? "read" : "triad");
}

TEST(BandwidthBound, ReadSweepRunsOnTheRuntimesCpusWhateverTheCallerIsPinnedTo) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to spread the sweep over";
  cpu_set_t saved;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
  ASSERT_TRUE(pin_current_thread(cpus[0]));  // what a runtime's first launch does to its caller
  std::vector<std::vector<int>> affinity;
  const double gbs = read_sweep_point(2, 1, size_t{8} << 20, false, &affinity);
  ASSERT_EQ(affinity.size(), 2u);
  for (int t = 0; t < 2; ++t) EXPECT_EQ(affinity[t], std::vector<int>{cpus[t]}) << "read thread " << t;
  EXPECT_GT(gbs, 0.0);
  pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
}

}  // namespace
}  // namespace sk::bench
