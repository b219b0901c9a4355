// The NCCL backend's Python face: whether this build and machine have it, the communicator-id
// exchange (testable without a GPU), and a group that connects and meets at barriers. Device
// buffers are not exposed here: collectives on GPU tensors run inside programs.

#include <pybind11/stl.h>

#include "collective/nccl_backend.h"
#include "collective/unique_id_exchange.h"
#include "core/status.h"
#include "core/timeout.h"
#include "python/bindings.h"

namespace fleet::python {
namespace {

using collective::NcclBackend;
using collective::Store;

collective::Duration Seconds(double seconds) {
  return ValueOrThrow(TimeoutMillisFromSeconds(seconds, "timeout_s"));
}

}  // namespace

void BindNccl(py::module_& m) {
  m.def("nccl_compiled", &collective::nccl_compiled,
        "Whether this build has the NCCL backend (CUDA and NCCL found at build time).");
  m.def("nccl_device_count", &collective::cuda_device_count,
        "CUDA devices the NCCL backend can use on this machine (0 without the backend).");
  m.def(
      "exchange_unique_id",
      [](std::shared_ptr<Store> store, const std::string& key, int rank, size_t id_bytes,
         const py::bytes& rank0_bytes, double timeout_s, const std::string& where) {
        const std::string rank0_id = rank0_bytes;
        std::string id;
        {
          py::gil_scoped_release release;
          id = collective::ExchangeUniqueId(
              store.get(), key, rank, id_bytes, [&] { return rank0_id; }, Seconds(timeout_s),
              where);
        }
        return py::bytes(id);
      },
      py::arg("store"), py::arg("key"), py::arg("rank"), py::arg("id_bytes"),
      py::arg("rank0_id") = py::bytes(), py::arg("timeout_s") = 120.0, py::arg("where") = "group",
      "The exchange the NCCL backend uses for its ncclUniqueId: rank 0 publishes rank0_id "
      "under key, every rank returns it (Timeout naming rank 0 and the store if it never does).");
  py::class_<NcclBackend, std::shared_ptr<NcclBackend>>(
      m, "NcclGroup", "A group of ranks running NCCL collectives on GPUs (see nccl_backend.h)")
      .def_static(
          "connect",
          [](std::shared_ptr<Store> store, int rank, int size, const std::string& name, int device,
             int comm_num, double timeout_s) {
            collective::NcclOptions options{name, device, comm_num, Seconds(timeout_s)};
            py::gil_scoped_release release;
            return std::shared_ptr<NcclBackend>(
                NcclBackend::Connect(store.get(), rank, size, options));
          },
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("name") = "default",
          py::arg("device") = 0, py::arg("comm_num") = 1, py::arg("timeout_s") = 120.0)
      .def_property_readonly("rank", &NcclBackend::rank)
      .def_property_readonly("size", &NcclBackend::size)
      .def_property_readonly("name", &NcclBackend::name)
      .def_property_readonly("comm_num", &NcclBackend::comm_num)
      .def(
          "barrier",
          [](NcclBackend& g, double timeout_s) {
            g.Barrier(collective::BarrierOptions{Seconds(timeout_s)});
          },
          py::arg("timeout_s") = 1800.0, py::call_guard<py::gil_scoped_release>());
}

}  // namespace fleet::python
