// The complete per-core trace in every mode, its Chrome/Perfetto JSON export and the wait accounting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "common/test_runtime.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"
#include "superkernel/trace.h"
#include "weights/json.h"

namespace sk {
namespace {

using testing::make_runtime;

Tensor add1(Graph& g, Tensor x, const std::string& name) {
  return call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}

// Core 1 needs x[0], which only core 0 produces, and core 0's tiling: a cross-core wait.
Graph waiting_graph() {
  Graph g;
  Tensor t = g.input("x", DType::kF32, {300});
  {
    SuperKernelScope s(g, "sink");
    t = add1(g, t, "producer");
    t = call_kernel(g, "test.scale_by_first.f32", {t}, {{DType::kF32, {300}, ""}}, {}, "scaled")[0];
    t = add1(g, t, "consumer");
  }
  g.output(t, "y");
  return g;
}

std::unique_ptr<Executable> traced(Runtime& rt, const Graph& g, ExecutionMode m, const std::string& path = "") {
  CompileOptions o = CompileOptions::for_mode(m);
  o.super_kernel_debug_options.debug_op_exec_trace = true;
  o.trace = path;
  auto exe = rt.compile(g, o);
  if (!exe.has_value()) throw std::runtime_error(exe.status().to_string());
  auto x = testing::random_floats(300, 3);
  if (Status s = (*exe)->set_input("x", x); !s) throw std::runtime_error(s.to_string());
  if (Status s = (*exe)->run(); !s) throw std::runtime_error(s.to_string());
  return std::move(*exe);
}

TEST(Trace, EveryModeRecordsEveryKernelOnEveryCoreInOrder) {
  auto rt = make_runtime(2);
  Graph g = waiting_graph();
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto exe = traced(*rt, g, m);
    std::map<std::string, std::set<int32_t>> cores_of;
    std::map<int32_t, int64_t> last_end;
    for (const TraceEvent& e : exe->trace()) {
      EXPECT_LE(e.start_ns, e.end_ns) << trace_kind_name(e.kind);
      if (e.kind == TraceKind::kRun) cores_of[e.op].insert(e.core);
      // One core executes its instructions one after another.
      if (e.core >= 0) {
        EXPECT_GE(e.start_ns, last_end[e.core]) << execution_mode_name(m) << " core " << e.core;
        last_end[e.core] = e.end_ns;
      }
    }
    for (const char* op : {"producer", "scaled", "consumer"})
      EXPECT_EQ(cores_of[op].size(), 2u) << execution_mode_name(m) << " " << op;
  }
}

TEST(Trace, EveryWaitNamesItsProducerAndFollowsItsSignal) {
  auto rt = make_runtime(2);
  auto exe = traced(*rt, waiting_graph(), ExecutionMode::kSuperKernel);
  std::map<std::tuple<int32_t, int32_t, int32_t>, const TraceEvent*> signals;
  for (const TraceEvent& e : exe->trace())
    if (e.kind == TraceKind::kSignal) signals[{e.launch, e.core, e.count}] = &e;
  int waits = 0;
  for (const TraceEvent& e : exe->trace()) {
    if (e.kind != TraceKind::kWait) continue;
    ++waits;
    EXPECT_NE(e.peer, e.core);
    EXPECT_FALSE(e.op.empty());
    EXPECT_FALSE(e.kernel.empty());
    EXPECT_GE(e.segment, 0);
    auto it = signals.find({e.launch, e.peer, e.count});
    ASSERT_NE(it, signals.end()) << "wait for core " << e.peer << " signal " << e.count;
    EXPECT_EQ(it->second->op, e.op);
    EXPECT_LE(it->second->start_ns, e.end_ns);  // released no earlier than the signal
  }
  EXPECT_GE(waits, 1);
}

TEST(Trace, WaitAccountingSumsEachCoresTime) {
  auto rt = make_runtime(2);
  auto exe = traced(*rt, waiting_graph(), ExecutionMode::kSuperKernel);
  const WaitAccount a = account_waits(exe->trace());
  ASSERT_FALSE(a.launches.empty());
  int64_t waited = 0;
  for (const LaunchTime& lt : a.launches) {
    for (const CoreTime& ct : lt.cores) {
      EXPECT_LE(ct.compute_ns + ct.wait_ns + ct.barrier_ns, lt.span_ns + 1) << "core " << ct.core;
      EXPECT_GT(ct.compute_ns, 0);
      waited += ct.wait_ns;
    }
  }
  ASSERT_FALSE(a.top.empty());
  int64_t by_op = 0;
  for (const WaitTotal& w : a.top) by_op += w.ns;
  EXPECT_EQ(by_op, waited);
  EXPECT_EQ(waited, a.wait_ns);
  const std::string text = format_waits(a, 3);
  EXPECT_NE(text.find(a.top[0].op), std::string::npos) << text;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The structure chrome://tracing and Perfetto expect, and a flow id per signal->wait pair.
void check_chrome_trace(const std::string& text, size_t processes) {
  auto doc = json::parse(text, "trace.json");
  ASSERT_TRUE(doc.has_value()) << doc.status().to_string();
  const json::Value* events = doc->find("traceEvents");
  ASSERT_TRUE(events && events->is_array());
  std::set<std::string> pids;
  std::map<std::string, std::pair<int, int>> flows;          // id -> (starts, finishes)
  std::map<std::string, std::pair<double, double>> flow_ts;  // id -> (start ts, finish ts)
  int slices = 0, waits = 0;
  for (const json::Value& e : events->items) {
    ASSERT_TRUE(e.is_object());
    const json::Value* ph = e.find("ph");
    ASSERT_TRUE(ph && ph->is_string());
    ASSERT_TRUE(e.find("pid") && e.find("pid")->is_number());
    ASSERT_TRUE(e.find("tid") && e.find("tid")->is_number());
    pids.insert(e.find("pid")->text);
    if (ph->text == "M") continue;
    ASSERT_TRUE(e.find("ts") && e.find("ts")->is_number()) << ph->text;
    if (ph->text == "X") {
      ++slices;
      ASSERT_TRUE(e.find("dur") && e.find("dur")->is_number());
      EXPECT_NE(e.find("dur")->text[0], '-');
      ASSERT_TRUE(e.find("name") && e.find("name")->is_string());
      if (e.find("cat")->text == "wait") ++waits;
    } else {
      ASSERT_TRUE(ph->text == "s" || ph->text == "f") << ph->text;
      ASSERT_TRUE(e.find("id") && e.find("id")->is_number());
      auto& f = flows[e.find("id")->text];
      (ph->text == "s" ? f.first : f.second)++;
      auto& t = flow_ts[e.find("id")->text];
      (ph->text == "s" ? t.first : t.second) = std::stod(e.find("ts")->text);
      // A finish binds to the next slice of its thread (where the waiting core proceeds).
      if (ph->text == "f") {
        EXPECT_EQ(e.find("bp"), nullptr);
      }
    }
  }
  EXPECT_EQ(pids.size(), processes);
  EXPECT_GT(slices, 0);
  EXPECT_EQ(static_cast<int>(flows.size()), waits);
  for (const auto& [id, f] : flows) EXPECT_TRUE(f.first == 1 && f.second == 1) << "flow " << id;
  // No arrow points back in time.
  for (const auto& [id, t] : flow_ts) EXPECT_LE(t.first, t.second) << "flow " << id;
}

// A core that began waiting before its producer signalled: the arrow runs from the signal to
// the end of the wait, where the core proceeds, not back to the start of the wait.
TEST(Trace, FlowArrowsEndWhereTheWaitingCoreProceeds) {
  auto event = [](TraceKind kind, int32_t core, int64_t start, int64_t end, int32_t peer, int32_t count) {
    TraceEvent e;
    e.kind = kind;
    e.core = core;
    e.start_ns = start;
    e.end_ns = end;
    e.peer = peer;
    e.count = count;
    e.op = "producer";
    e.segment = 0;
    return e;
  };
  std::vector<TraceEvent> events = {
      event(TraceKind::kRun, 0, 0, 100000, -1, 0),
      event(TraceKind::kSignal, 0, 100000, 100000, -1, 1),
      event(TraceKind::kWait, 1, 5000, 101000, 0, 1),  // waited 96 us for the signal
      event(TraceKind::kRun, 1, 101000, 150000, -1, 0),
      // Released by a later count than the one waited for (the producer signalled 2, then 3).
      event(TraceKind::kSignal, 0, 120000, 120000, -1, 3),
      event(TraceKind::kWait, 1, 150000, 150500, 0, 2),
      event(TraceKind::kRun, 1, 150500, 160000, -1, 0),
  };
  const std::string text = chrome_trace_json({{"superkernel", events}});
  check_chrome_trace(text, 1);
  EXPECT_NE(
      text.find("\"ph\":\"s\",\"name\":\"signal 1\",\"cat\":\"sync\",\"id\":1,\"pid\":1,\"tid\":0,\"ts\":100.000}"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("\"ph\":\"f\",\"name\":\"signal 1\",\"cat\":\"sync\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":101.000}"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("\"ph\":\"s\",\"name\":\"signal 2\",\"cat\":\"sync\",\"id\":2,\"pid\":1,\"tid\":0,\"ts\":120.000}"),
      std::string::npos)
      << text;
}

TEST(Trace, ChromeJsonOfModesSideBySide) {
  auto rt = make_runtime(2);
  Graph g = waiting_graph();
  std::vector<TraceRun> runs;
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel})
    runs.push_back({execution_mode_name(m), traced(*rt, g, m)->trace()});
  const std::string text = chrome_trace_json(runs);
  check_chrome_trace(text, 3);
  EXPECT_NE(text.find("\"scaled (test.scale_by_first.f32)\""), std::string::npos);
}

TEST(Trace, OptionWritesTheTraceAfterEveryRun) {
  auto rt = make_runtime(2);
  const std::string path = (std::filesystem::temp_directory_path() / "sk_trace_option_test.json").string();
  std::filesystem::remove(path);
  auto exe = traced(*rt, waiting_graph(), ExecutionMode::kSuperKernel, path);
  check_chrome_trace(read_file(path), 1);
  std::filesystem::remove(path);
}

TEST(Trace, WriteTraceNeedsTracing) {
  auto rt = make_runtime(2);
  auto exe = rt->compile(waiting_graph(), CompileOptions::for_mode(ExecutionMode::kGraph));
  ASSERT_TRUE(exe.has_value());
  ASSERT_TRUE((*exe)->set_input("x", std::vector<float>(300, 1.0f)).is_ok());
  ASSERT_TRUE((*exe)->run().is_ok());
  EXPECT_TRUE((*exe)->trace().empty());
  Status s = (*exe)->write_trace("/tmp/unused.json");
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tracing is off"), std::string::npos) << s.message();
}

TEST(Trace, UnwritablePathIsAnError) {
  auto rt = make_runtime(2);
  Status s = write_chrome_trace("/nonexistent-dir/t.json", {});
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("/nonexistent-dir/t.json"), std::string::npos);
  // Through the option, the run fails naming it.
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kGraph);
  ASSERT_TRUE(o.set("trace", "/nonexistent-dir/t.json").is_ok());
  auto exe = rt->compile(waiting_graph(), o);
  ASSERT_TRUE(exe.has_value());
  ASSERT_TRUE((*exe)->set_input("x", std::vector<float>(300, 1.0f)).is_ok());
  s = (*exe)->run();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("option 'trace'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sk
