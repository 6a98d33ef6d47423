// Structural checks of a Graph. Build-time errors (operand shapes and dtypes, handles, use
// before definition) were recorded while building; this adds the checks that need the whole
// program: events, open scopes, names.
#include <set>
#include <unordered_map>

#include "ir/graph_impl.h"

namespace sk {

Status Graph::verify() const {
  const Impl& g = *impl_;
  const std::string where = "graph '" + g.name + "'";
  if (!g.build_errors.empty()) {
    std::string msg = g.build_errors.front().message();
    if (g.build_errors.size() > 1)
      msg += " (and " + std::to_string(g.build_errors.size() - 1) + " more error(s); first shown)";
    return Status(g.build_errors.front().code(), where + ": " + msg);
  }
  if (!g.scope_stack.empty()) {
    return Status::invalid_argument(where + ": scope_begin('" + g.scopes[g.scope_stack.back()].name +
                                    "') is never closed by a matching scope_end");
  }

  // Events: every wait must follow a record of the same event in program order.
  std::vector<bool> recorded(g.events.size(), false);
  for (const OpInfo& op : g.ops) {
    if (op.kind == OpKind::kRecordEvent) recorded[op.event] = true;
    if (op.kind == OpKind::kWaitEvent && !recorded[op.event]) {
      bool later = false;
      for (const OpInfo& other : g.ops)
        if (other.kind == OpKind::kRecordEvent && other.event == op.event) later = true;
      return Status::invalid_argument(
          where + ": op '" + op.name + "' waits on event '" + g.events[op.event] + "'" +
          (later ? " before it is recorded (record it earlier in program order)" : " which is never recorded"));
    }
  }

  // Names the caller uses to feed and read tensors must be unique.
  std::set<std::string> names;
  for (const TensorInfo& t : g.tensors) {
    if (t.kind == TensorKind::kInput || t.kind == TensorKind::kVariable) {
      if (!names.insert(t.name).second)
        return Status::invalid_argument(where + ": two inputs/variables are named '" + t.name + "'");
    }
  }
  std::set<std::string> outputs;
  for (const TensorInfo& t : g.tensors) {
    if (t.is_output && !outputs.insert(t.output_name).second)
      return Status::invalid_argument(where + ": two outputs are named '" + t.output_name + "'");
  }
  for (const TensorInfo& t : g.tensors) {
    if (t.kind == TensorKind::kIntermediate && t.definer < 0 && t.is_output)
      return Status::invalid_argument(where + ": output '" + t.output_name + "' is declared but never written");
  }
  return Status::ok();
}

}  // namespace sk
