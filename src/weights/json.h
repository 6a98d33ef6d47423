// A small JSON reader for safetensors headers and checkpoint config/index files. It keeps the
// line of every value so configuration errors can point at "config.json:LINE".
#ifndef SUPERKERNEL_WEIGHTS_JSON_H_
#define SUPERKERNEL_WEIGHTS_JSON_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "superkernel/status.h"

namespace sk::json {

struct Member;

struct Value {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  // Strings: the unescaped text; numbers: the text as written; true/false/null: that word.
  std::string text;
  std::vector<Value> items;     // arrays
  std::vector<Member> members;  // objects, in document order
  int line = 0;                 // 1-based line where the value starts

  bool is_object() const { return kind == Kind::kObject; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kNumber; }
  // The member `key` of an object, or nullptr.
  const Value* find(std::string_view key) const;
};

// An object member. Not a std::pair: a pair of an incomplete Value cannot be a member of Value
// under every standard library (clang rejects it); the field names stay those of the pair.
struct Member {
  Member(std::string key, Value value) : first(std::move(key)), second(std::move(value)) {}
  std::string first;
  Value second;
};

const char* kind_name(Value::Kind kind);

// Parses one JSON document. Errors read "<origin>:LINE:COLUMN: what" (a duplicate object key is
// an error too). Nesting deeper than 128 levels is refused.
Expected<Value> parse(std::string_view text, const std::string& origin);

// A non-negative integer number (no sign, fraction or exponent) that fits in int64.
bool as_non_negative_int(const Value& v, int64_t* out);

}  // namespace sk::json

#endif  // SUPERKERNEL_WEIGHTS_JSON_H_
