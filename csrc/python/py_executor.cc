#include "python/py_executor.h"

#include "core/device_memory.h"

namespace fleet::python {

const framework::BoundProgram& PyPrepared::BoundTo(const framework::Executor& executor,
                                                   Scope* scope, py::object scope_ref) {
  auto it = bound_.find(scope);
  if (it == bound_.end()) {
    it = bound_.emplace(scope, executor.Bind(*program_, scope)).first;
    scope_refs_.push_back(std::move(scope_ref));
  }
  return it->second;
}

PyExecutor::PyExecutor(const framework::OpRegistry* registry, uint64_t seed, Place place)
    : executor_(registry, place), seed_(seed) {
  state_.rng.seed(seed);
}

std::shared_ptr<PyPrepared> PyExecutor::Prepare(const py::bytes& program_bytes, int block_id) {
  framework::proto::ProgramDesc program;
  FLEET_ENFORCE(program.ParseFromString(std::string(program_bytes)), InvalidArgument,
                "cannot parse the serialised ProgramDesc");
  return std::make_shared<PyPrepared>(executor_.Prepare(program, block_id));
}

std::vector<LoDTensor> PyExecutor::Run(PyPrepared& prepared, py::object scope_obj,
                                       const std::vector<LoDTensor>& feeds,
                                       const std::string& feed_holder,
                                       const std::string& fetch_holder) {
  Scope* scope = scope_obj.cast<Scope*>();
  const framework::BoundProgram& bound = prepared.BoundTo(executor_, scope, scope_obj);
  std::vector<LoDTensor> fetched;
  {
    py::gil_scoped_release release;
    *scope->Var(feed_holder)->GetMutable<LoDTensorArray>() = feeds;
    auto* fetch = scope->Var(fetch_holder)->GetMutable<LoDTensorArray>();
    fetch->clear();
    // Executor.run is a pass of one thread and one step (see framework/runtime.h).
    const framework::RuntimeResources* resources = executor_.resources().get();
    framework::StepInfo info{0, 1, steps_, scope};
    framework::RunPassBegin(resources, framework::PassInfo{1, /*dataset_pass=*/false});
    try {
      framework::RunBeforeStep(resources, info);
      executor_.Run(bound, &state_, profiling_ ? &stats_ : nullptr);
      framework::RunAfterStep(resources, info);
      framework::RunThreadEnd(resources, 0);
    } catch (...) {
      try {
        framework::RunPassEnd(resources);
      } catch (...) {  // the step's error is the one to report
      }
      throw;
    }
    framework::RunPassEnd(resources);
    ++steps_;
    for (const auto& t : *fetch) {
      LoDTensor copy;
      if (t.initialized()) {
        if (t.place().device == DeviceType::kCPU) {
          copy.CopyFrom(t);
        } else {
          copy = CopyToPlace(t, CPUPlace());
        }
      }
      copy.set_lod(t.lod());
      fetched.push_back(std::move(copy));
    }
  }
  return fetched;
}

}  // namespace fleet::python
