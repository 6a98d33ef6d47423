// References of moe_router, moe_dispatch and moe_combine(_shared): double precision, full
// sorts, one expert at a time; nothing shared with the kernels.
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

template <class T>
T& at2(const sk_tensor_arg& t, int64_t r, int64_t c) {
  return static_cast<T*>(t.data)[r * t.stride[0] + c * t.stride[1]];
}

template <class T>
T& at1(const sk_tensor_arg& t, int64_t i) {
  return static_cast<T*>(t.data)[i * t.stride[0]];
}

bool is_2d(const sk_tensor_arg& t, int32_t dtype) { return t.rank == 2 && t.dtype == dtype; }

// Larger first, NaN after every number, equal values (including -0 and +0) by lower index.
bool ranks_before(double a, int64_t ia, double b, int64_t ib) {
  const bool na = std::isnan(a);
  const bool nb = std::isnan(b);
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

template <class A>
bool read(const sk_kernel_args* args, A* out) {
  if (args->attrs == nullptr || args->attrs_size != sizeof(A)) return false;
  std::memcpy(out, args->attrs, sizeof(A));
  return true;
}

int32_t combine(const sk_kernel_args* args, bool shared) {
  if (!has_operands(args, shared ? 5 : 4, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& y = args->inputs[0];
  const sk_tensor_arg& row_map = args->inputs[1];
  const sk_tensor_arg& weights = args->inputs[2];
  const sk_tensor_arg& x = args->inputs[3];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_2d(y, SK_DTYPE_F32) || !is_2d(row_map, SK_DTYPE_I32) || !is_2d(weights, SK_DTYPE_F32) ||
      !is_2d(x, SK_DTYPE_F32) || !is_2d(out, SK_DTYPE_F32) || !same_shape(x, out) || !same_shape(row_map, weights) ||
      row_map.shape[0] != x.shape[0] || y.shape[1] != x.shape[1]) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  if (shared && (!is_2d(args->inputs[4], SK_DTYPE_F32) || !same_shape(args->inputs[4], x))) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t t_count = x.shape[0];
  const int64_t d = x.shape[1];
  const int64_t k = row_map.shape[1];
  for (int64_t t = 0; t < t_count; ++t) {
    for (int64_t s = 0; s < k; ++s) {
      const int32_t row = at2<int32_t>(row_map, t, s);
      if (row < -1 || row >= y.shape[0]) return SK_ERR_INVALID_ARGUMENT;
    }
  }
  for (int64_t t = 0; t < t_count; ++t) {
    for (int64_t c = 0; c < d; ++c) {
      double acc = shared ? at2<float>(args->inputs[4], t, c) : 0.0;
      for (int64_t s = 0; s < k; ++s) {
        const int32_t row = at2<int32_t>(row_map, t, s);
        const double v = row >= 0 ? at2<float>(y, row, c) : at2<float>(x, t, c);
        acc += static_cast<double>(at2<float>(weights, t, s)) * v;
      }
      at2<float>(out, t, c) = static_cast<float>(acc);
    }
  }
  return SK_OK;
}

}  // namespace

int32_t moe_router_f32(const sk_kernel_args* args) {
  sk_moe_router_attrs a{};
  int64_t groups = 1;
  int64_t topk_groups = 1;
  sk_moe_router_group_attrs ga{};
  if (!has_operands(args, 2, 2)) return SK_ERR_INVALID_ARGUMENT;
  if (read(args, &ga)) {
    a = ga.base;
    groups = ga.n_group;
    topk_groups = ga.topk_group;
  } else if (!read(args, &a)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const sk_tensor_arg& logits = args->inputs[0];
  const sk_tensor_arg& bias = args->inputs[1];
  const sk_tensor_arg& ids = args->outputs[0];
  const sk_tensor_arg& weights = args->outputs[1];
  if (!is_2d(logits, SK_DTYPE_F32) || bias.rank != 1 || bias.dtype != SK_DTYPE_F32 || !is_2d(ids, SK_DTYPE_I32) ||
      !is_2d(weights, SK_DTYPE_F32)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t t_count = logits.shape[0];
  const int64_t n = logits.shape[1];
  const int64_t k = a.top_k;
  if (bias.shape[0] != n || k < 1 || k > n || a.num_real_experts < 0 || a.num_real_experts > n ||
      (a.scoring != SK_MOE_SCORING_SOFTMAX && a.scoring != SK_MOE_SCORING_SIGMOID) ||
      (a.normalize != 0 && a.normalize != 1) || !std::isfinite(a.routed_scaling_factor) || ids.shape[0] != t_count ||
      ids.shape[1] != k || !same_shape(ids, weights) || groups < 1 || n % groups != 0 || topk_groups < 1 ||
      topk_groups > groups || k > topk_groups * (n / groups)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t group_size = n / groups;
  std::vector<double> score(static_cast<size_t>(n));
  std::vector<double> key(static_cast<size_t>(n));
  std::vector<double> group_score(static_cast<size_t>(groups));
  std::vector<int64_t> group_order(static_cast<size_t>(groups));
  std::vector<int64_t> order;
  for (int64_t t = 0; t < t_count; ++t) {
    if (a.scoring == SK_MOE_SCORING_SOFTMAX) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t e = 0; e < n; ++e) mx = std::fmax(mx, at2<float>(logits, t, e));
      double sum = 0.0;
      for (int64_t e = 0; e < n; ++e) {
        score[e] = std::exp(static_cast<double>(at2<float>(logits, t, e)) - mx);
        sum += score[e];
      }
      for (double& v : score) v /= sum;
    } else {
      for (int64_t e = 0; e < n; ++e) score[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(at2<float>(logits, t, e))));
    }
    for (int64_t e = 0; e < n; ++e) key[e] = score[e] + at1<float>(bias, e);
    const auto by_key = [&](int64_t i, int64_t j) { return ranks_before(key[i], i, key[j], j); };
    // DeepSeek-V3's group limit: a group scores the sum of its two best keys; the experts of the
    // topk_groups best groups are the candidates.
    for (int64_t g = 0; g < groups; ++g) {
      std::vector<int64_t> members(static_cast<size_t>(group_size));
      std::iota(members.begin(), members.end(), g * group_size);
      std::sort(members.begin(), members.end(), by_key);
      group_score[g] = key[members[0]] + (group_size > 1 ? key[members[1]] : 0.0);
    }
    std::iota(group_order.begin(), group_order.end(), int64_t{0});
    std::sort(group_order.begin(), group_order.end(),
              [&](int64_t i, int64_t j) { return ranks_before(group_score[i], i, group_score[j], j); });
    order.clear();
    for (int64_t j = 0; j < topk_groups; ++j) {
      for (int64_t e = 0; e < group_size; ++e) order.push_back(group_order[j] * group_size + e);
    }
    std::sort(order.begin(), order.end(), by_key);
    double sum = 0.0;
    for (int64_t s = 0; s < k; ++s) sum += score[order[s]];
    for (int64_t s = 0; s < k; ++s) {
      double w = score[order[s]];
      if (a.normalize != 0) w /= sum + 1e-20;
      at2<int32_t>(ids, t, s) = static_cast<int32_t>(order[s]);
      at2<float>(weights, t, s) = static_cast<float>(w * a.routed_scaling_factor);
    }
  }
  return SK_OK;
}

int32_t moe_dispatch_f32(const sk_kernel_args* args) {
  sk_moe_dispatch_attrs a{};
  if (!has_operands(args, 2, 3) || !read(args, &a)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& ids = args->inputs[1];
  const sk_tensor_arg& sorted = args->outputs[0];
  const sk_tensor_arg& counts = args->outputs[1];
  const sk_tensor_arg& row_map = args->outputs[2];
  if (!is_2d(x, SK_DTYPE_F32) || !is_2d(ids, SK_DTYPE_I32) || !is_2d(sorted, SK_DTYPE_F32) || counts.rank != 1 ||
      counts.dtype != SK_DTYPE_I32 || !is_2d(row_map, SK_DTYPE_I32) || a.num_real_experts < 0 ||
      a.num_zero_experts < 0) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t t_count = x.shape[0];
  const int64_t d = x.shape[1];
  const int64_t k = ids.shape[1];
  const int64_t e_count = a.num_real_experts;
  if (ids.shape[0] != t_count || sorted.shape[0] != t_count * k || sorted.shape[1] != d || counts.shape[0] != e_count ||
      !same_shape(row_map, ids)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  for (int64_t t = 0; t < t_count; ++t) {
    for (int64_t s = 0; s < k; ++s) {
      const int32_t id = at2<int32_t>(ids, t, s);
      if (id < 0 || id >= e_count + a.num_zero_experts) return SK_ERR_INVALID_ARGUMENT;
      if (id >= e_count) at2<int32_t>(row_map, t, s) = -1;
    }
  }
  int64_t row = 0;
  for (int64_t e = 0; e < e_count; ++e) {
    int32_t count = 0;
    for (int64_t t = 0; t < t_count; ++t) {
      for (int64_t s = 0; s < k; ++s) {
        if (at2<int32_t>(ids, t, s) != e) continue;
        for (int64_t c = 0; c < d; ++c) at2<float>(sorted, row, c) = at2<float>(x, t, c);
        at2<int32_t>(row_map, t, s) = static_cast<int32_t>(row);
        ++row;
        ++count;
      }
    }
    at1<int32_t>(counts, e) = count;
  }
  for (; row < t_count * k; ++row) {
    for (int64_t c = 0; c < d; ++c) at2<float>(sorted, row, c) = 0.0f;
  }
  return SK_OK;
}

int32_t moe_combine_f32(const sk_kernel_args* args) { return combine(args, false); }
int32_t moe_combine_shared_f32(const sk_kernel_args* args) { return combine(args, true); }

}  // namespace sk::ref
