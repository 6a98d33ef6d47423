// Run-time records: the data dump and the per-core sub-kernel trace.
//
//   for (const sk::DumpRecord& r : exe->dump())
//     std::printf("%s %s %s %zu bytes\n", r.op.c_str(), r.tensor.c_str(),
//                 sk::shape_to_string(r.shape).c_str(), r.data.size());
#ifndef SUPERKERNEL_TRACE_H_
#define SUPERKERNEL_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "superkernel/graph.h"

namespace sk {

// One op output captured by the data dump.
struct DumpRecord {
  std::string op;      // op name
  std::string tensor;  // tensor name
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<uint8_t> data;  // dense bytes
};

// One sub-kernel execution on one core.
struct TraceEvent {
  std::string op;
  std::string kernel;
  int32_t core = 0;
  int32_t launch = 0;
  int64_t start_ns = 0;  // relative to the start of the run
  int64_t end_ns = 0;
};

}  // namespace sk

#endif  // SUPERKERNEL_TRACE_H_
