// A small strict JSON parser (RFC 8259) for safetensors headers: no comments, no trailing commas,
// no duplicate keys, bounded nesting depth. Not a general-purpose DOM: just what the runtime reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tfmrt/status.h"

namespace tfmrt {

struct JsonValue {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  double number = 0.0;
  bool isInteger = false;  // the literal had no fraction/exponent and fits in int64
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> items;                              // Array
  std::vector<std::pair<std::string, JsonValue>> members;    // Object, in document order

  const JsonValue *find(const std::string &key) const;
  static const char *typeName(Type t);
};

// Parses exactly one JSON value; surrounding whitespace is allowed, anything else is an error
// whose message gives the byte offset.
Status parseJson(const char *data, size_t size, JsonValue &out);

// Appends `s` as a quoted JSON string literal.
void appendJsonString(std::string &out, const std::string &s);

}  // namespace tfmrt
