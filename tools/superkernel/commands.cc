// What every subcommand does first: load the config, check it against the machine, start the
// runtime, build the model.
#include "commands.h"

#include <sched.h>

#include <cstdio>
#include <thread>

#include "superkernel/runtime.h"

namespace sk::cli {
namespace {

// The communicator of a parallel run, for fail() and finish(); null otherwise.
std::shared_ptr<comm::Communicator> g_comm;

// `parallel`: starts MPI, checks the layout against the number of ranks, and gives each rank of
// this machine its own CPUs before the runtime pins its threads.
#if SK_HAVE_MPI
Expected<std::shared_ptr<comm::Communicator>> start_mpi(const config::Config& cfg) {
  RuntimeOptions defaults;
  auto world = comm::Communicator::world({defaults.watchdog_seconds});
  if (!world) return world.status().with_context(cfg.where("parallel").to_string() + ": key 'parallel'");
  const int32_t ranks = (*world)->size();
  for (const auto& [key, value] :
       {std::pair<const char*, int>{"parallel.tp", cfg.parallel.tp}, {"parallel.ep", cfg.parallel.ep}}) {
    if (value != 1 && value != ranks)
      return Status::invalid_argument(cfg.where(key).to_string() + ": key '" + key + "': " + std::to_string(value) +
                                      " ranks, but " + std::to_string(ranks) +
                                      " process(es) run; start as many (mpirun -np " + std::to_string(value) +
                                      ") or set it to 1 or " + std::to_string(ranks));
  }
  if (ranks > 1 && cfg.parallel.tp == 1 && cfg.parallel.ep == 1)
    return Status::invalid_argument(cfg.where("parallel").to_string() + ": key 'parallel': " + std::to_string(ranks) +
                                    " processes run, but tp and ep are 1: every rank would compute the whole model");
  if (auto cpus = (*world)->share_cpus_between_local_ranks(); !cpus) return cpus.status();
  // Results come from rank 0; the others print only errors.
  if ((*world)->rank() != 0) std::fflush(stdout), (void)std::freopen("/dev/null", "w", stdout);
  return world;
}
#else
Expected<std::shared_ptr<comm::Communicator>> start_mpi(const config::Config& cfg) {
  return Status::unimplemented(cfg.where("parallel").to_string() +
                               ": key 'parallel': this superkernel was built without MPI (SK_ENABLE_MPI=OFF)");
}
#endif

// The CPUs this process may use (taskset, cpusets): the most cores a runtime can pin.
int process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int fail(const Status& s, int code) {
#if SK_HAVE_MPI
  const Status shown = g_comm ? g_comm->fail(s) : s;
#else
  const Status& shown = s;
#endif
  std::fprintf(stderr, "superkernel: error: %s\n", shown.message().c_str());
  return code;
}

int finish(int code) {
#if SK_HAVE_MPI
  if (!g_comm) return code;
  g_comm.reset();
  if (Status s = comm::finalize(code != kExitOk); !s && code == kExitOk) {
    std::fprintf(stderr, "superkernel: error: %s\n", s.message().c_str());
    return kExitFailed;
  }
#endif
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
  comm::Group ranks;
  if (session->cfg.parallel.set) {
    progress.update("starting MPI");
    auto world = start_mpi(session->cfg);
    if (!world) return bad(world.status(), kExitBadConfig);
    session->comm = g_comm = *world;
    ranks = session->comm->group();
  }
  if (Status s = config::check_machine(session->cfg, process_cpus()); !s) return bad(s, kExitBadConfig);
  progress.update("starting the runtime");
  auto rt = create_runtime(session->cfg);
  if (!rt) return bad(rt.status(), kExitFailed);
  session->runtime = std::move(*rt);
  if (session->comm) {
    if (Status s = session->comm->load_kernels(*session->runtime); !s) return bad(s, kExitFailed);
  }
  auto model = build_model(session->cfg, progress, cache_copies, ranks);
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
