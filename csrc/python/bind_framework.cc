// Python view of the op registry (shape inference, gradient makers) and the Executor.

#include <pybind11/stl.h>

#include "absl/container/flat_hash_map.h"
#include "distributed/register_distributed_ops.h"
#include "fleet/build_config.h"
#include "framework/executor.h"
#include "operators/blas.h"
#include "operators/register_ops.h"
#include "python/numpy_convert.h"
#include "python/py_executor.h"

namespace fleet::python {
namespace {

using framework::BoundProgram;
using framework::Executor;
using framework::OpRegistry;
using framework::OpSpec;
using framework::PreparedProgram;
using framework::RunState;
using framework::RunStats;
using framework::VarInfo;
using framework::VarKind;

OpSpec ParseOp(const py::bytes& op_bytes) {
  framework::proto::OpDesc desc;
  FLEET_ENFORCE(desc.ParseFromString(std::string(op_bytes)), InvalidArgument,
                "cannot parse the serialised OpDesc");
  return framework::OpSpecFromProto(desc);
}

// (shape, dtype, lod_level, kind) tuples cross to Python.
using PyVarInfo = std::tuple<Shape, int, int, int>;

py::dict InferShape(const OpRegistry& registry, const py::bytes& op_bytes,
                    const std::map<std::string, PyVarInfo>& inputs) {
  OpSpec op = ParseOp(op_bytes);
  const auto& info = registry.Get(op.type);
  absl::flat_hash_map<std::string, VarInfo> vars;
  for (const auto& [name, t] : inputs) {
    vars[name] = VarInfo{std::get<0>(t), DTypeFromInt(std::get<1>(t), name), std::get<2>(t),
                         static_cast<VarKind>(std::get<3>(t))};
  }
  py::dict out;
  if (!info.infer_shape) return out;
  framework::InferShapeContext ctx(op, &vars);
  info.infer_shape(&ctx);
  for (const auto& [slot, names] : op.outputs) {
    for (const auto& name : names) {
      auto it = vars.find(name);
      if (it == vars.end()) continue;
      const VarInfo& v = it->second;
      out[py::str(name)] =
          py::make_tuple(v.shape, static_cast<int>(v.dtype), v.lod_level, static_cast<int>(v.kind));
    }
  }
  return out;
}

std::vector<py::bytes> MakeGradOps(const OpRegistry& registry, const py::bytes& op_bytes) {
  OpSpec op = ParseOp(op_bytes);
  const auto& info = registry.Get(op.type);
  FLEET_ENFORCE(info.grad_maker != nullptr, NotFound, "op '", op.type, "' has no gradient");
  std::vector<py::bytes> out;
  for (const auto& grad : info.grad_maker(op)) {
    out.emplace_back(framework::OpSpecToProto(grad).SerializeAsString());
  }
  return out;
}

}  // namespace

void BindFramework(py::module_& m) {
  py::class_<OpRegistry>(m, "OpRegistry")
      .def("types", &OpRegistry::Types)
      .def("has_op", [](const OpRegistry& r, const std::string& t) { return r.Find(t) != nullptr; })
      .def("has_grad",
           [](const OpRegistry& r, const std::string& t) { return r.Get(t).grad_maker != nullptr; })
      .def("has_infer_shape", [](const OpRegistry& r,
                                 const std::string& t) { return r.Get(t).infer_shape != nullptr; })
      .def("infer_shape", &InferShape, py::arg("op_desc"), py::arg("var_infos"),
           "Compile-time output shapes: var_infos maps names to (shape, dtype, lod_level, kind).")
      .def("make_grad_ops", &MakeGradOps, py::arg("op_desc"),
           "Serialised OpDescs computing the gradients of a serialised forward OpDesc.");

  // The registry every executor of this process uses: built once at import, then read-only.
  auto* registry = new OpRegistry();
  operators::RegisterAllOps(registry);
  distributed::RegisterDistributedOps(registry);
  m.attr("op_registry") = py::cast(registry, py::return_value_policy::take_ownership);

  py::class_<PyPrepared, std::shared_ptr<PyPrepared>>(m, "PreparedProgram")
      .def("num_ops", &PyPrepared::num_ops);

  py::class_<framework::RuntimeResources, std::shared_ptr<framework::RuntimeResources>>(
      m, "RuntimeResources",
      "The distributed resources (PS communicator, collective group) and step hooks that an "
      "Executor's kernels see. Created empty; the fleet facade fills it.")
      .def(py::init<>())
      .def("clear", &framework::RuntimeResources::Clear)
      .def("num_step_hooks",
           [](const framework::RuntimeResources& r) { return r.step_hooks().size(); });

  py::class_<PyExecutor>(m, "Executor")
      .def(py::init([registry](uint64_t seed, int cuda_device) {
             // cuda_device < 0: the CPU; else that CUDA device (Unavailable without it).
             return new PyExecutor(registry, seed,
                                   cuda_device < 0 ? CPUPlace() : CUDAPlace(cuda_device));
           }),
           py::arg("seed") = 0x5eed, py::arg("cuda_device") = -1, py::keep_alive<1, 0>())
      .def("prepare", &PyExecutor::Prepare, py::arg("program_desc"), py::arg("block_id") = 0)
      .def("run", &PyExecutor::Run, py::arg("prepared"), py::arg("scope"), py::arg("feeds"),
           py::arg("feed_holder") = "feed", py::arg("fetch_holder") = "fetch")
      .def_property_readonly("seed", &PyExecutor::seed)
      .def_property_readonly("place",
                             [](const PyExecutor& e) { return e.executor().place().ToString(); })
      .def_property("resources", &PyExecutor::resources, &PyExecutor::set_resources)
      .def("set_profiling", &PyExecutor::set_profiling)
      .def(
          "stats", [](PyExecutor& e) { return e.stats(); },
          "Op times by role since profiling began (a copy, _core.RunStats)")
      .def("reset_stats", &PyExecutor::reset_stats);

  m.def("set_blas_threads", &operators::blas::SetNumThreads, py::arg("threads"));
  m.def("blas_threads", &operators::blas::GetNumThreads);
  m.def(
      "time_gemms",
      [](const std::vector<std::tuple<bool, bool, int64_t, int64_t, int64_t>>& shapes, int rounds) {
        std::vector<operators::blas::GemmShape> gemms;
        for (const auto& [ta, tb, m, n, k] : shapes) gemms.push_back({ta, tb, m, n, k});
        py::gil_scoped_release release;
        return operators::blas::TimeGemms(gemms, rounds);
      },
      py::arg("shapes"), py::arg("rounds"),
      "Seconds per round of the GEMMs (trans_a, trans_b, m, n, k), each once per round, through "
      "the executor's BLAS (see operators/blas.h)");
#ifdef FLEET_WITH_CUDA
  m.attr("compiled_with_cuda") = true;
#else
  m.attr("compiled_with_cuda") = false;
#endif
}

}  // namespace fleet::python
