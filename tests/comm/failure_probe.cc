// A rank that fails in the middle of a parallel LongCat-Flash decode, for the failure tests
// (run_failure.cmake runs it under mpirun and checks what every rank prints):
//
//   sk_comm_failure_probe bad_input   rank 1 feeds a token id past the vocabulary at step 2: its
//                                     embedding kernel fails, it tells the others and exits 1
//   sk_comm_failure_probe kill        rank 1 kills itself (SIGKILL) at step 2, telling nobody
//   sk_comm_failure_probe hang        rank 1 stops responding at step 2 (sleeps in host code)
//   sk_comm_failure_probe none        no failure: every rank finishes
//
// Every rank ends with one line, "rank R: ok" or "rank R: error: <message>", and exits 0 or 1.
// The watchdog (runtime and communicator) is 3 s, so a rank waiting for one that stopped gives up
// after 3 s without progress.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "superkernel/comm.h"
#include "superkernel/models.h"
#include "superkernel/runtime.h"
#include "superkernel/weights.h"

namespace {

constexpr double kWatchdogSeconds = 3.0;

sk::models::LongCatFlashConfig tiny_config() {
  sk::models::LongCatFlashConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_attention_heads = 4;
  c.q_lora_rank = 16;
  c.kv_lora_rank = 16;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 8;
  c.ffn_hidden_size = 32;
  c.expert_ffn_hidden_size = 16;
  c.n_routed_experts = 4;
  c.zero_expert_num = 2;
  c.moe_topk = 2;
  return c;
}

sk::Status decode(sk::comm::Communicator& comm, sk::Runtime& rt, const std::string& scenario) {
  const sk::models::LongCatFlashConfig cfg = tiny_config();
  sk::models::BuildOptions opts;
  opts.batch = 1;
  opts.block_size = 4;
  opts.max_context = 16;
  opts.prefill_tokens = 4;
  opts.parallel = {comm.size(), comm.size(), comm.group()};
  auto weights = sk::random_weights(3);
  auto graph = sk::models::build_longcat_flash(cfg, opts, sk::models::Phase::kDecode, *weights);
  if (!graph) return graph.status();
  auto exe = rt.compile(*graph, sk::CompileOptions::for_mode(sk::ExecutionMode::kSuperKernel));
  if (!exe) return exe.status();
  sk::models::CacheStorage caches;
  SK_RETURN_IF_ERROR(caches.bind(**exe, sk::models::cache_names(cfg)));
  sk::models::PagedCacheLayout layout(opts);
  for (int step = 0; step < 6; ++step) {
    int32_t id = 1 + step;
    if (step == 2 && comm.rank() == 1) {
      if (scenario == "bad_input") id = 1000;  // past vocab_size: the embedding kernel rejects it
      if (scenario == "kill") raise(SIGKILL);
      if (scenario == "hang") std::this_thread::sleep_for(std::chrono::seconds(600));
    }
    auto in = layout.decode({id});
    if (!in) return in.status();
    SK_RETURN_IF_ERROR(sk::models::set_step_inputs(**exe, *in));
    SK_RETURN_IF_ERROR((*exe)->run());
  }
  return sk::Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "none";
  auto world = sk::comm::Communicator::world({kWatchdogSeconds});
  if (!world) {
    std::printf("rank ?: error: %s\n", world.status().to_string().c_str());
    return 1;
  }
  std::shared_ptr<sk::comm::Communicator> comm = *world;
  sk::RuntimeOptions ro;
  ro.num_cores = 1;
  ro.pin_threads = false;
  ro.watchdog_seconds = kWatchdogSeconds;
  sk::Status s;
  {
    auto rt = sk::Runtime::create(ro);
    s = rt ? comm->load_kernels(**rt) : rt.status();
    if (s) s = decode(*comm, **rt, scenario);
  }
  if (s) {
    std::printf("rank %d: ok\n", comm->rank());
  } else {
    (void)comm->fail(s);  // tells the other ranks, unless the error is another rank's failure
    std::printf("rank %d: error: %s\n", comm->rank(), s.to_string().c_str());
  }
  std::fflush(stdout);
  comm.reset();
  (void)sk::comm::finalize(!s);
  return s ? 0 : 1;
}
