// oneDNN's matmul on the shape of a benchmark case, for the comparison column of
// sk_bench_kernels (built instead of onednn_absent.cc when CMake finds oneDNN).
//
// The comparison is set up the way oneDNN is meant to be used for inference: the weights are
// reordered once, outside the timing, into the layout the primitive asks for (format_tag::any),
// and the primitive is created once. What it computes differs from our kernels where oneDNN
// needs it to:
//   "f32":  f32 x f32 -> f32, the same operation.
//   "bf16": bf16 activations (oneDNN has no f32 x bf16 matmul); ours take f32 activations.
//   "f16":  f16 activations likewise (oneDNN 2.6 has f16 matmul only on CPUs with AVX512_FP16).
//   "s8":   u8 activations and s8 weights, s32 accumulation, one f32 output scale per column
//           (oneDNN 2.x cannot scale per row too, which our W8A8 kernel does). u8 because that
//           is what oneDNN's int8 kernels are built for: with s8 activations oneDNN 2.6 on an
//           AVX2 CPU still reports gemm:jit but ran 8-40x slower here.
// Debian's oneDNN uses OpenMP: `threads` is applied with omp_set_num_threads on the calling
// thread, which is the thread that executes the primitive.
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <pthread.h>
#include "bench_common.h"

#include "kernel_bench.h"
#include "util/half.h"

namespace sk::bench {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Random bytes of a plausible value range for the data type, so the timing sees no denormals.
void fill(const dnnl::memory& m, dt type, uint32_t seed) {
  const size_t bytes = m.get_desc().get_size();
  auto* p = static_cast<uint8_t*>(m.get_data_handle());
  std::mt19937 rng(seed);
  switch (type) {
    case dt::f32: {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (size_t i = 0; i + 4 <= bytes; i += 4) {
        const float v = u(rng);
        std::memcpy(p + i, &v, 4);
      }
      break;
    }
    case dt::f16: {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (size_t i = 0; i + 2 <= bytes; i += 2) {
        const uint16_t h = f32_to_f16(u(rng));
        std::memcpy(p + i, &h, 2);
      }
      break;
    }
    case dt::bf16: {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (size_t i = 0; i + 2 <= bytes; i += 2) {
        const float v = u(rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const auto h = static_cast<uint16_t>(bits >> 16);
        std::memcpy(p + i, &h, 2);
      }
      break;
    }
    default:
      for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng() % 200 + 28);
      break;
  }
}

struct Setup {
  dnnl::matmul::primitive_desc pd;
  dt src;
};

// The primitive descriptor for (src type, weight type), or none when oneDNN has no
// implementation for this CPU.
bool make_pd(const dnnl::engine& eng, const OneDnnShape& s, dt src, dt wei, Setup* out) {
  try {
    const dnnl::memory::desc src_md({s.m, s.k}, src, tag::ab);
    const dnnl::memory::desc wei_md({s.k, s.n}, wei, tag::any);
    const dnnl::memory::desc dst_md({s.m, s.n}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    if (wei == dt::s8) attr.set_output_scales(1 << 1, std::vector<float>(static_cast<size_t>(s.n), 0.01f));
    const dnnl::matmul::desc d(src_md, wei_md, dst_md);
    out->pd = dnnl::matmul::primitive_desc(d, attr, eng);
    out->src = src;
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

namespace {
double measure(const OneDnnShape& s, int threads, int runs, std::string* why);
}  // namespace

// The benchmark's own thread is pinned to the first CPU by the superkernel runtime, and OpenMP
// threads inherit the affinity of the thread that starts them: started from there, oneDNN's
// whole pool would share one CPU. So oneDNN runs on a thread of its own, free to use every CPU.
double onednn_matmul_seconds(const OneDnnShape& s, int threads, int runs, std::string* why) {
  double seconds = -1.0;
  std::thread worker([&] {
    cpu_set_t all;
    CPU_ZERO(&all);
    const int n = static_cast<int>(std::thread::hardware_concurrency());
    for (int c = 0; c < n; ++c) CPU_SET(c, &all);
    pthread_setaffinity_np(pthread_self(), sizeof(all), &all);
    seconds = measure(s, threads, runs, why);
  });
  worker.join();
  return seconds;
}

namespace {

double measure(const OneDnnShape& s, int threads, int runs, std::string* why) {
  try {
    omp_set_num_threads(threads);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    dt wei = dt::f32;
    dt src = dt::f32;
    if (s.weights == "bf16") {
      wei = src = dt::bf16;
    } else if (s.weights == "f16") {
      wei = src = dt::f16;
    } else if (s.weights == "s8") {
      wei = dt::s8;
      src = dt::u8;
    } else if (s.weights != "f32") {
      *why = "unknown weight type '" + s.weights + "'";
      return -1.0;
    }
    Setup setup;
    if (!make_pd(eng, s, src, wei, &setup)) {
      *why = "oneDNN has no " + s.weights + " matmul for this CPU";
      return -1.0;
    }
    const dnnl::matmul::primitive_desc& pd = setup.pd;
    // Which implementation oneDNN picked says whether the comparison is fair (a "ref"
    // implementation is not what anyone would deploy): once per type and M.
    static std::set<std::string> told;
    const std::string key = s.weights + "/" + std::to_string(s.m);
    if (told.insert(key).second) {
      std::fprintf(stderr, "oneDNN %s matmul %lldx%lldx%lld (%s activations): %s\n", s.weights.c_str(),
                   static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                   setup.src == dt::u8 ? "u8" : s.weights.c_str(), pd.impl_info_str());
    }

    dnnl::memory src_mem(pd.src_desc(), eng);
    dnnl::memory dst_mem(pd.dst_desc(), eng);
    // The user's weights are [N, K] row-major (the PyTorch Linear layout), i.e. the {K, N} matrix
    // oneDNN multiplies by, stored "ba".
    dnnl::memory user_wei({{s.k, s.n}, wei, tag::ba}, eng);
    dnnl::memory wei_mem(pd.weights_desc(), eng);
    fill(src_mem, setup.src, 1);
    fill(user_wei, wei, 2);
    dnnl::reorder(user_wei, wei_mem).execute(strm, user_wei, wei_mem);
    strm.wait();

    dnnl::matmul prim(pd);
    const std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
    const auto times = time_runs(
        [&] {
          prim.execute(strm, args);
          strm.wait();
        },
        2, runs);
    return stats_of(times).median;
  } catch (const dnnl::error& e) {
    *why = std::string("oneDNN: ") + e.what();
    return -1.0;
  }
}

}  // namespace

}  // namespace sk::bench
