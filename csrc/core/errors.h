#pragma once
// Typed errors of the Fleet core. Every message names the thing at fault (variable, op, file:line,
// endpoint, table id) and what was expected; the Python bindings map each type to the
// fleet.errors exception of the same name. The library never aborts the process.

#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"

namespace fleet {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The caller passed something wrong (shape, dtype, attribute, file content).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// A named thing (variable, op type, file, table) does not exist.
class NotFound : public Error {
 public:
  using Error::Error;
};
// A peer or resource cannot be reached right now.
class Unavailable : public Error {
 public:
  using Error::Error;
};
// A blocking call ran past its deadline.
class Timeout : public Error {
 public:
  using Error::Error;
};
// A broken invariant inside Fleet: a bug, not a user error.
class Internal : public Error {
 public:
  using Error::Error;
};
// Memory ran out, or a request was refused because it would not fit (a table larger than the
// machine): the input may be fine on a larger machine or with less data held at once.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

}  // namespace fleet

// FLEET_ENFORCE(cond, Type, parts...) throws fleet::Type with the parts joined by absl::StrCat
// when cond is false. The parts are only evaluated on failure.
#define FLEET_ENFORCE(cond, ErrorType, ...)                  \
  do {                                                       \
    if (!(cond)) {                                           \
      throw ::fleet::ErrorType(::absl::StrCat(__VA_ARGS__)); \
    }                                                        \
  } while (0)
