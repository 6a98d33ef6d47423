// What every subcommand does first: load the config, start the runtime, build the model.
#include "commands.h"

#include <cstdio>

namespace sk::cli {

int fail(const Status& s, int code) {
  std::fprintf(stderr, "superkernel: error: %s\n", s.message().c_str());
  return code;
}

std::variant<std::unique_ptr<Session>, int> open_session(const CommonArgs& args, Progress& progress,
                                                         const AdjustConfig& adjust) {
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
  progress.update("starting the runtime");
  auto rt = create_runtime(session->cfg);
  if (!rt) return bad(rt.status(), kExitFailed);
  session->runtime = std::move(*rt);
  auto model = build_model(session->cfg, progress);
  if (!model) return bad(model.status(), kExitBadConfig);
  session->model = std::move(*model);
  if (args.verbose) {
    progress.done();
    for (const std::string& note : session->model->notes) std::fprintf(stderr, "superkernel: %s\n", note.c_str());
  }
  return session;
}

}  // namespace sk::cli
