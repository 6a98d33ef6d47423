// One element of any kernel-ABI dtype, read or written as a double. Used where tests and
// benchmarks fill operands with chosen values and compare results across dtypes.
//
//   std::vector<uint8_t> buf(n * sk_dtype_size(SK_DTYPE_BF16));
//   sk::store_element(SK_DTYPE_BF16, &buf[i * 2], 0.5);
//   double v = sk::load_element(SK_DTYPE_BF16, &buf[i * 2]);
//
// Floats round to nearest even; integers round to nearest, and i8 saturates to [-128, 127];
// bool stores v != 0 as one byte 0 / 1 and loads any non-zero byte as 1.
#ifndef SUPERKERNEL_UTIL_ELEMENT_H_
#define SUPERKERNEL_UTIL_ELEMENT_H_

#include <superkernel/kernel_abi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "util/half.h"

namespace sk {

inline void store_element(int32_t dtype, void* p, double v) {
  switch (dtype) {
    case SK_DTYPE_F32: {
      const auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case SK_DTYPE_BF16: {
      const uint16_t h = f32_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case SK_DTYPE_F16: {
      const uint16_t h = f32_to_f16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case SK_DTYPE_I8: {
      const auto q = static_cast<int8_t>(std::lround(std::clamp(v, -128.0, 127.0)));
      std::memcpy(p, &q, 1);
      break;
    }
    case SK_DTYPE_I32: {
      const auto q = static_cast<int32_t>(std::llround(v));
      std::memcpy(p, &q, 4);
      break;
    }
    case SK_DTYPE_I64: {
      const auto q = static_cast<int64_t>(std::llround(v));
      std::memcpy(p, &q, 8);
      break;
    }
    case SK_DTYPE_BOOL: {
      const uint8_t b = v != 0.0 ? 1 : 0;
      std::memcpy(p, &b, 1);
      break;
    }
    default:
      break;
  }
}

inline double load_element(int32_t dtype, const void* p) {
  switch (dtype) {
    case SK_DTYPE_F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case SK_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_f32(h);
    }
    case SK_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_to_f32(h);
    }
    case SK_DTYPE_I8: {
      int8_t q;
      std::memcpy(&q, p, 1);
      return q;
    }
    case SK_DTYPE_I32: {
      int32_t q;
      std::memcpy(&q, p, 4);
      return q;
    }
    case SK_DTYPE_I64: {
      int64_t q;
      std::memcpy(&q, p, 8);
      return static_cast<double>(q);
    }
    case SK_DTYPE_BOOL: {
      uint8_t b;
      std::memcpy(&b, p, 1);
      return b != 0 ? 1.0 : 0.0;
    }
    default:
      return 0.0;
  }
}

}  // namespace sk

#endif  // SUPERKERNEL_UTIL_ELEMENT_H_
