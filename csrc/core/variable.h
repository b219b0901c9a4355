#pragma once
// Variable: a named slot in a Scope holding one of the value kinds a program uses.

#include <string>
#include <variant>
#include <vector>

#include "core/errors.h"
#include "core/lod_tensor.h"
#include "core/selected_rows.h"

namespace fleet {

// The feed and fetch holders of the executor: one LoDTensor per fed or fetched variable.
using LoDTensorArray = std::vector<LoDTensor>;

class Variable {
 public:
  template <typename T>
  bool IsType() const {
    return std::holds_alternative<T>(holder_);
  }
  bool IsInitialized() const { return !std::holds_alternative<std::monostate>(holder_); }

  // Returns the held value; throws InvalidArgument if the variable holds another kind.
  template <typename T>
  const T& Get() const {
    const T* value = std::get_if<T>(&holder_);
    FLEET_ENFORCE(value != nullptr, InvalidArgument, "variable holds ", KindName(),
                  " but is read as ", KindNameOf<T>());
    return *value;
  }
  // Returns the held value, first turning an empty variable (or one of another kind) into T.
  template <typename T>
  T* GetMutable() {
    if (!std::holds_alternative<T>(holder_)) holder_.template emplace<T>();
    return &std::get<T>(holder_);
  }
  void Clear() { holder_ = std::monostate{}; }

  const char* KindName() const;

 private:
  template <typename T>
  static const char* KindNameOf();

  std::variant<std::monostate, LoDTensor, SelectedRows, LoDTensorArray> holder_;
};

template <>
inline const char* Variable::KindNameOf<LoDTensor>() {
  return "LoDTensor";
}
template <>
inline const char* Variable::KindNameOf<SelectedRows>() {
  return "SelectedRows";
}
template <>
inline const char* Variable::KindNameOf<LoDTensorArray>() {
  return "LoDTensorArray";
}

inline const char* Variable::KindName() const {
  switch (holder_.index()) {
    case 0:
      return "nothing (uninitialised)";
    case 1:
      return "LoDTensor";
    case 2:
      return "SelectedRows";
    default:
      return "LoDTensorArray";
  }
}

}  // namespace fleet
