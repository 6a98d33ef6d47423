// References of tensor.unary, tensor.cast, tensor.binary, tensor.binary_scalar and tensor.where:
// element by element over the output's multi-indices, float math in double on the operands' f32
// values, integer math exact in int64 (wrapping), results rounded through f32.
#include <cmath>

#include "kernels/reference/reference.h"
#include "kernels/reference/tensor_ref_util.h"
#include "superkernel/attrs_tensor.h"

namespace sk::ref {
namespace {

bool is_comparison(int32_t op) { return op >= SK_BINARY_EQ && op <= SK_BINARY_GE; }
bool is_logical(int32_t op) { return op == SK_BINARY_LOGICAL_AND || op == SK_BINARY_LOGICAL_OR; }
bool is_arithmetic(int32_t op) { return op >= SK_BINARY_ADD && op <= SK_BINARY_MINIMUM; }
int category(int32_t d) { return ref_is_float(d) ? 2 : ref_is_int(d) ? 1 : 0; }

// torch's promotion with one-element operands as scalars (docs/kernels_tensor.md).
bool promoted(const sk_tensor_arg& a, const sk_tensor_arg& b, int32_t* out) {
  if (a.dtype == b.dtype) {
    *out = a.dtype;
    return true;
  }
  const bool a1 = ref_numel(a) == 1;
  const bool b1 = ref_numel(b) == 1;
  if (!a1 && !b1) return false;
  int32_t keep = a1 ? b.dtype : a.dtype;
  int32_t scalar = a1 ? a.dtype : b.dtype;
  if (a1 && b1 && category(b.dtype) > category(a.dtype)) {
    keep = b.dtype;
    scalar = a.dtype;
  } else if (a1 && b1) {
    keep = a.dtype;
    scalar = b.dtype;
  }
  *out = category(scalar) > category(keep) ? scalar : keep;
  return true;
}

double unary_f64(int32_t op, double x) {
  switch (op) {
    case SK_UNARY_NEG:
      return -x;
    case SK_UNARY_EXP:
      return std::exp(x);
    case SK_UNARY_LOG:
      return std::log(x);
    case SK_UNARY_SQRT:
      return std::sqrt(x);
    case SK_UNARY_RSQRT:
      return 1.0 / std::sqrt(x);
    case SK_UNARY_SIN:
      return std::sin(x);
    case SK_UNARY_COS:
      return std::cos(x);
    case SK_UNARY_TANH:
      return std::tanh(x);
    case SK_UNARY_SIGMOID:
      return 1.0 / (1.0 + std::exp(-x));
    case SK_UNARY_SILU:
      return x / (1.0 + std::exp(-x));
    case SK_UNARY_GELU:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case SK_UNARY_GELU_TANH:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case SK_UNARY_RELU:
      return std::isnan(x) ? x : std::max(x, 0.0);
    case SK_UNARY_ABS:
      return std::fabs(x);
    case SK_UNARY_RECIPROCAL:
      return 1.0 / x;
    case SK_UNARY_LOGICAL_NOT:
      return x == 0.0 ? 1.0 : 0.0;
    default:
      return x;
  }
}

double binary_f64(int32_t op, double a, double b) {
  switch (op) {
    case SK_BINARY_ADD:
      return a + b;
    case SK_BINARY_SUB:
      return a - b;
    case SK_BINARY_MUL:
      return a * b;
    case SK_BINARY_DIV:
      return a / b;
    case SK_BINARY_POW:
      return std::pow(a, b);
    case SK_BINARY_MAXIMUM:
      return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case SK_BINARY_MINIMUM:
      return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case SK_BINARY_EQ:
      return a == b;
    case SK_BINARY_NE:
      return a != b;
    case SK_BINARY_LT:
      return a < b;
    case SK_BINARY_LE:
      return a <= b;
    case SK_BINARY_GT:
      return a > b;
    case SK_BINARY_GE:
      return a >= b;
    case SK_BINARY_LOGICAL_AND:
      return a != 0.0 && b != 0.0;
    case SK_BINARY_LOGICAL_OR:
      return a != 0.0 || b != 0.0;
    default:
      return a;
  }
}

// Integer op; false for a negative exponent.
bool binary_int(int32_t op, int64_t a, int64_t b, int64_t* out) {
  const auto ua = static_cast<uint64_t>(a);
  const auto ub = static_cast<uint64_t>(b);
  switch (op) {
    case SK_BINARY_ADD:
      *out = static_cast<int64_t>(ua + ub);
      return true;
    case SK_BINARY_SUB:
      *out = static_cast<int64_t>(ua - ub);
      return true;
    case SK_BINARY_MUL:
      *out = static_cast<int64_t>(ua * ub);
      return true;
    case SK_BINARY_POW: {
      if (b < 0) return false;
      uint64_t r = 1;  // a^b mod 2^64 by squaring
      uint64_t base = ua;
      for (uint64_t e = ub; e != 0; e >>= 1) {
        if (e & 1u) r *= base;
        base *= base;
      }
      *out = static_cast<int64_t>(r);
      return true;
    }
    case SK_BINARY_MAXIMUM:
      *out = std::max(a, b);
      return true;
    case SK_BINARY_MINIMUM:
      *out = std::min(a, b);
      return true;
    case SK_BINARY_EQ:
      *out = a == b;
      return true;
    case SK_BINARY_NE:
      *out = a != b;
      return true;
    case SK_BINARY_LT:
      *out = a < b;
      return true;
    case SK_BINARY_LE:
      *out = a <= b;
      return true;
    case SK_BINARY_GT:
      *out = a > b;
      return true;
    case SK_BINARY_GE:
      *out = a >= b;
      return true;
    case SK_BINARY_LOGICAL_AND:
      *out = a != 0 && b != 0;
      return true;
    case SK_BINARY_LOGICAL_OR:
      *out = a != 0 || b != 0;
      return true;
    default:
      return false;
  }
}

int32_t expected_binary_out(int32_t op, int32_t promoted_dtype) {
  if (is_comparison(op) || is_logical(op)) return SK_DTYPE_BOOL;
  if (op == SK_BINARY_DIV && !ref_is_float(promoted_dtype)) return SK_DTYPE_F32;
  return promoted_dtype;
}

}  // namespace

int32_t tensor_unary(const sk_kernel_args* args) {
  sk_unary_attrs a{};
  if (!has_operands(args, 1, 1) || !ref_attrs(args, &a) || a.op < 0 || a.op >= SK_UNARY_OP_COUNT)
    return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  if (!same_shape(x, out)) return SK_ERR_INVALID_ARGUMENT;
  const bool keeps = a.op == SK_UNARY_NEG || a.op == SK_UNARY_RELU || a.op == SK_UNARY_ABS;
  const bool integer = keeps && !ref_is_float(x.dtype);
  if (keeps && x.dtype == SK_DTYPE_BOOL) return SK_ERR_INVALID_ARGUMENT;
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    if (integer) {
      const int64_t v = read_i64(x.dtype, ref_ptr(x, idx));
      const auto u = static_cast<uint64_t>(v);
      const int64_t r = a.op == SK_UNARY_NEG   ? static_cast<int64_t>(0u - u)
                        : a.op == SK_UNARY_ABS ? (v < 0 ? static_cast<int64_t>(0u - u) : v)
                                               : (v < 0 ? 0 : v);
      write_from_i64(out.dtype, ref_ptr_mut(out, idx), r);
    } else {
      write_from_f64(out.dtype, ref_ptr_mut(out, idx), unary_f64(a.op, read_as_f32(x.dtype, ref_ptr(x, idx))));
    }
  });
  return SK_OK;
}

int32_t tensor_cast(const sk_kernel_args* args) {
  if (!has_operands(args, 1, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  if (!same_shape(x, out)) return SK_ERR_INVALID_ARGUMENT;
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    if (ref_is_float(x.dtype)) {
      write_from_f64(out.dtype, ref_ptr_mut(out, idx), read_f64(x.dtype, ref_ptr(x, idx)));
    } else {
      write_from_i64(out.dtype, ref_ptr_mut(out, idx), read_i64(x.dtype, ref_ptr(x, idx)));
    }
  });
  return SK_OK;
}

int32_t tensor_binary(const sk_kernel_args* args) {
  sk_binary_attrs a{};
  if (!has_operands(args, 2, 1) || !ref_attrs(args, &a) || a.op < 0 || a.op >= SK_BINARY_OP_COUNT)
    return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& y = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  int32_t p = 0;
  if (!broadcasts_to(x, out) || !broadcasts_to(y, out) || !promoted(x, y, &p) ||
      out.dtype != expected_binary_out(a.op, p) || (is_arithmetic(a.op) && p == SK_DTYPE_BOOL))
    return SK_ERR_INVALID_ARGUMENT;
  const bool float_math = ref_is_float(p) || a.op == SK_BINARY_DIV;
  int32_t rc = SK_OK;
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    int64_t ix[SK_MAX_RANK] = {};
    int64_t iy[SK_MAX_RANK] = {};
    broadcast_index(x, out.rank, idx, ix);
    broadcast_index(y, out.rank, idx, iy);
    if (float_math) {
      const double r = binary_f64(a.op, read_as_f32(x.dtype, ref_ptr(x, ix)), read_as_f32(y.dtype, ref_ptr(y, iy)));
      write_from_f64(out.dtype, ref_ptr_mut(out, idx), r);
    } else {
      int64_t r = 0;
      if (!binary_int(a.op, read_i64(x.dtype, ref_ptr(x, ix)), read_i64(y.dtype, ref_ptr(y, iy)), &r))
        rc = SK_ERR_INVALID_ARGUMENT;
      write_from_i64(out.dtype, ref_ptr_mut(out, idx), r);
    }
  });
  return rc;
}

int32_t tensor_binary_scalar(const sk_kernel_args* args) {
  sk_binary_scalar_attrs a{};
  if (!has_operands(args, 1, 1) || !ref_attrs(args, &a) || a.op < 0 || a.op >= SK_BINARY_OP_COUNT)
    return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  const bool whole = std::isfinite(a.scalar) && std::nearbyint(a.scalar) == a.scalar && std::fabs(a.scalar) < 0x1p63;
  const bool float_math = ref_is_float(x.dtype) || a.op == SK_BINARY_DIV || !whole;
  if (!same_shape(x, out) || out.dtype != expected_binary_out(a.op, x.dtype) ||
      (is_arithmetic(a.op) && x.dtype == SK_DTYPE_BOOL) ||
      (float_math && !ref_is_float(x.dtype) && is_arithmetic(a.op) && a.op != SK_BINARY_DIV))
    return SK_ERR_INVALID_ARGUMENT;
  int32_t rc = SK_OK;
  const double s = static_cast<float>(a.scalar);  // the kernel computes with the f32 scalar
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    if (float_math) {
      const double v = read_as_f32(x.dtype, ref_ptr(x, idx));
      write_from_f64(out.dtype, ref_ptr_mut(out, idx),
                     a.scalar_first ? binary_f64(a.op, s, v) : binary_f64(a.op, v, s));
    } else {
      const int64_t v = read_i64(x.dtype, ref_ptr(x, idx));
      const auto si = static_cast<int64_t>(a.scalar);
      int64_t r = 0;
      if (!(a.scalar_first ? binary_int(a.op, si, v, &r) : binary_int(a.op, v, si, &r))) rc = SK_ERR_INVALID_ARGUMENT;
      write_from_i64(out.dtype, ref_ptr_mut(out, idx), r);
    }
  });
  return rc;
}

int32_t tensor_where(const sk_kernel_args* args) {
  if (!has_operands(args, 3, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& c = args->inputs[0];
  const sk_tensor_arg& x = args->inputs[1];
  const sk_tensor_arg& y = args->inputs[2];
  const sk_tensor_arg& out = args->outputs[0];
  int32_t p = 0;
  if (c.dtype != SK_DTYPE_BOOL || !broadcasts_to(c, out) || !broadcasts_to(x, out) || !broadcasts_to(y, out) ||
      !promoted(x, y, &p) || p != out.dtype)
    return SK_ERR_INVALID_ARGUMENT;
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    int64_t ic[SK_MAX_RANK] = {};
    int64_t iv[SK_MAX_RANK] = {};
    broadcast_index(c, out.rank, idx, ic);
    const bool take_x = *ref_ptr(c, ic) != 0;
    const sk_tensor_arg& src = take_x ? x : y;
    broadcast_index(src, out.rank, idx, iv);
    if (ref_is_float(out.dtype)) {
      write_from_f64(out.dtype, ref_ptr_mut(out, idx), read_as_f32(src.dtype, ref_ptr(src, iv)));
    } else {
      write_from_i64(out.dtype, ref_ptr_mut(out, idx), read_i64(src.dtype, ref_ptr(src, iv)));
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
