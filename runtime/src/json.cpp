#include "json.h"

#include <charconv>
#include <cstdio>

#include "format.h"

namespace tfmrt {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
  Parser(const char *p, size_t n) : p_(p), n_(n) {}

  Status parse(JsonValue &out) {
    skipWs();
    if (!value(out, 0)) return err();
    skipWs();
    if (pos_ != n_) {
      fail("unexpected trailing characters after the JSON value");
      return err();
    }
    return Status::OK();
  }

private:
  Status err() const { return invalidArgument(cat("malformed JSON at offset ", errPos_, ": ", error_)); }
  bool fail(const std::string &m) {
    if (error_.empty()) {
      error_ = m;
      errPos_ = pos_;
    }
    return false;
  }
  void skipWs() {
    while (pos_ < n_ && (p_[pos_] == ' ' || p_[pos_] == '\t' || p_[pos_] == '\n' || p_[pos_] == '\r')) ++pos_;
  }
  bool literal(const char *word) {
    size_t len = std::char_traits<char>::length(word);
    if (n_ - pos_ < len || std::char_traits<char>::compare(p_ + pos_, word, len) != 0)
      return fail("invalid literal");
    pos_ += len;
    return true;
  }

  bool value(JsonValue &v, int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than 64 levels");
    if (pos_ >= n_) return fail("unexpected end of input");
    char c = p_[pos_];
    switch (c) {
    case '{': return object(v, depth);
    case '[': return array(v, depth);
    case '"': v.type = JsonValue::Type::String; return string(v.string);
    case 't': v.type = JsonValue::Type::Bool; v.boolean = true; return literal("true");
    case 'f': v.type = JsonValue::Type::Bool; v.boolean = false; return literal("false");
    case 'n': v.type = JsonValue::Type::Null; return literal("null");
    default:
      if (c == '-' || (c >= '0' && c <= '9')) return number(v);
      return fail(cat("unexpected character '", c, "'"));
    }
  }

  bool object(JsonValue &v, int depth) {
    v.type = JsonValue::Type::Object;
    ++pos_;  // '{'
    skipWs();
    if (pos_ < n_ && p_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skipWs();
      if (pos_ >= n_ || p_[pos_] != '"') return fail("expected a string key");
      std::string key;
      size_t keyPos = pos_;
      if (!string(key)) return false;
      for (const auto &m : v.members)
        if (m.first == key) {
          pos_ = keyPos;
          return fail(cat("duplicate key \"", key, "\""));
        }
      skipWs();
      if (pos_ >= n_ || p_[pos_] != ':') return fail("expected ':' after a key");
      ++pos_;
      skipWs();
      v.members.emplace_back(std::move(key), JsonValue());
      if (!value(v.members.back().second, depth + 1)) return false;
      skipWs();
      if (pos_ >= n_) return fail("unterminated object");
      if (p_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (p_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}' in an object");
    }
  }

  bool array(JsonValue &v, int depth) {
    v.type = JsonValue::Type::Array;
    ++pos_;  // '['
    skipWs();
    if (pos_ < n_ && p_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skipWs();
      v.items.emplace_back();
      if (!value(v.items.back(), depth + 1)) return false;
      skipWs();
      if (pos_ >= n_) return fail("unterminated array");
      if (p_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (p_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']' in an array");
    }
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s += char(cp);
    } else if (cp < 0x800) {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += char(0xE0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    } else {
      s += char(0xF0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3F));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t &cp) {
    if (n_ - pos_ < 4) return fail("truncated \\u escape");
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char c = p_[pos_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') cp |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') cp |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') cp |= uint32_t(c - 'A' + 10);
      else return fail("invalid hex digit in \\u escape");
    }
    return true;
  }

  bool string(std::string &s) {
    ++pos_;  // '"'
    for (;;) {
      if (pos_ >= n_) return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(p_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return fail("control character in a string");
      if (c != '\\') {
        s += char(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= n_) return fail("unterminated escape");
      char e = p_[pos_++];
      switch (e) {
      case '"': s += '"'; break;
      case '\\': s += '\\'; break;
      case '/': s += '/'; break;
      case 'b': s += '\b'; break;
      case 'f': s += '\f'; break;
      case 'n': s += '\n'; break;
      case 'r': s += '\r'; break;
      case 't': s += '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp)) return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (n_ - pos_ < 2 || p_[pos_] != '\\' || p_[pos_ + 1] != 'u') return fail("unpaired surrogate in \\u escape");
          pos_ += 2;
          if (!hex4(lo)) return false;
          if (lo < 0xDC00 || lo > 0xDFFF) return fail("invalid low surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return fail("unpaired surrogate in \\u escape");
        }
        appendUtf8(s, cp);
        break;
      }
      default: --pos_; return fail(cat("invalid escape '\\", e, "'"));
      }
    }
  }

  bool number(JsonValue &v) {
    size_t start = pos_;
    bool integral = true;
    if (p_[pos_] == '-') ++pos_;
    if (pos_ >= n_) return fail("truncated number");
    if (p_[pos_] == '0') {
      ++pos_;
    } else if (p_[pos_] >= '1' && p_[pos_] <= '9') {
      while (pos_ < n_ && p_[pos_] >= '0' && p_[pos_] <= '9') ++pos_;
    } else {
      return fail("invalid number");
    }
    if (pos_ < n_ && p_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= n_ || p_[pos_] < '0' || p_[pos_] > '9') return fail("invalid number: digits expected after '.'");
      while (pos_ < n_ && p_[pos_] >= '0' && p_[pos_] <= '9') ++pos_;
    }
    if (pos_ < n_ && (p_[pos_] == 'e' || p_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < n_ && (p_[pos_] == '+' || p_[pos_] == '-')) ++pos_;
      if (pos_ >= n_ || p_[pos_] < '0' || p_[pos_] > '9') return fail("invalid number: digits expected in exponent");
      while (pos_ < n_ && p_[pos_] >= '0' && p_[pos_] <= '9') ++pos_;
    }
    v.type = JsonValue::Type::Number;
    const char *b = p_ + start, *e = p_ + pos_;
    if (integral) {
      auto r = std::from_chars(b, e, v.integer);
      v.isInteger = r.ec == std::errc() && r.ptr == e;
    }
    auto r = std::from_chars(b, e, v.number);
    if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range) return fail("invalid number");
    if (v.isInteger) v.number = double(v.integer);
    return true;
  }

  const char *p_;
  size_t n_;
  size_t pos_ = 0;
  std::string error_;
  size_t errPos_ = 0;
};

}  // namespace

const JsonValue *JsonValue::find(const std::string &key) const {
  for (const auto &m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

const char *JsonValue::typeName(Type t) {
  switch (t) {
  case Type::Null: return "null";
  case Type::Bool: return "boolean";
  case Type::Number: return "number";
  case Type::String: return "string";
  case Type::Array: return "array";
  case Type::Object: return "object";
  }
  return "?";
}

Status parseJson(const char *data, size_t size, JsonValue &out) {
  out = JsonValue();
  return Parser(data, size).parse(out);
}

void appendJsonString(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  out += '"';
}

}  // namespace tfmrt
