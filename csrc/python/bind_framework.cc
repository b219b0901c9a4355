// Python view of the op registry (shape inference, gradient makers) and the Executor.

#include <pybind11/stl.h>

#include "absl/container/flat_hash_map.h"
#include "fleet/build_config.h"
#include "framework/executor.h"
#include "operators/blas.h"
#include "operators/register_ops.h"
#include "python/numpy_convert.h"

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
      out[py::str(name)] = py::make_tuple(v.shape, static_cast<int>(v.dtype), v.lod_level,
                                          static_cast<int>(v.kind));
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

// A prepared program plus its bindings to the scopes it ran in. Holding the Python scope objects
// keeps the bound variable pointers valid.
class PyPrepared {
 public:
  explicit PyPrepared(std::unique_ptr<PreparedProgram> program) : program_(std::move(program)) {}

  const BoundProgram& BoundTo(const Executor& executor, Scope* scope, py::object scope_ref) {
    auto it = bound_.find(scope);
    if (it == bound_.end()) {
      it = bound_.emplace(scope, executor.Bind(*program_, scope)).first;
      scope_refs_.push_back(std::move(scope_ref));
    }
    return it->second;
  }
  size_t num_ops() const { return program_->ops.size(); }

 private:
  std::unique_ptr<PreparedProgram> program_;
  absl::flat_hash_map<Scope*, BoundProgram> bound_;
  std::vector<py::object> scope_refs_;
};

class PyExecutor {
 public:
  PyExecutor(const OpRegistry* registry, uint64_t seed) : executor_(registry) {
    state_.rng.seed(seed);
  }

  std::shared_ptr<PyPrepared> Prepare(const py::bytes& program_bytes, int block_id) {
    framework::proto::ProgramDesc program;
    FLEET_ENFORCE(program.ParseFromString(std::string(program_bytes)), InvalidArgument,
                  "cannot parse the serialised ProgramDesc");
    return std::make_shared<PyPrepared>(executor_.Prepare(program, block_id));
  }

  // Fills the feed holder, runs, and returns copies of the fetch holder's tensors.
  std::vector<LoDTensor> Run(PyPrepared& prepared, py::object scope_obj,
                             const std::vector<LoDTensor>& feeds, const std::string& feed_holder,
                             const std::string& fetch_holder) {
    Scope* scope = scope_obj.cast<Scope*>();
    const BoundProgram& bound = prepared.BoundTo(executor_, scope, scope_obj);
    std::vector<LoDTensor> fetched;
    {
      py::gil_scoped_release release;
      *scope->Var(feed_holder)->GetMutable<LoDTensorArray>() = feeds;
      auto* fetch = scope->Var(fetch_holder)->GetMutable<LoDTensorArray>();
      fetch->clear();
      executor_.Run(bound, &state_, profiling_ ? &stats_ : nullptr);
      for (const auto& t : *fetch) {
        LoDTensor copy;
        if (t.initialized()) copy.CopyFrom(t);
        copy.set_lod(t.lod());
        fetched.push_back(std::move(copy));
      }
    }
    return fetched;
  }

  void set_profiling(bool on) { profiling_ = on; }
  py::dict stats() const {
    py::dict d;
    d["forward_s"] = stats_.nanos_by_role[0] * 1e-9;
    d["backward_s"] = stats_.nanos_by_role[1] * 1e-9;
    d["optimize_s"] = stats_.nanos_by_role[2] * 1e-9;
    d["other_s"] = stats_.nanos_by_role[3] * 1e-9;
    d["runs"] = stats_.runs;
    return d;
  }
  void reset_stats() { stats_ = RunStats{}; }

 private:
  Executor executor_;
  RunState state_;
  RunStats stats_;
  bool profiling_ = false;
};

}  // namespace

void BindFramework(py::module_& m) {
  py::class_<OpRegistry>(m, "OpRegistry")
      .def("types", &OpRegistry::Types)
      .def("has_op", [](const OpRegistry& r, const std::string& t) { return r.Find(t) != nullptr; })
      .def("has_grad",
           [](const OpRegistry& r, const std::string& t) {
             return r.Get(t).grad_maker != nullptr;
           })
      .def("has_infer_shape",
           [](const OpRegistry& r, const std::string& t) {
             return r.Get(t).infer_shape != nullptr;
           })
      .def("infer_shape", &InferShape, py::arg("op_desc"), py::arg("var_infos"),
           "Compile-time output shapes: var_infos maps names to (shape, dtype, lod_level, kind).")
      .def("make_grad_ops", &MakeGradOps, py::arg("op_desc"),
           "Serialised OpDescs computing the gradients of a serialised forward OpDesc.");

  // The registry every executor of this process uses: built once at import, then read-only.
  auto* registry = new OpRegistry();
  operators::RegisterAllOps(registry);
  m.attr("op_registry") = py::cast(registry, py::return_value_policy::take_ownership);

  py::class_<PyPrepared, std::shared_ptr<PyPrepared>>(m, "PreparedProgram")
      .def("num_ops", &PyPrepared::num_ops);

  py::class_<PyExecutor>(m, "Executor")
      .def(py::init([registry](uint64_t seed) { return new PyExecutor(registry, seed); }),
           py::arg("seed") = 0x5eed, py::keep_alive<1, 0>())
      .def("prepare", &PyExecutor::Prepare, py::arg("program_desc"), py::arg("block_id") = 0)
      .def("run", &PyExecutor::Run, py::arg("prepared"), py::arg("scope"), py::arg("feeds"),
           py::arg("feed_holder") = "feed", py::arg("fetch_holder") = "fetch")
      .def("set_profiling", &PyExecutor::set_profiling)
      .def("stats", &PyExecutor::stats)
      .def("reset_stats", &PyExecutor::reset_stats);

  m.def("set_blas_threads", &operators::blas::SetNumThreads, py::arg("threads"));
  m.def("blas_threads", &operators::blas::GetNumThreads);
#ifdef FLEET_WITH_CUDA
  m.attr("compiled_with_cuda") = true;
#else
  m.attr("compiled_with_cuda") = false;
#endif
}

}  // namespace fleet::python
