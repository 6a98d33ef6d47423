// Helpers shared by the fuzz targets: a reader that turns fuzz bytes into choices (every read
// succeeds; an exhausted input reads as zeros), and the check that turns a broken invariant into
// a crash libFuzzer records.
//
//   sk::fuzz::FuzzInput in(data, size);
//   int rows = in.pick(1, 4);
//   std::string key = in.text(32);
//   SK_FUZZ_CHECK(parsed == reparsed, "parse(print(p)) differs from p");
#ifndef SUPERKERNEL_TESTS_FUZZ_FUZZ_INPUT_H_
#define SUPERKERNEL_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace sk::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return empty() ? 0 : data_[pos_++]; }
  bool flag() { return byte() & 1; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }
  // A value in [lo, hi] (hi - lo < 2^16).
  int pick(int lo, int hi) {
    const uint32_t span = static_cast<uint32_t>(hi - lo) + 1;
    const uint32_t raw = span <= 256 ? byte() : (static_cast<uint32_t>(byte()) << 8 | byte());
    return lo + static_cast<int>(raw % span);
  }
  template <typename T, size_t N>
  const T& one_of(const T (&items)[N]) {
    return items[pick(0, static_cast<int>(N) - 1)];
  }
  // A length-prefixed string of at most `max_len` bytes.
  std::string text(size_t max_len) {
    size_t n = byte() % (max_len + 1);
    std::string s;
    while (n-- > 0 && !empty()) s.push_back(static_cast<char>(byte()));
    return s;
  }
  // Everything not read yet.
  std::string_view rest() {
    std::string_view r(reinterpret_cast<const char*>(data_) + pos_, size_ - pos_);
    pos_ = size_;
    return r;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const std::string& what) {
  std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n  %s\n", file, line, cond, what.c_str());
  std::abort();
}

}  // namespace sk::fuzz

#define SK_FUZZ_CHECK(cond, what) ((cond) ? (void)0 : ::sk::fuzz::check_failed(__FILE__, __LINE__, #cond, (what)))

#endif  // SUPERKERNEL_TESTS_FUZZ_FUZZ_INPUT_H_
