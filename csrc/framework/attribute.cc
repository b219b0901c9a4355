#include "framework/attribute.h"

#include <type_traits>

#include "absl/strings/str_join.h"

namespace fleet::framework {
namespace {

template <typename T>
constexpr bool kIsScalar = std::is_arithmetic_v<T>;

template <typename T>
struct IsVector : std::false_type {};
template <typename U>
struct IsVector<std::vector<U>> : std::true_type {};

std::string TypeName(const Attribute& attr) {
  static const char* kNames[] = {"int",     "float", "string", "ints", "floats",
                                 "strings", "bool",  "bools",  "long", "longs"};
  return kNames[attr.index()];
}

}  // namespace

std::string AttributeToString(const Attribute& attr) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::string>) {
          return absl::StrCat("\"", v, "\"");
        } else if constexpr (std::is_same_v<V, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, std::vector<bool>>) {
          std::vector<std::string> parts;
          for (bool b : v) parts.push_back(b ? "true" : "false");
          return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
        } else if constexpr (IsVector<V>::value) {
          return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
        } else {
          return absl::StrCat(v);
        }
      },
      attr);
}

template <typename T>
T AttributeMap::Get(const std::string& name, const std::string& owner) const {
  auto it = attrs_.find(name);
  FLEET_ENFORCE(it != attrs_.end(), NotFound, owner, ": missing attribute '", name, "'");
  const Attribute& attr = it->second;
  if (const T* exact = std::get_if<T>(&attr)) return *exact;
  if constexpr (kIsScalar<T>) {
    bool ok = false;
    T out{};
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (kIsScalar<V>) {
            out = static_cast<T>(v);
            ok = true;
          }
        },
        attr);
    if (ok) return out;
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (const auto* ints = std::get_if<std::vector<int32_t>>(&attr)) {
      return std::vector<int64_t>(ints->begin(), ints->end());
    }
  } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
    if (const auto* longs = std::get_if<std::vector<int64_t>>(&attr)) {
      return std::vector<int32_t>(longs->begin(), longs->end());
    }
  } else if constexpr (std::is_same_v<T, std::vector<float>>) {
    if (const auto* ints = std::get_if<std::vector<int32_t>>(&attr)) {
      return std::vector<float>(ints->begin(), ints->end());
    }
  }
  throw InvalidArgument(absl::StrCat(owner, ": attribute '", name, "' is a ", TypeName(attr), " (",
                                     AttributeToString(attr),
                                     "), which does not convert to the type the op expects"));
}

template int32_t AttributeMap::Get<int32_t>(const std::string&, const std::string&) const;
template int64_t AttributeMap::Get<int64_t>(const std::string&, const std::string&) const;
template float AttributeMap::Get<float>(const std::string&, const std::string&) const;
template bool AttributeMap::Get<bool>(const std::string&, const std::string&) const;
template std::string AttributeMap::Get<std::string>(const std::string&, const std::string&) const;
template std::vector<int32_t> AttributeMap::Get<std::vector<int32_t>>(const std::string&,
                                                                      const std::string&) const;
template std::vector<int64_t> AttributeMap::Get<std::vector<int64_t>>(const std::string&,
                                                                      const std::string&) const;
template std::vector<float> AttributeMap::Get<std::vector<float>>(const std::string&,
                                                                  const std::string&) const;
template std::vector<std::string> AttributeMap::Get<std::vector<std::string>>(
    const std::string&, const std::string&) const;
template std::vector<bool> AttributeMap::Get<std::vector<bool>>(const std::string&,
                                                                const std::string&) const;

}  // namespace fleet::framework
