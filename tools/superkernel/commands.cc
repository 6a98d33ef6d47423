// What every subcommand does first: load the config, check it against the machine, start the
// runtime, build the model.
#include "commands.h"

#include <sched.h>

#include <cstdio>
#include <thread>

namespace sk::cli {
namespace {

// The CPUs this process may use (taskset, cpusets): the most cores a runtime can pin.
int process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int fail(const Status& s, int code) {
  std::fprintf(stderr, "superkernel: error: %s\n", s.message().c_str());
  return code;
}

std::variant<std::unique_ptr<Session>, int> open_session(const CommonArgs& args, Progress& progress,
                                                         const AdjustConfig& adjust, int cache_copies) {
  auto bad = [&](const Status& s, int code) {
    progress.done();
    return fail(s, code);
  };
  auto session = std::make_unique<Session>();
  progress.update("reading " + args.config);
  auto cfg = config::load_config(args.config);
  if (!cfg) return bad(cfg.status(), kExitBadConfig);
  session->cfg = std::move(*cfg);
  session->cfg.model.allow_unused_tensors = args.allow_unused_tensors;
  if (adjust) {
    if (Status s = adjust(session->cfg); !s) return bad(s, kExitUsage);
  }
  if (Status s = config::check_machine(session->cfg, process_cpus()); !s) return bad(s, kExitBadConfig);
  progress.update("starting the runtime");
  auto rt = create_runtime(session->cfg);
  if (!rt) return bad(rt.status(), kExitFailed);
  session->runtime = std::move(*rt);
  auto model = build_model(session->cfg, progress, cache_copies);
  if (!model) return bad(model.status(), kExitBadConfig);
  session->model = std::move(*model);
  if (args.verbose) {
    progress.done();
    for (const std::string& note : session->model->notes) std::fprintf(stderr, "superkernel: %s\n", note.c_str());
  }
  return session;
}

int failure_code(const config::Config& cfg, const Status& s) {
  return s.message().rfind(cfg.file + ":", 0) == 0 ? kExitBadConfig : kExitFailed;
}

}  // namespace sk::cli
