#pragma once
// Typed op attributes, as carried by OpDesc.attrs in framework.proto.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/errors.h"

namespace fleet::framework {

using Attribute =
    std::variant<int32_t, float, std::string, std::vector<int32_t>, std::vector<float>,
                 std::vector<std::string>, bool, std::vector<bool>, int64_t, std::vector<int64_t>>;

std::string AttributeToString(const Attribute& attr);

class AttributeMap {
 public:
  bool Has(const std::string& name) const { return attrs_.contains(name); }
  void Set(const std::string& name, Attribute value) { attrs_[name] = std::move(value); }
  const absl::flat_hash_map<std::string, Attribute>& items() const { return attrs_; }

  // The attribute as T. Scalars convert among int32, int64, float and bool, and integer lists
  // among int32 and int64, because Python writes the narrowest type that holds a value.
  // Throws NotFound when missing, InvalidArgument when of an unconvertible type; `owner` names
  // the op in the message.
  template <typename T>
  T Get(const std::string& name, const std::string& owner) const;

  template <typename T>
  T GetOr(const std::string& name, T fallback, const std::string& owner) const {
    return Has(name) ? Get<T>(name, owner) : fallback;
  }

 private:
  absl::flat_hash_map<std::string, Attribute> attrs_;
};

}  // namespace fleet::framework
