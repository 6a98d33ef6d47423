// References of the matmul family: bf16 / W8A8 matmuls, activation quantisation and the grouped
// (mixture-of-experts) matmuls. Float dot products accumulate in double; the int8 ones are the
// exact integer sums followed by the documented f32 expression, so those kernels must match
// bit for bit.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"

namespace sk::ref {
namespace {

float bf16_at(const sk_tensor_arg& t, const int64_t* idx) {
  const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(t.data)[offset_of(t, idx)]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE binary16 by its definition: (-1)^s * 2^(e - 15) * (1 + m / 1024), subnormals
// 2^-14 * m / 1024, e = 31 infinities and NaN.
float f16_at(const sk_tensor_arg& t, const int64_t* idx) {
  const uint16_t h = static_cast<const uint16_t*>(t.data)[offset_of(t, idx)];
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
  if (e == 31) return static_cast<float>(m == 0 ? sign * HUGE_VAL : std::nan(""));
  if (e == 0) return static_cast<float>(sign * std::ldexp(m / 1024.0, -14));
  return static_cast<float>(sign * std::ldexp(1.0 + m / 1024.0, e - 15));
}

int8_t& i8_at(const sk_tensor_arg& t, const int64_t* idx) { return static_cast<int8_t*>(t.data)[offset_of(t, idx)]; }

int32_t i32_at(const sk_tensor_arg& t, const int64_t* idx) {
  return static_cast<const int32_t*>(t.data)[offset_of(t, idx)];
}

// The per-row definition of quantize.i8 (see quantize.cc), spelled out without SIMD.
float quantize_values(const std::vector<float>& x, std::vector<int8_t>* q) {
  float amax = 0.0f;
  for (float v : x) {
    if (std::isnan(v)) continue;
    amax = std::fmax(amax, std::fabs(v));
  }
  const float scale = amax / 127.0f;
  q->assign(x.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i] / scale;
    if (std::isnan(v)) continue;
    (*q)[i] = static_cast<int8_t>(std::nearbyint(std::fmin(std::fmax(v, -127.0f), 127.0f)));
  }
  return scale;
}

bool leading_shape_is(const sk_tensor_arg& t, const sk_tensor_arg& x) {
  if (t.rank != x.rank - 1) return false;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] != x.shape[d]) return false;
  }
  return true;
}

// Shapes of "x[..., K] times w[N, K] transposed -> y[..., N]".
bool linear_shapes(const sk_tensor_arg& x, const sk_tensor_arg& w, const sk_tensor_arg& y) {
  if (x.rank < 1 || w.rank != 2 || y.rank != x.rank) return false;
  const int last = x.rank - 1;
  if (w.shape[1] != x.shape[last] || y.shape[last] != w.shape[0]) return false;
  for (int i = 0; i < last; ++i) {
    if (y.shape[i] != x.shape[i]) return false;
  }
  return true;
}

// Calls fn(row index, x row values) for every row of x [..., K].
template <class Fn>
void for_each_row(const sk_tensor_arg& x, Fn&& fn) {
  const int last = x.rank - 1;
  for_each_index(last, x.shape, [&](const int64_t* row) {
    int64_t idx[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) idx[i] = row[i];
    fn(static_cast<const int64_t*>(idx));
  });
}

// y[row, n] = float(sum_k q[k] * w[n, k]) * (row_scale * w_scale[n]) for one row of q values
// (already clamped to [-127, 127]).
void w8_row(const std::vector<int8_t>& q, float row_scale, const sk_tensor_arg& w, int64_t w_lead,
            const sk_tensor_arg& ws, const sk_tensor_arg& y, const int64_t* y_idx_in) {
  const int64_t n = w.shape[w.rank - 2];
  const int last = y.rank - 1;
  int64_t yi[SK_MAX_RANK] = {};
  for (int i = 0; i < last; ++i) yi[i] = y_idx_in[i];
  for (int64_t j = 0; j < n; ++j) {
    int64_t sum = 0;
    for (size_t k = 0; k < q.size(); ++k) {
      int64_t wi[3] = {};
      if (w.rank == 3) {
        wi[0] = w_lead;
        wi[1] = j;
        wi[2] = static_cast<int64_t>(k);
      } else {
        wi[0] = j;
        wi[1] = static_cast<int64_t>(k);
      }
      sum += static_cast<int64_t>(q[k]) * static_cast<const int8_t*>(w.data)[offset_of(w, wi)];
    }
    int64_t si[2] = {};
    if (ws.rank == 2) {
      si[0] = w_lead;
      si[1] = j;
    } else {
      si[0] = j;
    }
    yi[last] = j;
    f32_at(y, yi) = static_cast<float>(static_cast<int32_t>(sum)) * (row_scale * f32_at(ws, si));
  }
}

// y[..., n] = sum_k x[..., k] * float(w[n, k]) for 16-bit float weights read by `at`.
int32_t matmul_half(const sk_kernel_args* args, int32_t w_dtype, float (*at)(const sk_tensor_arg&, const int64_t*)) {
  if (!has_operands(args, 2, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.dtype != SK_DTYPE_F32 || w.dtype != w_dtype || y.dtype != SK_DTYPE_F32) return SK_ERR_INVALID_ARGUMENT;
  if (!linear_shapes(x, w, y)) return SK_ERR_INVALID_ARGUMENT;
  const int last = x.rank - 1;
  const int64_t k = x.shape[last];
  const int64_t n = w.shape[0];
  for_each_row(x, [&](const int64_t* row) {
    int64_t xi[SK_MAX_RANK] = {};
    int64_t yi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) xi[i] = yi[i] = row[i];
    for (yi[last] = 0; yi[last] < n; ++yi[last]) {
      double acc = 0.0;
      int64_t wi[2] = {yi[last], 0};
      for (xi[last] = 0; xi[last] < k; ++xi[last]) {
        wi[1] = xi[last];
        acc += static_cast<double>(f32_at(x, xi)) * at(w, wi);
      }
      f32_at(y, yi) = static_cast<float>(acc);
    }
  });
  return SK_OK;
}

}  // namespace

// q[..., k], scale[...] per row of x
int32_t quantize_i8(const sk_kernel_args* args) {
  if (!has_operands(args, 1, 2)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& q = args->outputs[0];
  const sk_tensor_arg& scale = args->outputs[1];
  if (x.dtype != SK_DTYPE_F32 || q.dtype != SK_DTYPE_I8 || scale.dtype != SK_DTYPE_F32) return SK_ERR_INVALID_ARGUMENT;
  if (x.rank < 1 || !same_shape(x, q) || !leading_shape_is(scale, x)) return SK_ERR_INVALID_ARGUMENT;
  const int last = x.rank - 1;
  const int64_t k = x.shape[last];
  for_each_row(x, [&](const int64_t* row) {
    int64_t xi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) xi[i] = row[i];
    std::vector<float> values(static_cast<size_t>(k));
    for (xi[last] = 0; xi[last] < k; ++xi[last]) values[static_cast<size_t>(xi[last])] = f32_at(x, xi);
    std::vector<int8_t> qv;
    const float s = quantize_values(values, &qv);
    for (xi[last] = 0; xi[last] < k; ++xi[last]) i8_at(q, xi) = qv[static_cast<size_t>(xi[last])];
    f32_at(scale, xi) = s;
  });
  return SK_OK;
}

// inputs q, x_scale, w, w_scale
int32_t matmul_w8a8(const sk_kernel_args* args) {
  if (!has_operands(args, 4, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& q = args->inputs[0];
  const sk_tensor_arg& xs = args->inputs[1];
  const sk_tensor_arg& w = args->inputs[2];
  const sk_tensor_arg& ws = args->inputs[3];
  const sk_tensor_arg& y = args->outputs[0];
  if (q.dtype != SK_DTYPE_I8 || xs.dtype != SK_DTYPE_F32 || w.dtype != SK_DTYPE_I8 || ws.dtype != SK_DTYPE_F32 ||
      y.dtype != SK_DTYPE_F32) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  if (!linear_shapes(q, w, y) || !leading_shape_is(xs, q) || ws.rank != 1 || ws.shape[0] != w.shape[0]) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int last = q.rank - 1;
  const int64_t k = q.shape[last];
  for_each_row(q, [&](const int64_t* row) {
    int64_t qi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) qi[i] = row[i];
    std::vector<int8_t> values(static_cast<size_t>(k));
    for (qi[last] = 0; qi[last] < k; ++qi[last]) {
      const int8_t v = i8_at(q, qi);
      values[static_cast<size_t>(qi[last])] = v < -127 ? static_cast<int8_t>(-127) : v;
    }
    w8_row(values, f32_at(xs, qi), w, 0, ws, y, qi);
  });
  return SK_OK;
}

// inputs x, w, w_scale: quantize.i8 of each row, then matmul.w8a8
int32_t matmul_w8a8_dyn(const sk_kernel_args* args) {
  if (!has_operands(args, 3, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& ws = args->inputs[2];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.dtype != SK_DTYPE_F32 || w.dtype != SK_DTYPE_I8 || ws.dtype != SK_DTYPE_F32 || y.dtype != SK_DTYPE_F32) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  if (!linear_shapes(x, w, y) || ws.rank != 1 || ws.shape[0] != w.shape[0]) return SK_ERR_INVALID_ARGUMENT;
  const int last = x.rank - 1;
  const int64_t k = x.shape[last];
  for_each_row(x, [&](const int64_t* row) {
    int64_t xi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) xi[i] = row[i];
    std::vector<float> values(static_cast<size_t>(k));
    for (xi[last] = 0; xi[last] < k; ++xi[last]) values[static_cast<size_t>(xi[last])] = f32_at(x, xi);
    std::vector<int8_t> qv;
    const float s = quantize_values(values, &qv);
    w8_row(qv, s, w, 0, ws, y, xi);
  });
  return SK_OK;
}

namespace {

// The 4-bit weight operands: w i8 [N, K/2] (k = 2j in the low 4 bits of byte j, k = 2j + 1 in the
// high 4), w_scale f32 or f16 [K/G, N], optional w_zero i8 [K/G, N] (8 when absent); or the tiled
// layout: w [N/16, ceil(K/128), 16, 64] (byte j of row n at [n / 16, j / 64, n % 16, j % 64]),
// w_scale and w_zero [N/16, K/G, 16] (group g of row n at [n / 16, g, n % 16]).
struct W4Ref {
  const sk_tensor_arg* w = nullptr;
  const sk_tensor_arg* scale = nullptr;
  const sk_tensor_arg* zero = nullptr;
  int64_t group = 0;
  bool tiled = false;

  int32_t q(int64_t n, int64_t k) const {
    const int64_t j = k / 2;
    int64_t rows[2] = {n, j};
    int64_t tiles[4] = {n / 16, j / 64, n % 16, j % 64};
    const auto byte = static_cast<uint8_t>(static_cast<const int8_t*>(w->data)[offset_of(*w, tiled ? tiles : rows)]);
    return k % 2 == 0 ? byte & 0xF : byte >> 4;
  }
  float s(int64_t g, int64_t n) const {
    int64_t rows[2] = {g, n};
    int64_t tiles[3] = {n / 16, g, n % 16};
    int64_t* si = tiled ? tiles : rows;
    return scale->dtype == SK_DTYPE_F16 ? f16_at(*scale, si) : f32_at(*scale, si);
  }
  int32_t z(int64_t g, int64_t n) const {
    if (zero == nullptr) return 8;
    int64_t rows[2] = {g, n};
    int64_t tiles[3] = {n / 16, g, n % 16};
    return static_cast<const int8_t*>(zero->data)[offset_of(*zero, tiled ? tiles : rows)];
  }
  int64_t n() const { return tiled ? w->shape[0] * 16 : w->shape[0]; }
};

// Operands of matmul.w4 / matmul.w4a8_dyn, or false.
bool w4_operands(const sk_kernel_args* args, W4Ref* r) {
  if (args == nullptr || (args->num_inputs != 3 && args->num_inputs != 4) || !has_operands(args, args->num_inputs, 1)) {
    return false;
  }
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& s = args->inputs[2];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.dtype != SK_DTYPE_F32 || w.dtype != SK_DTYPE_I8 || y.dtype != SK_DTYPE_F32) return false;
  if (s.dtype != SK_DTYPE_F32 && s.dtype != SK_DTYPE_F16) return false;
  if (x.rank < 1 || y.rank != x.rank) return false;
  const int64_t k = x.shape[x.rank - 1];
  const bool tiled = w.rank == 4;
  if (tiled) {
    if (s.rank != 3 || w.shape[1] != (k + 127) / 128 || w.shape[2] != 16 || w.shape[3] != 64 ||
        s.shape[0] != w.shape[0] || s.shape[2] != 16 || y.shape[y.rank - 1] != w.shape[0] * 16)
      return false;
  } else if (w.rank != 2 || s.rank != 2 || w.shape[1] * 2 != k || s.shape[1] != w.shape[0] ||
             y.shape[y.rank - 1] != w.shape[0]) {
    return false;
  }
  const int64_t groups = s.shape[tiled ? 1 : 0];
  if (k > 0 && (groups == 0 || k % groups != 0)) return false;
  r->w = &w;
  r->scale = &s;
  r->zero = args->num_inputs == 4 ? &args->inputs[3] : nullptr;
  r->group = k > 0 ? k / groups : 1;
  r->tiled = tiled;
  return true;
}

}  // namespace

// matmul.w4a8_dyn: quantize.i8 of each row of x, exact int32 group dot products minus the zero
// point times the group's sum of q, an f32 fused multiply-add per group in group order, times the
// row's scale.
int32_t matmul_w4a8_dyn(const sk_kernel_args* args) {
  W4Ref wr;
  if (!w4_operands(args, &wr)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& y = args->outputs[0];
  const int last = x.rank - 1;
  const int64_t k = x.shape[last];
  const int64_t n = wr.n();
  for_each_row(x, [&](const int64_t* row) {
    int64_t xi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) xi[i] = row[i];
    std::vector<float> values(static_cast<size_t>(k));
    for (xi[last] = 0; xi[last] < k; ++xi[last]) values[static_cast<size_t>(xi[last])] = f32_at(x, xi);
    std::vector<int8_t> qv;
    const float xs = quantize_values(values, &qv);
    int64_t yi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) yi[i] = row[i];
    for (yi[last] = 0; yi[last] < n; ++yi[last]) {
      const int64_t j = yi[last];
      float acc = 0.0f;
      for (int64_t g = 0; g * wr.group < k; ++g) {
        int64_t dot = 0;
        int64_t qsum = 0;
        for (int64_t i = g * wr.group; i < (g + 1) * wr.group; ++i) {
          dot += static_cast<int64_t>(qv[static_cast<size_t>(i)]) * wr.q(j, i);
          qsum += qv[static_cast<size_t>(i)];
        }
        const int64_t d = dot - static_cast<int64_t>(wr.z(g, j)) * qsum;
        acc = std::fma(static_cast<float>(d), wr.s(g, j), acc);
      }
      f32_at(y, yi) = acc * xs;
    }
  });
  return SK_OK;
}

// matmul.w4: x times the dequantised weights s * (q - z) (each rounded to f32), in double.
int32_t matmul_w4(const sk_kernel_args* args) {
  W4Ref wr;
  if (!w4_operands(args, &wr)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& y = args->outputs[0];
  const int last = x.rank - 1;
  const int64_t k = x.shape[last];
  const int64_t n = wr.n();
  for_each_row(x, [&](const int64_t* row) {
    int64_t xi[SK_MAX_RANK] = {};
    int64_t yi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) xi[i] = yi[i] = row[i];
    for (yi[last] = 0; yi[last] < n; ++yi[last]) {
      const int64_t j = yi[last];
      double acc = 0.0;
      for (xi[last] = 0; xi[last] < k; ++xi[last]) {
        const int64_t i = xi[last];
        const int64_t g = i / wr.group;
        const float wv = wr.s(g, j) * static_cast<float>(wr.q(j, i) - wr.z(g, j));
        acc += static_cast<double>(f32_at(x, xi)) * wv;
      }
      f32_at(y, yi) = static_cast<float>(acc);
    }
  });
  return SK_OK;
}

namespace {

// Grouped matmuls: x [R, K], counts [E], w [E, N, K] (, w_scale [E, N]) -> y [R, N].
int32_t grouped(const sk_kernel_args* args, int32_t w_dtype) {
  const int32_t inputs = w_dtype == SK_DTYPE_I8 ? 4 : 3;
  if (!has_operands(args, inputs, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& counts = args->inputs[1];
  const sk_tensor_arg& w = args->inputs[2];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.dtype != SK_DTYPE_F32 || counts.dtype != SK_DTYPE_I32 || w.dtype != w_dtype || y.dtype != SK_DTYPE_F32) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  if (x.rank != 2 || counts.rank != 1 || w.rank != 3 || y.rank != 2) return SK_ERR_INVALID_ARGUMENT;
  const int64_t r = x.shape[0];
  const int64_t k = x.shape[1];
  const int64_t e = counts.shape[0];
  const int64_t n = w.shape[1];
  if (w.shape[0] != e || w.shape[2] != k || y.shape[0] != r || y.shape[1] != n) return SK_ERR_INVALID_ARGUMENT;
  if (w_dtype == SK_DTYPE_I8) {
    const sk_tensor_arg& ws = args->inputs[3];
    if (ws.dtype != SK_DTYPE_F32 || ws.rank != 2 || ws.shape[0] != e || ws.shape[1] != n) {
      return SK_ERR_INVALID_ARGUMENT;
    }
  }
  int64_t total = 0;
  for (int64_t i = 0; i < e; ++i) {
    const int64_t c = i32_at(counts, &i);
    if (c < 0) return SK_ERR_INVALID_ARGUMENT;
    total += c;
  }
  if (total > r) return SK_ERR_INVALID_ARGUMENT;
  int64_t row = 0;
  for (int64_t ex = 0; ex <= e; ++ex) {
    // ex == e: the rows nobody was routed to.
    const int64_t c = ex < e ? i32_at(counts, &ex) : r - total;
    for (int64_t i = 0; i < c; ++i, ++row) {
      int64_t xi[2] = {row, 0};
      int64_t yi[2] = {row, 0};
      if (ex == e) {
        for (yi[1] = 0; yi[1] < n; ++yi[1]) f32_at(y, yi) = 0.0f;
        continue;
      }
      if (w_dtype == SK_DTYPE_I8) {
        std::vector<float> values(static_cast<size_t>(k));
        for (xi[1] = 0; xi[1] < k; ++xi[1]) values[static_cast<size_t>(xi[1])] = f32_at(x, xi);
        std::vector<int8_t> qv;
        const float s = quantize_values(values, &qv);
        w8_row(qv, s, w, ex, args->inputs[3], y, yi);
        continue;
      }
      for (yi[1] = 0; yi[1] < n; ++yi[1]) {
        double acc = 0.0;
        for (xi[1] = 0; xi[1] < k; ++xi[1]) {
          const int64_t wi[3] = {ex, yi[1], xi[1]};
          const double wv = w_dtype == SK_DTYPE_BF16  ? bf16_at(w, wi)
                            : w_dtype == SK_DTYPE_F16 ? f16_at(w, wi)
                                                      : f32_at(w, wi);
          acc += static_cast<double>(f32_at(x, xi)) * wv;
        }
        f32_at(y, yi) = static_cast<float>(acc);
      }
    }
  }
  return SK_OK;
}

}  // namespace

// y[..., n] = sum_k x[..., k] * float(w[n, k]), w bf16
int32_t matmul_bf16(const sk_kernel_args* args) { return matmul_half(args, SK_DTYPE_BF16, bf16_at); }

// y[..., n] = sum_k x[..., k] * float(w[n, k]), w f16
int32_t matmul_f16(const sk_kernel_args* args) { return matmul_half(args, SK_DTYPE_F16, f16_at); }

int32_t grouped_matmul_f32(const sk_kernel_args* args) { return grouped(args, SK_DTYPE_F32); }
int32_t grouped_matmul_bf16(const sk_kernel_args* args) { return grouped(args, SK_DTYPE_BF16); }
int32_t grouped_matmul_f16(const sk_kernel_args* args) { return grouped(args, SK_DTYPE_F16); }
int32_t grouped_matmul_w8a8_dyn(const sk_kernel_args* args) { return grouped(args, SK_DTYPE_I8); }

}  // namespace sk::ref
