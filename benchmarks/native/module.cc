// fleet_bench._bench: the native peers of the benchmarks (the gRPC echo peer, memcpy timing, raw
// Gloo all-reduce). A module of its own so that none of it is in fleet._core or in the wheel;
// benchmarks import it through the fleet_bench package beside them.
//
// Errors become the fleet.errors types, as in fleet._core: an absl::Status by its code, a Gloo
// exception as Timeout or Unavailable. Every blocking call releases the GIL.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "echo.h"
#include "gloo/common/error.h"
#include "memcpy_timer.h"
#include "raw_gloo.h"

namespace fleet::bench {
namespace {

namespace py = pybind11;

// Raised as a Python error of fleet.errors.<type> once pybind11 sees it (see the translator).
struct TypedError {
  const char* type;
  std::string message;
};

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  const char* type = "Internal";
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      type = "InvalidArgument";
      break;
    case absl::StatusCode::kUnavailable:
      type = "Unavailable";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      type = "Timeout";
      break;
    default:
      break;
  }
  throw TypedError{type, std::string(status.ToString())};
}

template <class T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return std::move(*value);
}

absl::Duration Seconds(double seconds) { return absl::Milliseconds(seconds * 1000.0); }

// The bytes of a C-contiguous array.
absl::Span<char> Bytes(const py::array& array, const char* what, bool writable) {
  if (!(array.flags() & py::array::c_style) || (writable && !array.writeable())) {
    throw TypedError{"InvalidArgument", std::string(what) + ": needs a C-contiguous" +
                                            (writable ? " writable" : "") + " array"};
  }
  return absl::Span<char>(static_cast<char*>(const_cast<void*>(array.data())),
                          static_cast<size_t>(array.nbytes()));
}

void BindEcho(py::module_& m) {
  py::class_<EchoServer>(m, "EchoServer", "gRPC echo peer of benchmarks/ps_throughput.py.")
      .def_static(
          "start",
          [](const std::string& address) {
            py::gil_scoped_release release;
            return ValueOrThrow(EchoServer::Start(address));
          },
          py::arg("address") = "127.0.0.1:0")
      .def_property_readonly("endpoint", &EchoServer::endpoint)
      .def("request_stop", &EchoServer::RequestStop)
      .def(
          "wait_for_stop_request",
          [](EchoServer& s, double timeout_s) { return s.WaitForStopRequest(Seconds(timeout_s)); },
          py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>())
      .def(
          "shutdown", [](EchoServer& s, double grace_s) { s.Shutdown(Seconds(grace_s)); },
          py::arg("grace_s"), py::call_guard<py::gil_scoped_release>());
  py::class_<EchoClient>(m, "EchoClient")
      .def(py::init([](const std::vector<std::string>& endpoints, double timeout_s) {
             py::gil_scoped_release release;
             return ValueOrThrow(EchoClient::Connect(endpoints, Seconds(timeout_s)));
           }),
           py::arg("endpoints"), py::arg("timeout_s") = 10.0)
      .def(
          "echo",
          [](EchoClient& c, const py::array& request, const py::array& reply, double timeout_s) {
            absl::Span<char> in = Bytes(request, "request", false);
            absl::Span<char> out = Bytes(reply, "reply", true);
            py::gil_scoped_release release;
            ThrowIfError(c.Echo(in, out, Seconds(timeout_s)));
          },
          py::arg("request"), py::arg("reply"), py::arg("timeout_s") = 60.0,
          "Sends the request bytes, split evenly over the servers; their replies (reply.nbytes "
          "bytes in all) are copied into `reply`.");
}

void BindRawGloo(py::module_& m) {
  py::class_<RawGlooGroup>(m, "RawGlooGroup",
                           "A Gloo group of its own (Gloo's FileStore and TCP transport) whose "
                           "all-reduce is timed with no Fleet code in the loop.")
      .def(py::init([](const std::string& store_dir, int rank, int size, const std::string& name,
                       const std::string& hostname, double timeout_s) {
             // Gloo's FileStore enforces (not throws) this; say which directory is missing.
             if (!std::filesystem::is_directory(store_dir)) {
               throw TypedError{"InvalidArgument",
                                "RawGlooGroup: store_dir '" + store_dir + "' is not a directory"};
             }
             py::gil_scoped_release release;
             return std::make_unique<RawGlooGroup>(
                 store_dir, name, rank, size, hostname,
                 std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)));
           }),
           py::arg("store_dir"), py::arg("rank"), py::arg("size"), py::arg("name") = "raw",
           py::arg("hostname") = "127.0.0.1", py::arg("timeout_s") = 120.0)
      .def_property_readonly("rank", &RawGlooGroup::rank)
      .def_property_readonly("size", &RawGlooGroup::size)
      .def(
          "all_reduce_seconds",
          [](RawGlooGroup& g, py::array_t<float> data, int iters) {
            if (iters <= 0) throw TypedError{"InvalidArgument", "iters must be positive"};
            absl::Span<char> bytes = Bytes(data, "data", true);
            float* ptr = reinterpret_cast<float*>(bytes.data());
            const size_t count = static_cast<size_t>(data.size());
            py::gil_scoped_release release;
            return g.AllReduceSeconds(ptr, count, iters);
          },
          py::arg("data"), py::arg("iters"),
          "Seconds per in-place float32 sum all-reduce of `data`, over `iters` calls (a float32 "
          "array: other dtypes are rejected, not converted, so that it is reduced in place).");
}

void RegisterErrors() {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    auto raise = [](const char* type, const std::string& message) {
      py::object cls = py::module_::import("fleet.errors").attr(type);
      PyErr_SetString(cls.ptr(), message.c_str());
    };
    try {
      std::rethrow_exception(p);
    } catch (const TypedError& e) {
      raise(e.type, e.message);
    } catch (const gloo::Exception& e) {  // IoException: a peer missing, closed or too slow
      raise("Unavailable", std::string("gloo: ") + e.what());
    }
  });
}

}  // namespace
}  // namespace fleet::bench

PYBIND11_MODULE(_bench, m) {
  namespace py = pybind11;
  m.doc() = "Native peers of Fleet's benchmarks (benchmark-only; not part of the fleet package)";
  fleet::bench::RegisterErrors();
  fleet::bench::BindEcho(m);
  fleet::bench::BindRawGloo(m);
  m.def(
      "memcpy_seconds",
      [](size_t bytes, int iterations) { return fleet::bench::MemcpySeconds(bytes, iterations); },
      py::arg("bytes"), py::arg("iterations"), py::call_guard<py::gil_scoped_release>(),
      "Mean seconds of one memcpy of `bytes` bytes over `iterations` copies.");
}
