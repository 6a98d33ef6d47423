// The sizes of configs/longcat-mini.yaml as a LongCatFlashConfig, for the benchmarks that build
// the C++ model directly (sk_bench_comm, sk_bench_streams).
#ifndef SUPERKERNEL_BENCH_LONGCAT_MINI_CONFIG_H_
#define SUPERKERNEL_BENCH_LONGCAT_MINI_CONFIG_H_

#include "superkernel/models.h"

namespace sk::bench {

inline models::LongCatFlashConfig longcat_mini_config(int num_layers) {
  models::LongCatFlashConfig c;
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.num_layers = num_layers;
  c.num_attention_heads = 4;
  c.q_lora_rank = 64;
  c.kv_lora_rank = 32;
  c.qk_nope_head_dim = 16;
  c.qk_rope_head_dim = 8;
  c.v_head_dim = 16;
  c.ffn_hidden_size = 256;
  c.expert_ffn_hidden_size = 64;
  c.n_routed_experts = 8;
  c.zero_expert_num = 4;
  c.moe_topk = 2;
  c.routed_scaling_factor = 6.0;
  return c;
}

}  // namespace sk::bench

#endif  // SUPERKERNEL_BENCH_LONGCAT_MINI_CONFIG_H_
