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

// A product the compiler may not fuse into the next addition (the specification has no FMA).
double product(double a, double b) {
  volatile double p = a * b;
  return p;
}

double weight(float l, float lmax, double inv_t) {
  if (std::isnan(l)) return 0.0;
  if (l == lmax) return 1.0;
  return sample_exp((static_cast<double>(l) - static_cast<double>(lmax)) * inv_t);
}

double uniform(uint64_t seed, int64_t step, int64_t row) {
  const auto st = static_cast<uint64_t>(step);
  uint32_t ctr[4] = {static_cast<uint32_t>(st & 0xFFFFFFFFu), static_cast<uint32_t>(st >> 32),
                     static_cast<uint32_t>(row), 0};
  const uint32_t key[2] = {static_cast<uint32_t>(seed & 0xFFFFFFFFu), static_cast<uint32_t>(seed >> 32)};
  philox4x32_10(ctr, key);
  const uint64_t hi = ctr[0];
  const uint64_t lo = ctr[1] >> 11;
  return std::ldexp(static_cast<double>(hi * 2097152u + lo), -53);
}

// The weights of blocks of 8 indices, each summed as ((w0+w4)+(w2+w6))+((w1+w5)+(w3+w7)).
std::vector<double> block_sums(const std::vector<float>& l, float lmax, double inv_t) {
  std::vector<double> beta;
  const auto v = static_cast<int64_t>(l.size());
  for (int64_t j = 0; j * 8 < v; ++j) {
    double w[8] = {};
    for (int64_t e = 0; e < 8 && j * 8 + e < v; ++e) w[e] = weight(l[j * 8 + e], lmax, inv_t);
    beta.push_back(((w[0] + w[4]) + (w[2] + w[6])) + ((w[1] + w[5]) + (w[3] + w[7])));
  }
  return beta;
}

int64_t sample_dense(const std::vector<float>& l, float lmax, double inv_t, double u) {
  const std::vector<double> beta = block_sums(l, lmax, inv_t);
  double total = 0.0;
  for (double b : beta) total += b;
  const double r = u * total;
  const auto v = static_cast<int64_t>(l.size());
  double run = 0.0;
  for (size_t j = 0; j < beta.size(); ++j) {
    if (run + beta[j] > r) {
      double acc = run;
      int64_t last = -1;
      for (int64_t i = static_cast<int64_t>(j) * 8; i < v && i < static_cast<int64_t>(j + 1) * 8; ++i) {
        const double w = weight(l[i], lmax, inv_t);
        if (w > 0.0) last = i;
        acc += w;
        if (acc > r) return i;
      }
      return last;
    }
    run += beta[j];
  }
  for (int64_t i = v - 1; i >= 0; --i) {
    if (weight(l[i], lmax, inv_t) > 0.0) return i;
  }
  return 0;
}

// Samples from `seq` (best first). With a nucleus, only the shortest prefix whose running sum
// reaches tau (all of seq when none does) takes part.
int64_t sample_sequence(const std::vector<float>& l, const std::vector<int64_t>& seq, float lmax, double inv_t,
                        bool nucleus, double tau_fraction, bool tau_of_total, double total, double u) {
  const size_t n = seq.size();
  std::vector<double> w(n);
  std::vector<double> cum(n);
  double c = 0.0;
  for (size_t j = 0; j < n; ++j) {
    w[j] = weight(l[seq[j]], lmax, inv_t);
    c += w[j];
    cum[j] = c;
  }
  size_t m = n;
  if (nucleus) {
    const double tau = tau_fraction * (tau_of_total ? total : cum[n - 1]);
    for (size_t j = 0; j < n; ++j) {
      if (cum[j] >= tau) {
        m = j + 1;
        break;
      }
    }
  }
  const double r = u * cum[m - 1];
  for (size_t j = 0; j < m; ++j) {
    if (cum[j] > r) return seq[j];
  }
  for (size_t j = m; j-- > 0;) {
    if (w[j] > 0.0) return seq[j];
  }
  return seq[0];
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

double sample_exp(double x) {
  if (!(x >= -708.0)) return 0.0;
  const double magic = 6755399441055744.0;  // 1.5 * 2^52
  const double t = product(x, 1.4426950408889634) + magic;
  const double n = t - magic;
  int64_t tb;
  int64_t mb;
  std::memcpy(&tb, &t, sizeof tb);
  std::memcpy(&mb, &magic, sizeof mb);
  const int64_t ni = tb - mb;
  const double r = (x - product(n, 6.93147180369123816490e-01)) - product(n, 1.90821492927058770002e-10);
  const double inv_fact[12] = {
      1.0,         1.0,          1.0 / 2.0,     1.0 / 6.0,      1.0 / 24.0,      1.0 / 120.0,
      1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0};
  double p = inv_fact[11];
  for (int i = 10; i >= 0; --i) p = product(p, r) + inv_fact[i];
  return product(p, std::ldexp(1.0, static_cast<int>(ni)));
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
    const std::vector<int64_t> order = ranking(l);
    if (order.empty()) return SK_ERR_INVALID_ARGUMENT;  // V = 0: nothing to sample
    const float lmax = l[order[0]];
    int64_t id = order[0];
    if (a.temperature != 0.0f && lmax > -std::numeric_limits<float>::infinity()) {
      const double u = uniform(a.seed, step, b);
      const double inv_t = 1.0 / static_cast<double>(a.temperature);
      const bool nucleus = a.top_p < 1.0f;
      if (a.top_k > 0 && a.top_k < v) {
        const std::vector<int64_t> top(order.begin(), order.begin() + a.top_k);
        id = sample_sequence(l, top, lmax, inv_t, nucleus, a.top_p, false, 0.0, u);
      } else if (nucleus) {
        double total = 0.0;
        for (double beta : block_sums(l, lmax, inv_t)) total += beta;
        id = sample_sequence(l, order, lmax, inv_t, true, a.top_p, true, total, u);
      } else {
        id = sample_dense(l, lmax, inv_t, u);
      }
    }
    store_id(args->outputs[0], b, id);
  }
  return SK_OK;
}

}  // namespace sk::ref
