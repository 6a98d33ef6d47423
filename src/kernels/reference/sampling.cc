// References of argmax.f32 and sample.f32. The sampler follows the arithmetic specified in
// docs/kernels_moe.md ("sample.f32 arithmetic") step by step, with a full sort of the
// vocabulary where the kernel uses partial selection, so that tokens can be compared exactly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"
#include "superkernel/attrs_moe.h"

namespace sk::ref {
namespace {

// Larger first, NaN after every number (also after -inf), equal values by lower index.
bool ranks_before(float a, int64_t ia, float b, int64_t ib) {
  const bool na = std::isnan(a);
  const bool nb = std::isnan(b);
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

__extension__ typedef unsigned __int128 Uint128;  // GCC and Clang; -Wpedantic needs the marker

uint64_t uniform53(uint64_t seed, int64_t step, int64_t row) {
  const auto st = static_cast<uint64_t>(step);
  uint32_t ctr[4] = {static_cast<uint32_t>(st & 0xFFFFFFFFu), static_cast<uint32_t>(st >> 32),
                     static_cast<uint32_t>(row), 0};
  const uint32_t key[2] = {static_cast<uint32_t>(seed & 0xFFFFFFFFu), static_cast<uint32_t>(seed >> 32)};
  philox4x32_10(ctr, key);
  return uint64_t{ctr[0]} * 2097152u + (ctr[1] >> 11);
}

// The candidates are `seq` (best first). The nucleus is its shortest prefix whose running sum
// of weights reaches tau = top_p * S in double (all of seq when top_p is 1); the token is the
// member of lowest index whose running sum over the members, in index order, exceeds
// floor(u53 * mass / 2^53).
int64_t sample_sequence(const std::vector<float>& l, std::vector<int64_t> seq, float lmax, float a, float top_p,
                        uint64_t u53) {
  std::vector<uint64_t> w(seq.size());
  uint64_t total = 0;
  for (size_t j = 0; j < seq.size(); ++j) {
    w[j] = sample_weight(l[seq[j]], lmax, a);
    total += w[j];
  }
  size_t m = seq.size();
  uint64_t mass = total;
  if (top_p < 1.0f) {
    const double tau = static_cast<double>(top_p) * static_cast<double>(total);
    uint64_t c = 0;
    for (size_t j = 0; j < seq.size(); ++j) {
      c += w[j];
      if (static_cast<double>(c) >= tau) {
        m = j + 1;
        mass = c;
        break;
      }
    }
  }
  std::vector<std::pair<int64_t, uint64_t>> members;
  for (size_t j = 0; j < m; ++j) members.emplace_back(seq[j], w[j]);
  std::sort(members.begin(), members.end());
  const auto r = static_cast<uint64_t>((static_cast<Uint128>(u53) * mass) >> 53);
  uint64_t c = 0;
  for (const auto& [id, wj] : members) {
    c += wj;
    if (c > r) return id;
  }
  return -1;  // unreachable: the members' weights sum to mass > r
}

bool rows_operands(const sk_kernel_args* args, int32_t inputs) {
  if (!has_operands(args, inputs, 1)) return false;
  const sk_tensor_arg& logits = args->inputs[0];
  const sk_tensor_arg& ids = args->outputs[0];
  return logits.rank == 2 && logits.dtype == SK_DTYPE_F32 && logits.shape[1] >= 1 && ids.rank == 1 &&
         ids.dtype == SK_DTYPE_I32 && ids.shape[0] == logits.shape[0];
}

std::vector<float> row_of(const sk_tensor_arg& logits, int64_t b) {
  std::vector<float> row(static_cast<size_t>(logits.shape[1]));
  const auto* p = static_cast<const float*>(logits.data);
  for (int64_t i = 0; i < logits.shape[1]; ++i) row[i] = p[b * logits.stride[0] + i * logits.stride[1]];
  return row;
}

std::vector<int64_t> ranking(const std::vector<float>& l) {
  std::vector<int64_t> order(l.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return ranks_before(l[i], i, l[j], j); });
  return order;
}

void store_id(const sk_tensor_arg& ids, int64_t b, int64_t id) {
  static_cast<int32_t*>(ids.data)[b * ids.stride[0]] = static_cast<int32_t>(id);
}

}  // namespace

void philox4x32_10(uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t k0 = key[0];
  uint32_t k1 = key[1];
  for (int round = 1; round <= 10; ++round) {
    const uint64_t a = uint64_t{0xD2511F53u} * ctr[0];
    const uint64_t b = uint64_t{0xCD9E8D57u} * ctr[2];
    const uint32_t out[4] = {static_cast<uint32_t>(b >> 32) ^ ctr[1] ^ k0, static_cast<uint32_t>(b),
                             static_cast<uint32_t>(a >> 32) ^ ctr[3] ^ k1, static_cast<uint32_t>(a)};
    std::memcpy(ctr, out, sizeof out);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

uint32_t sample_weight(float l, float lmax, float a) {
  if (std::isnan(l)) return 0;
  if (l == lmax) return 1u << 30;
  // 2^f on [-0.5, 0.5]: the specified f32 coefficients, Horner's rule with one FMA per step.
  const float c[6] = {1.0f,
                      0.6931469670618053f,
                      0.24022119723079793f,
                      0.05550713277838843f,
                      0.009675541379347327f,
                      0.0013276470743018576f};
  float t = (l - lmax) * a;
  if (!(t >= -64.0f)) t = -64.0f;
  const float k = std::nearbyint(t);
  const float f = t - k;
  float p = c[5];
  for (int i = 4; i >= 0; --i) p = std::fma(p, f, c[i]);
  return static_cast<uint32_t>(std::nearbyint(std::ldexp(p, static_cast<int>(k) + 30)));
}

int32_t argmax_f32(const sk_kernel_args* args) {
  if (!rows_operands(args, 1) || args->attrs_size != 0) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& logits = args->inputs[0];
  for (int64_t b = 0; b < logits.shape[0]; ++b) {
    const std::vector<float> l = row_of(logits, b);
    int64_t best = 0;
    for (int64_t i = 1; i < static_cast<int64_t>(l.size()); ++i) {
      if (ranks_before(l[i], i, l[best], best)) best = i;
    }
    store_id(args->outputs[0], b, best);
  }
  return SK_OK;
}

int32_t sample_f32(const sk_kernel_args* args) {
  sk_sample_attrs a{};
  if (!rows_operands(args, 2) || args->attrs == nullptr || args->attrs_size != sizeof a) return SK_ERR_INVALID_ARGUMENT;
  std::memcpy(&a, args->attrs, sizeof a);
  const sk_tensor_arg& logits = args->inputs[0];
  const sk_tensor_arg& step_t = args->inputs[1];
  if (step_t.dtype != SK_DTYPE_I64 || sk_tensor_numel(&step_t) != 1 || !std::isfinite(a.temperature) ||
      !(a.temperature >= 0.0f) || !(a.top_p > 0.0f && a.top_p <= 1.0f) || a.top_k < 0 || a.reserved != 0) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t step = *static_cast<const int64_t*>(step_t.data);
  const int64_t v = logits.shape[1];
  for (int64_t b = 0; b < logits.shape[0]; ++b) {
    const std::vector<float> l = row_of(logits, b);
    std::vector<int64_t> order = ranking(l);
    if (order.empty()) return SK_ERR_INVALID_ARGUMENT;  // V = 0: nothing to sample
    if (a.top_k > 0 && a.top_k < v) order.resize(static_cast<size_t>(a.top_k));
    const float lmax = l[order[0]];
    int64_t id = order[0];
    if (a.temperature != 0.0f && lmax > -std::numeric_limits<float>::infinity()) {
      const float scale = static_cast<float>(1.4426950408889634 / static_cast<double>(a.temperature));
      id = sample_sequence(l, order, lmax, scale, a.top_p, uniform53(a.seed, step, b));
    }
    store_id(args->outputs[0], b, id);
  }
  return SK_OK;
}

}  // namespace sk::ref
