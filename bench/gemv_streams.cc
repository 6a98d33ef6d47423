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
// beside the STREAM triad and a read-only sum on the same buffer (%triad, %read: of those two in the
// same run, interleaved with the variants) and the shared bandwidth bound (%bound: bandwidth.h, the
// best of a read-only sweep and a triad on the same pinned CPUs, measured before the rounds), and one row at a time
// with four FMA chains (rows1x4chains: not the kernels' numerics, the FMA latency hidden inside one row, as a kernel
// without a fixed lane pattern may). Variants run in interleaved rounds (every variant once per round), so that a
// shared machine's drift hits all alike; GB/s is the median, min-max the range over the rounds. Needs AVX2 and FMA.
//
//   build/bench/sk_bench_gemv_streams [--runs N]
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bandwidth.h"
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

// y[n .. n + R) for the R rows at w + n * K. Chains = 1: one 8-lane FMA chain per row, the
// kernels' numerics. Chains = 4 (R = 1 only): four chains over consecutive 8-float steps of the row,
// summed at the end (not the kernels' numerics: the FMA latency hidden within one row).
template <int R, int Chains = 1>
__attribute__((target("avx2,fma"))) void rows_dot(const float* w, const float* x, float* y, int64_t n,
                                                  int64_t prefetch_bytes) {
  __m256 acc[R][Chains];
  for (int j = 0; j < R; ++j) {
    for (int c = 0; c < Chains; ++c) acc[j][c] = _mm256_setzero_ps();
  }
  const float* base = w + n * kK;
  for (int64_t k = 0; k < kK; k += 8 * Chains) {
#pragma GCC unroll 8
    for (int c = 0; c < Chains; ++c) {
      const __m256 xv = _mm256_loadu_ps(x + k + 8 * c);
#pragma GCC unroll 8
      for (int j = 0; j < R; ++j) {
        if (prefetch_bytes > 0 && ((k + 8 * c) & 15) == 0) {
          __builtin_prefetch(reinterpret_cast<const char*>(base + j * kK + k + 8 * c) + prefetch_bytes, 0, 0);
        }
        acc[j][c] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(base + j * kK + k + 8 * c), acc[j][c]);
      }
    }
  }
  for (int j = 0; j < R; ++j) {
    for (int c = 1; c < Chains; ++c) acc[j][0] = _mm256_add_ps(acc[j][0], acc[j][c]);
    alignas(32) float t[8];
    _mm256_store_ps(t, acc[j][0]);
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

// A read-only sum of floats [lo, hi) with four vector accumulators: the read rate without the
// GEMV's structure (no FMA chains, one stream).
__attribute__((target("avx2"))) float read_sum(const float* p, int64_t lo, int64_t hi) {
  __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = lo; i < hi; i += 32) {
    for (int c = 0; c < 4; ++c) s[c] = _mm256_add_ps(s[c], _mm256_loadu_ps(p + i + 8 * c));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
  return t[0] + t[7];
}

// The CPUs the process may use.
const std::vector<int>& cpus() {
  static const std::vector<int> c = sk::bench::allowed_cpus();
  return c;
}

// Runs fn(thread) on `threads` threads pinned to the first CPUs, the calling thread as thread 0.
void run_threads(int threads, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t) {
    ts.emplace_back([&, t] {
      sk::bench::pin_current_thread(cpus()[static_cast<size_t>(t) % cpus().size()]);
      fn(t);
    });
  }
  fn(0);
  for (auto& t : ts) t.join();
}

struct Variant {
  std::string name;
  double bytes;
  std::function<void(int)> fn;  // the share of thread t
};

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
  Buffer w4k(static_cast<size_t>(kN * kK), false);
  Buffer w2m(static_cast<size_t>(kN * kK), true);
  // The triad's arrays (64 MiB each, on 4 KiB pages as std::vector gives them).
  const int64_t tn = int64_t{1} << 24;
  std::vector<float> ta(static_cast<size_t>(tn)), tb(static_cast<size_t>(tn), 1.0f), tc(static_cast<size_t>(tn), 2.0f);
  std::vector<float> sums(64);
  sk::bench::pin_current_thread(cpus()[0]);
  std::printf("%-48s %7s %9s %8s %8s %8s %8s\n", "variant", "threads", "GB/s", "min-max", "%triad", "%read", "%bound");
  for (int threads = 1; threads <= max_threads; ++threads) {
    const sk::bench::BandwidthBound bound = sk::bench::measure_bandwidth_bound(threads, 3);
    std::printf("# %s\n", sk::bench::describe(bound).c_str());
    std::vector<Variant> vs;
    vs.push_back({"stream_triad", 3.0 * static_cast<double>(tn) * sizeof(float), [&, threads](int t) {
                    const int64_t lo = tn * t / threads, hi = tn * (t + 1) / threads;
                    for (int64_t i = lo; i < hi; ++i)
                      ta[static_cast<size_t>(i)] = tb[static_cast<size_t>(i)] + 3.0f * tc[static_cast<size_t>(i)];
                  }});
    for (const Buffer* buf : {&w4k, &w2m}) {
      const std::string pages = buf == &w2m ? "2m" : "4k";
      const float* wd = buf->data;
      vs.push_back({"read_sum_" + pages, bytes, [&, wd, threads](int t) {
                      sums[static_cast<size_t>(t) * 16] =
                          read_sum(wd, kN * kK * t / threads, kN * kK * (t + 1) / threads);
                    }});
      for (int r : {1, 2, 4, 8}) {
        for (bool interleaved : {false, true}) {
          for (int64_t pf : {int64_t{0}, int64_t{1024}, int64_t{4096}}) {
            if (pf > 0 && (r != 8 || interleaved)) continue;  // prefetch distance only on the kernels' shape
            const RowsFn fn = rows_fn(r);
            char name[96];
            std::snprintf(name, sizeof name, "gemv_rows%d_%s_%s_pf%lld", r, interleaved ? "interleaved" : "contiguous",
                          pages.c_str(), static_cast<long long>(pf));
            vs.push_back({name, bytes, [&, wd, fn, r, interleaved, pf, threads](int t) {
                            if (interleaved) {
                              for (int64_t c = 16 * t; c < kN; c += 16 * threads) {
                                for (int64_t n = c; n < c + 16; n += r) fn(wd, x.data(), y.data(), n, pf);
                              }
                            } else {
                              const int64_t lo = kN * t / threads, hi = kN * (t + 1) / threads;
                              for (int64_t n = lo; n < hi; n += r) fn(wd, x.data(), y.data(), n, pf);
                            }
                          }});
          }
        }
      }
      vs.push_back({"gemv_rows1x4chains_contiguous_" + pages + "_pf0", bytes, [&, wd, threads](int t) {
                      const int64_t lo = kN * t / threads, hi = kN * (t + 1) / threads;
                      for (int64_t n = lo; n < hi; ++n) rows_dot<1, 4>(wd, x.data(), y.data(), n, 0);
                    }});
    }
    std::vector<std::function<sk::Status()>> calls;
    for (const Variant& v : vs) {
      calls.push_back([&v, threads]() -> sk::Status {
        run_threads(threads, v.fn);
        return sk::Status::ok();
      });
    }
    auto timed = sk::bench::time_interleaved(calls, 1, runs);
    if (!timed) return 1;
    std::vector<double> gbs(vs.size()), lo(vs.size()), hi(vs.size());
    for (size_t i = 0; i < vs.size(); ++i) {
      const sk::bench::Stats st = sk::bench::stats_of((*timed)[i]);
      gbs[i] = vs[i].bytes / st.median / 1e9;
      lo[i] = vs[i].bytes / st.max / 1e9;
      hi[i] = vs[i].bytes / st.min / 1e9;
    }
    for (size_t i = 0; i < vs.size(); ++i) {
      const bool huge = vs[i].name.find("_2m") != std::string::npos;
      double read_gbs = 0;
      for (size_t j = 0; j < vs.size(); ++j) {
        if (vs[j].name == (huge ? "read_sum_2m" : "read_sum_4k")) read_gbs = gbs[j];
      }
      char range[32];
      std::snprintf(range, sizeof range, "%.1f-%.1f", lo[i], hi[i]);
      std::printf("%-48s %7d %9.1f %8s %8.0f %8.0f %8.0f\n", vs[i].name.c_str(), threads, gbs[i], range,
                  100.0 * gbs[i] / gbs[0], i == 0 ? 0.0 : 100.0 * gbs[i] / read_gbs, 100.0 * gbs[i] / bound.gb_per_s);
    }
    std::fflush(stdout);
  }
  return 0;
}
