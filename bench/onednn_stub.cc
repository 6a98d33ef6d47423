// Used when the build has no oneDNN: the comparison column says so instead of guessing.
#include "kernel_bench.h"

namespace sk::bench {

double onednn_matmul_seconds(const OneDnnShape&, int, int, std::string* why) {
  *why = "this build has no oneDNN (install libdnnl-dev and reconfigure)";
  return -1.0;
}

}  // namespace sk::bench
