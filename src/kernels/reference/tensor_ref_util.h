// Element access of the tensor-family references (tensor_*.cc in this directory): one element
// of any dtype read as a double or an exact int64, results rounded the way the contract says
// (through f32 for floats), broadcasting by index. Deliberately naive and separate from the
// kernels' block converters (src/kernels/tensor_common.cc).
#ifndef SUPERKERNEL_KERNELS_REFERENCE_TENSOR_REF_UTIL_H_
#define SUPERKERNEL_KERNELS_REFERENCE_TENSOR_REF_UTIL_H_

#include <superkernel/kernel_abi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/reference/ref_util.h"
#include "util/element.h"
#include "util/half.h"

namespace sk::ref {

inline bool ref_is_float(int32_t d) { return d == SK_DTYPE_F32 || d == SK_DTYPE_BF16 || d == SK_DTYPE_F16; }
inline bool ref_is_int(int32_t d) { return d == SK_DTYPE_I8 || d == SK_DTYPE_I32 || d == SK_DTYPE_I64; }

inline const unsigned char* ref_ptr(const sk_tensor_arg& t, const int64_t* idx) {
  return static_cast<const unsigned char*>(t.data) + offset_of(t, idx) * sk_dtype_size(t.dtype);
}
inline unsigned char* ref_ptr_mut(const sk_tensor_arg& t, const int64_t* idx) {
  return static_cast<unsigned char*>(t.data) + offset_of(t, idx) * sk_dtype_size(t.dtype);
}

// The element as a double: floats exactly, integers exactly up to 2^53, bool as 0 / 1.
inline double read_f64(int32_t dtype, const unsigned char* p) { return load_element(dtype, p); }

// The element's value as the f32 the contract computes with (integers rounded to f32).
inline double read_as_f32(int32_t dtype, const unsigned char* p) {
  if (dtype == SK_DTYPE_I64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<float>(v);
  }
  return static_cast<float>(read_f64(dtype, p));
}

// The element as an exact integer (integers and bool only).
inline int64_t read_i64(int32_t dtype, const unsigned char* p) {
  switch (dtype) {
    case SK_DTYPE_I8:
      return static_cast<int8_t>(*p);
    case SK_DTYPE_I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case SK_DTYPE_I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case SK_DTYPE_BOOL:
      return *p != 0 ? 1 : 0;
    default:
      return 0;
  }
}

// Stores a float result: rounded to f32 first (the contract computes in f32), then to the
// output dtype; float -> integer truncates toward zero, NaN and out-of-range give the minimum.
inline void write_from_f64(int32_t dtype, unsigned char* p, double v) {
  const float f = static_cast<float>(v);
  switch (dtype) {
    case SK_DTYPE_F32:
      std::memcpy(p, &f, 4);
      break;
    case SK_DTYPE_BF16: {
      const uint16_t h = f32_to_bf16(f);
      std::memcpy(p, &h, 2);
      break;
    }
    case SK_DTYPE_F16: {
      const uint16_t h = f32_to_f16(f);
      std::memcpy(p, &h, 2);
      break;
    }
    case SK_DTYPE_I8:
    case SK_DTYPE_I32: {
      const double t = std::trunc(static_cast<double>(f));
      const int32_t q = std::isnan(t) || t < -2147483648.0 || t >= 2147483648.0 ? std::numeric_limits<int32_t>::min()
                                                                                : static_cast<int32_t>(t);
      if (dtype == SK_DTYPE_I32) {
        std::memcpy(p, &q, 4);
      } else {
        *p = static_cast<unsigned char>(static_cast<uint32_t>(q) & 0xffu);
      }
      break;
    }
    case SK_DTYPE_I64: {
      const double t = std::trunc(static_cast<double>(f));
      const int64_t q = std::isnan(t) || t < -9223372036854775808.0 || t >= 9223372036854775808.0
                            ? std::numeric_limits<int64_t>::min()
                            : static_cast<int64_t>(t);
      std::memcpy(p, &q, 8);
      break;
    }
    case SK_DTYPE_BOOL:
      *p = f != 0.0f ? 1 : 0;
      break;
    default:
      break;
  }
}

// Stores an exact integer result: wrapping to narrower integers, through f32 to floats.
inline void write_from_i64(int32_t dtype, unsigned char* p, int64_t v) {
  switch (dtype) {
    case SK_DTYPE_I8:
      *p = static_cast<unsigned char>(static_cast<uint64_t>(v) & 0xffu);
      break;
    case SK_DTYPE_I32: {
      const auto q = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v) & 0xffffffffu));
      std::memcpy(p, &q, 4);
      break;
    }
    case SK_DTYPE_I64:
      std::memcpy(p, &v, 8);
      break;
    case SK_DTYPE_BOOL:
      *p = v != 0 ? 1 : 0;
      break;
    default:
      write_from_f64(dtype, p, static_cast<double>(static_cast<float>(v)));
      break;
  }
}

// Index of `t` (right-aligned against `out_idx` of rank out_rank, size-1 dims broadcast).
inline void broadcast_index(const sk_tensor_arg& t, int out_rank, const int64_t* out_idx, int64_t* idx) {
  const int lead = out_rank - t.rank;
  for (int d = 0; d < t.rank; ++d) idx[d] = t.shape[d] == 1 ? 0 : out_idx[lead + d];
}

// True when t broadcasts to out's shape.
inline bool broadcasts_to(const sk_tensor_arg& t, const sk_tensor_arg& out) {
  const int lead = out.rank - t.rank;
  if (lead < 0) return false;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] != 1 && t.shape[d] != out.shape[lead + d]) return false;
  }
  return true;
}

template <class Attrs>
bool ref_attrs(const sk_kernel_args* args, Attrs* a) {
  if (args->attrs == nullptr || args->attrs_size != sizeof(Attrs)) return false;
  std::memcpy(a, args->attrs, sizeof(Attrs));
  return true;
}

inline int64_t ref_numel(const sk_tensor_arg& t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

}  // namespace sk::ref

#endif  // SUPERKERNEL_KERNELS_REFERENCE_TENSOR_REF_UTIL_H_
