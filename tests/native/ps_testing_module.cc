// tests.python._ps_testing: test-only hooks into a running parameter server (see CMakeLists.txt).
// Errors become fleet exceptions through core/status.h, which fleet._core's translator (loaded
// first: the tests import fleet) turns into fleet.errors.

#include <pybind11/pybind11.h>

#include <string>

#include "core/status.h"
#include "core/timeout.h"
#include "raw_call.h"

namespace py = pybind11;

PYBIND11_MODULE(_ps_testing, m) {
  py::module_::import("fleet._core");  // its exception translator
  m.doc() = "Test-only hooks into parameter servers (not part of fleet)";
  m.def(
      "raw_call",
      [](const std::string& endpoint, const std::string& method, const py::bytes& request,
         double timeout_s) {
        const absl::Duration timeout =
            fleet::ValueOrThrow(fleet::TimeoutFromSeconds(timeout_s, "timeout_s"));
        std::string raw(request);
        absl::StatusOr<std::string> reply;
        {
          py::gil_scoped_release release;
          reply = fleet::ps::RawCall(endpoint, "/fleet.ps.proto.PsService/" + method, raw, timeout);
        }
        return py::bytes(fleet::ValueOrThrow(std::move(reply)));
      },
      py::arg("endpoint"), py::arg("method"), py::arg("request"), py::arg("timeout_s") = 10.0,
      "Sends a serialised request to PsService.<method> unchecked (tests that send malformed "
      "requests on purpose); returns the serialised reply, whose RpcStatus is the caller's to "
      "read.");
}
