// sk_bench_gemv_streams: which memory access pattern lets an f32 GEMV read its weights fastest,
// at 1 and 2 threads, side by side in one run: the question behind a GEMV that streams below a
// read-only sum of the same bytes. Each variant computes y = W x over W [8192, 8192] f32 (256 MiB,
// beyond the LLC) with one 8-lane FMA chain per output row, as matmul.f32's AVX2 tiles do, and
// varies one thing at a time:
//
//   rows/tile R   1, 2, 4, 8: R weight rows read side by side (R concurrent streams per thread)
//   split         contiguous (thread t takes rows [tN/T, (t+1)N/T), as the kernels split N) or
//                 interleaved (chunks of 16 rows dealt round-robin, as llama.cpp's chunking)
//   pages         4 KiB or transparent huge pages (MADV_HUGEPAGE)
//   prefetch      software prefetch D bytes ahead on every stream (0: hardware prefetch only)
//
// beside the STREAM triad and a read-only sum on the same buffer. Needs AVX2 and FMA.
//
//   build/bench/sk_bench_gemv_streams [--runs N]
#include <immintrin.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"

namespace {

constexpr int64_t kN = 8192;
constexpr int64_t kK = 8192;

struct Buffer {
  float* data = nullptr;
  size_t bytes = 0;
  Buffer(size_t n, bool huge) : bytes(n * sizeof(float)) {
    void* p = nullptr;
    if (posix_memalign(&p, size_t{2} << 20, bytes) != 0) std::abort();
    madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    data = static_cast<float*>(p);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % 13) * 0.01f;
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// y[n .. n + R) for the R rows at w + n * K.
template <int R>
__attribute__((target("avx2,fma"))) void rows_dot(const float* w, const float* x, float* y, int64_t n,
                                                  int64_t prefetch_bytes) {
  __m256 acc[R];
  for (int j = 0; j < R; ++j) acc[j] = _mm256_setzero_ps();
  const float* base = w + n * kK;
  for (int64_t k = 0; k < kK; k += 8) {
    const __m256 xv = _mm256_loadu_ps(x + k);
#pragma GCC unroll 8
    for (int j = 0; j < R; ++j) {
      if (prefetch_bytes > 0 && (k & 15) == 0) {
        __builtin_prefetch(reinterpret_cast<const char*>(base + j * kK + k) + prefetch_bytes, 0, 0);
      }
      acc[j] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(base + j * kK + k), acc[j]);
    }
  }
  for (int j = 0; j < R; ++j) {
    alignas(32) float t[8];
    _mm256_store_ps(t, acc[j]);
    y[n + j] = ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
  }
}

using RowsFn = void (*)(const float*, const float*, float*, int64_t, int64_t);

RowsFn rows_fn(int r) {
  switch (r) {
    case 1:
      return rows_dot<1>;
    case 2:
      return rows_dot<2>;
    case 4:
      return rows_dot<4>;
    default:
      return rows_dot<8>;
  }
}

// The CPUs the process may use (the main thread is pinned only while it measures, so that the
// triad, which reads the affinity too, sees them all).
const std::vector<int>& cpus() {
  static const std::vector<int> c = sk::bench::allowed_cpus();
  return c;
}

// Runs fn(thread) on `threads` pinned threads at once; seconds per call (median of runs).
double time_threads(int threads, int runs, const std::function<void(int)>& fn) {
  auto once = [&] {
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t) {
      ts.emplace_back([&, t] {
        sk::bench::pin_current_thread(cpus()[static_cast<size_t>(t) % cpus().size()]);
        fn(t);
      });
    }
    fn(0);
    for (auto& t : ts) t.join();
  };
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c : cpus()) CPU_SET(c, &all);
  sk::bench::pin_current_thread(cpus()[0]);
  const double seconds = sk::bench::stats_of(sk::bench::time_runs(once, 1, runs)).median;
  pthread_setaffinity_np(pthread_self(), sizeof(all), &all);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 9;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "sk_bench_gemv_streams needs AVX2 and FMA\n");
    return 1;
  }
  const int max_threads = std::min<int>(2, static_cast<int>(cpus().size()));
  std::vector<float> x(kK, 0.5f);
  std::vector<float> y(kN);
  const double bytes = static_cast<double>(kN) * kK * sizeof(float);
  std::printf("%-44s %7s %9s %8s\n", "variant", "threads", "GB/s", "%triad");
  for (int threads = 1; threads <= max_threads; ++threads) {
    const double triad = sk::bench::triad_gb_per_s(threads, runs);
    std::printf("%-44s %7d %9.1f %8s\n", "stream_triad", threads, triad, "100");
    for (bool huge : {false, true}) {
      Buffer w(static_cast<size_t>(kN * kK), huge);
      const std::string pages = huge ? "2m" : "4k";
      std::vector<float> sums(static_cast<size_t>(threads) * 16);
      const double read = time_threads(threads, runs, [&](int t) {
        const int64_t lo = kN * kK * t / threads, hi = kN * kK * (t + 1) / threads;
        float s[8] = {};
        for (int64_t i = lo; i < hi; i += 8) {
          for (int j = 0; j < 8; ++j) s[j] += w.data[i + j];
        }
        sums[static_cast<size_t>(t) * 16] = s[0] + s[7];
      });
      std::printf("%-44s %7d %9.1f %8.0f\n", ("read_sum_" + pages).c_str(), threads, bytes / read / 1e9,
                  100.0 * bytes / read / 1e9 / triad);
      for (int r : {1, 2, 4, 8}) {
        for (bool interleaved : {false, true}) {
          for (int64_t pf : {int64_t{0}, int64_t{1024}, int64_t{4096}}) {
            if (pf > 0 && (r != 8 || interleaved)) continue;  // prefetch distance only on the kernels' shape
            const RowsFn fn = rows_fn(r);
            const double sec = time_threads(threads, runs, [&](int t) {
              if (interleaved) {
                for (int64_t c = 16 * t; c < kN; c += 16 * threads) {
                  for (int64_t n = c; n < c + 16; n += r) fn(w.data, x.data(), y.data(), n, pf);
                }
              } else {
                const int64_t lo = kN * t / threads, hi = kN * (t + 1) / threads;
                for (int64_t n = lo; n < hi; n += r) fn(w.data, x.data(), y.data(), n, pf);
              }
            });
            char name[96];
            std::snprintf(name, sizeof name, "gemv_rows%d_%s_%s_pf%lld", r, interleaved ? "interleaved" : "contiguous",
                          pages.c_str(), static_cast<long long>(pf));
            std::printf("%-44s %7d %9.1f %8.0f\n", name, threads, bytes / sec / 1e9, 100.0 * bytes / sec / 1e9 / triad);
            std::fflush(stdout);
          }
        }
      }
    }
  }
  return 0;
}
