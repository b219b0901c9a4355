#include "ps/detail/slice_field.h"

namespace fleet::ps::detail {
namespace {

constexpr int kWireLengthDelimited = 2;

}  // namespace

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

std::string LengthDelimitedPrefix(int field, size_t length) {
  std::string prefix;
  AppendVarint((static_cast<uint64_t>(field) << 3) | kWireLengthDelimited, &prefix);
  AppendVarint(length, &prefix);
  return prefix;
}

}  // namespace fleet::ps::detail
