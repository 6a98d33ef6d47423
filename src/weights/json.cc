#include "weights/json.h"

#include <cstdint>
#include <limits>
#include <unordered_set>

namespace sk::json {
namespace {

constexpr int kMaxDepth = 128;

class Parser {
 public:
  Parser(std::string_view text, const std::string& origin) : text_(text), origin_(origin) {}

  Expected<Value> document() {
    Value v;
    skip_space();
    if (!value(v, 0)) return error_;
    skip_space();
    if (pos_ != text_.size()) {
      fail("unexpected '" + std::string(1, text_[pos_]) + "' after the JSON value");
      return error_;
    }
    return v;
  }

 private:
  // Records the error at the current position; returns false for `return fail(...)`.
  bool fail(const std::string& what) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    error_ =
        Status::invalid_argument(origin_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what);
    return false;
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        break;
      }
      ++pos_;
    }
  }

  bool value(Value& v, int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (pos_ >= text_.size()) return fail("unexpected end of input, expected a value");
    v.line = line_;
    const char c = text_[pos_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v.kind = Value::Kind::kString;
      return string(v.text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(v);
    for (const char* word : {"true", "false", "null"}) {
      if (text_.substr(pos_).starts_with(word)) {
        v.kind = word[0] == 'n' ? Value::Kind::kNull : Value::Kind::kBool;
        v.text = word;
        pos_ += std::string_view(word).size();
        return true;
      }
    }
    return fail("unexpected '" + std::string(1, c) + "', expected a value");
  }

  bool expect(char c, const char* what) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return fail(std::string("expected ") + what);
  }

  bool object(Value& v, int depth) {
    v.kind = Value::Kind::kObject;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return true;
    }
    std::unordered_set<std::string> keys;  // headers of big checkpoints hold tens of thousands
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected a quoted object key");
      const size_t key_pos = pos_;
      std::string key;
      if (!string(key)) return false;
      if (!keys.insert(key).second) {
        pos_ = key_pos;
        return fail("duplicate key '" + key + "'");
      }
      if (!expect(':', "':' after an object key")) return false;
      skip_space();
      Value member;
      if (!value(member, depth + 1)) return false;
      v.members.emplace_back(std::move(key), std::move(member));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      return expect('}', "',' or '}' in an object");
    }
  }

  bool array(Value& v, int depth) {
    v.kind = Value::Kind::kArray;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      skip_space();
      Value item;
      if (!value(item, depth + 1)) return false;
      v.items.push_back(std::move(item));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      return expect(']', "',' or ']' in an array");
    }
  }

  bool number(Value& v) {
    v.kind = Value::Kind::kNumber;
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (text_[pos_] == '-') ++pos_;
    if (!digits()) return fail("a number needs digits");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digits()) return fail("a number needs digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digits()) return fail("a number needs digits in its exponent");
    }
    v.text = std::string(text_.substr(start, pos_ - start));
    return true;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  bool hex4(uint32_t* out) {
    if (text_.size() - pos_ < 4) return fail("a \\u escape needs four hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        --pos_;
        return fail("a \\u escape needs four hex digits");
      }
    }
    *out = v;
    return true;
  }

  bool string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (++pos_ >= text_.size()) return fail("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00) {  // a high surrogate needs its low half
            uint32_t low = 0;
            if (!text_.substr(pos_).starts_with("\\u")) return fail("unpaired surrogate in a \\u escape");
            pos_ += 2;
            if (!hex4(&low)) return false;
            if (low < 0xdc00 || low >= 0xe000) return fail("unpaired surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            return fail("unpaired surrogate in a \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          return fail("unknown escape '\\" + std::string(1, e) + "'");
      }
    }
  }

  std::string_view text_;
  const std::string& origin_;
  size_t pos_ = 0;
  int line_ = 1;
  Status error_;
};

}  // namespace

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNull:
      return "null";
    case Value::Kind::kBool:
      return "a boolean";
    case Value::Kind::kNumber:
      return "a number";
    case Value::Kind::kString:
      return "a string";
    case Value::Kind::kArray:
      return "an array";
    case Value::Kind::kObject:
      return "an object";
  }
  return "?";
}

Expected<Value> parse(std::string_view text, const std::string& origin) { return Parser(text, origin).document(); }

bool as_non_negative_int(const Value& v, int64_t* out) {
  if (v.kind != Value::Kind::kNumber || v.text.empty() || v.text[0] == '-') return false;
  int64_t r = 0;
  for (char c : v.text) {
    if (c < '0' || c > '9') return false;
    const int d = c - '0';
    if (r > (std::numeric_limits<int64_t>::max() - d) / 10) return false;
    r = r * 10 + d;
  }
  *out = r;
  return true;
}

}  // namespace sk::json
