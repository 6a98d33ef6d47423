// Each kernel of a step as a one-op graph: the same kernel, attributes, shapes and input values
// (constants read in place, everything else copied from the step's data dump into variables the
// op may also update in place), compiled in graph mode and timed on its own.
#include "isolated_kernels.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "superkernel/ops.h"

namespace sk::cli {
namespace {

using Dumped = std::map<std::string, const DumpRecord*>;

const uint8_t* constant_bytes(const TensorInfo& t) {
  return t.external_data ? static_cast<const uint8_t*>(t.external_data) : t.data.data();
}

// Dense bytes of the non-view tensor `id` as the step left them.
Expected<std::vector<uint8_t>> base_bytes(const Graph& g, const Executable& exe, const Dumped& dumped, int32_t id) {
  const TensorInfo& t = g.tensor(id);
  const size_t bytes = static_cast<size_t>(t.storage_bytes);
  if (t.kind == TensorKind::kConstant) return std::vector<uint8_t>(constant_bytes(t), constant_bytes(t) + bytes);
  if (t.kind == TensorKind::kInput || t.kind == TensorKind::kVariable) {
    std::vector<uint8_t> v(bytes);
    SK_RETURN_IF_ERROR(exe.read(t.name, v.data(), v.size()));
    return v;
  }
  auto it = dumped.find(t.name);
  if (it == dumped.end() || it->second->data.size() != bytes) {
    return Status::internal("the step's data dump has no value for tensor '" + t.name + "'");
  }
  return it->second->data;
}

// The elements of the view `v` (row-major, dense) out of its base's bytes.
Expected<std::vector<uint8_t>> gather(const std::vector<uint8_t>& base, const TensorInfo& v) {
  const size_t elem = dtype_size(v.dtype);
  const int64_t n = shape_numel(v.shape);
  std::vector<uint8_t> out(static_cast<size_t>(n) * elem);
  std::vector<int64_t> idx(v.shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * v.strides[d];
    const size_t at = static_cast<size_t>(v.byte_offset) + static_cast<size_t>(off) * elem;
    if (at + elem > base.size()) return Status::internal("view '" + v.name + "' reaches past its base");
    std::memcpy(out.data() + static_cast<size_t>(i) * elem, base.data() + at, elem);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Expected<std::unique_ptr<Executable>> isolate(Runtime& rt, const Graph& g, const Executable& step, const Dumped& dumped,
                                              size_t index) {
  const OpInfo& op = g.op(index);
  Graph one("isolated " + op.name);
  std::map<int32_t, Tensor> made;  // step tensor -> tensor of `one`
  std::vector<std::pair<std::string, std::vector<uint8_t>>> feeds;
  OpSpec spec;
  spec.kind = OpKind::kCustom;
  spec.kernel = op.kernel;
  spec.name = op.name;
  spec.attrs = op.attrs;
  for (int32_t id : op.inputs) {
    if (made.count(id)) {
      spec.inputs.push_back(made[id]);
      continue;
    }
    const TensorInfo& t = g.tensor(id);
    const std::string name = "in" + std::to_string(made.size());
    Tensor x;
    if (t.base < 0 && t.kind == TensorKind::kConstant) {
      x = one.constant_external(name, t.dtype, t.shape, constant_bytes(t), static_cast<size_t>(t.storage_bytes),
                                t.keep_alive);
    } else {
      auto base = base_bytes(g, step, dumped, t.base >= 0 ? t.base : id);
      if (!base) return base.status();
      auto data = t.base >= 0 ? gather(*base, t) : std::move(base);
      if (!data) return data.status();
      x = one.variable(name, t.dtype, t.shape);
      feeds.emplace_back(name, std::move(*data));
    }
    made[id] = x;
    spec.inputs.push_back(x);
  }
  std::vector<Tensor> fresh;
  for (int32_t id : op.outputs) {
    const TensorInfo& t = g.tensor(id);
    spec.outputs.emplace_back(t.dtype, t.shape);
    Tensor into;
    if (made.count(id)) {
      into = made[id];  // updated in place, as in the step
    } else if (t.kind == TensorKind::kVariable) {
      into = made[id] = one.variable("out" + std::to_string(made.size()), t.dtype, t.shape);
    }
    spec.write_into.push_back(into);
  }
  std::vector<Tensor> outs = one.add_op(std::move(spec));
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!made.count(op.outputs[k])) one.output(outs[k], "out" + std::to_string(k));
  }
  auto exe = rt.compile(one, CompileOptions::for_mode(ExecutionMode::kGraph));
  if (!exe) return exe.status();
  for (const auto& [name, data] : feeds) SK_RETURN_IF_ERROR((*exe)->set_input(name, data.data(), data.size()));
  return exe;
}

// A graph whose run reads `bytes` bytes (a matvec over zero-initialised variables): run just
// before a kernel, it pushes the kernel's weights out of the caches, leaves clean lines (no
// write-backs for the kernel to pay) and keeps the workers awake, as they are inside a step.
Expected<std::unique_ptr<Executable>> cache_flusher(Runtime& rt, size_t bytes) {
  const int64_t rows = 2, k = static_cast<int64_t>(bytes / ((rows + 1) * sizeof(float)));
  Graph g("cache flush");
  Tensor x = g.variable("x", DType::kF32, {1, k});
  Tensor w = g.variable("w", DType::kF32, {rows, k});
  g.output(matmul(g, x, w), "y");
  return rt.compile(g, CompileOptions::for_mode(ExecutionMode::kGraph));
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Best time of `runs` runs of `exe` (after one untimed run).
Expected<double> best_run(Executable& exe, int runs, Executable* flusher) {
  SK_RETURN_IF_ERROR(exe.run());
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    if (flusher) SK_RETURN_IF_ERROR(flusher->run());
    const double t0 = now_s();
    SK_RETURN_IF_ERROR(exe.run());
    best = std::min(best, now_s() - t0);
  }
  return best;
}

// What a launch costs with (next to) no kernel work: a copy of one float.
Expected<double> launch_floor(Runtime& rt, int runs) {
  Graph g("launch floor");
  g.output(copy(g, g.input("x", DType::kF32, {1})), "y");
  auto exe = rt.compile(g, CompileOptions::for_mode(ExecutionMode::kGraph));
  if (!exe) return exe.status();
  const float x = 1.0f;
  SK_RETURN_IF_ERROR((*exe)->set_input("x", &x, sizeof(x)));
  return best_run(**exe, runs, nullptr);
}

}  // namespace

Expected<double> isolated_kernel_seconds(Runtime& runtime, const Graph& graph, const Executable& dumped,
                                         const IsolationOptions& options) {
  Dumped by_name;
  for (const DumpRecord& r : dumped.dump()) by_name[r.tensor] = &r;
  auto floor = launch_floor(runtime, std::max(options.runs * 4, 20));
  if (!floor) return floor.status();
  std::unique_ptr<Executable> flusher;
  if (options.flush_bytes > 0) {
    auto f = cache_flusher(runtime, options.flush_bytes);
    if (!f) return f.status().with_context("cache flush graph");
    flusher = std::move(*f);
  }
  double total = 0;
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const OpInfo& op = graph.op(i);
    if (op.kernel.empty() || op.kind == OpKind::kHost) continue;
    auto iso = isolate(runtime, graph, dumped, by_name, i);
    if (!iso) return iso.status().with_context("op '" + op.name + "' (" + op.kernel + ") in isolation");
    auto t = best_run(**iso, options.runs, flusher.get());
    if (!t) return t.status().with_context("op '" + op.name + "' in isolation");
    total += std::max(0.0, *t - *floor);
  }
  return total;
}

}  // namespace sk::cli
