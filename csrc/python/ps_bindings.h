#pragma once
// What the parameter-server bindings (bind_ps.cc: server, client, futures; bind_ps_tables.cc:
// tables and update rules without RPC) share: the checks that turn Python arguments into the
// engine's types, each refusing a bad value with an InvalidArgument that names it.

#include <pybind11/numpy.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/errors.h"
#include "core/status.h"
#include "core/timeout.h"
#include "fleet/ps/ps.pb.h"
#include "python/bindings.h"

namespace fleet::python {

using ::fleet::ThrowIfError;
using ::fleet::ValueOrThrow;

// The tables and update rules on their own (bind_ps_tables.cc), into `_core.ps`.
void BindPsTables(py::module_& ps);

template <class Message>
inline Message ParseMessage(const py::bytes& bytes, const char* what) {
  Message message;
  FLEET_ENFORCE(message.ParseFromString(std::string(bytes)), InvalidArgument,
                "cannot parse the serialised ", what);
  return message;
}

inline absl::Duration Seconds(double seconds, absl::string_view name = "timeout_s",
                              bool allow_zero = false) {
  return ValueOrThrow(TimeoutFromSeconds(seconds, name, allow_zero));
}

inline uint32_t U32(int64_t value, const char* name) {
  FLEET_ENFORCE(value >= 0 && value <= UINT32_MAX, InvalidArgument, name,
                " must be in [0, 2^32), got ", value);
  return static_cast<uint32_t>(value);
}

// A count of at least 1.
inline size_t Count(int64_t value, const char* name) {
  FLEET_ENFORCE(value >= 1, InvalidArgument, name, " must be at least 1, got ", value);
  return static_cast<size_t>(value);
}

// A C-contiguous array of exactly T, as a span over its memory.
template <class T>
absl::Span<T> ArraySpan(const py::array& array, const char* what, bool writable) {
  using Element = std::remove_const_t<T>;
  FLEET_ENFORCE(array.dtype().is(py::dtype::of<Element>()), InvalidArgument, what,
                ": expected dtype ", py::str(py::dtype::of<Element>()).cast<std::string>(),
                ", got ", py::str(array.dtype()).cast<std::string>());
  FLEET_ENFORCE(array.flags() & py::array::c_style, InvalidArgument, what,
                ": the array must be C-contiguous");
  FLEET_ENFORCE(!writable || array.writeable(), InvalidArgument, what,
                ": the array must be writable");
  return absl::Span<T>(static_cast<T*>(const_cast<void*>(array.data())),
                       static_cast<size_t>(array.size()));
}

}  // namespace fleet::python
