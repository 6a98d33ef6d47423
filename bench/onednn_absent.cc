// Built instead of onednn_matmul.cc when the build has no oneDNN comparison: the oneDNN column
// reads "n/a" and sk_bench_kernels prints why (the reason CMake found, SK_BENCH_ONEDNN_ABSENT).
#include "kernel_bench.h"

namespace sk::bench {

double onednn_matmul_seconds(const OneDnnShape&, int, int, std::string* why) {
  *why = SK_BENCH_ONEDNN_ABSENT;
  return -1.0;
}

}  // namespace sk::bench
