#pragma once
// The Python executor (`_core.Executor`): one framework::Executor with its random state, its
// profiling counters, its distributed resources and its prepared programs. Both drivers run on
// it: Run (Executor.run, one batch) and train_from_dataset (bind_trainer.cc, N threads), so the
// seed, the profile, the program cache and the resources are the same in both.

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "framework/executor.h"
#include "python/bindings.h"

namespace fleet::python {

// A prepared program plus its bindings to the scopes it ran in. Holding the Python scope objects
// keeps the bound variable pointers valid.
class PyPrepared {
 public:
  explicit PyPrepared(std::unique_ptr<framework::PreparedProgram> program)
      : program_(std::move(program)) {}

  const framework::BoundProgram& BoundTo(const framework::Executor& executor, Scope* scope,
                                         py::object scope_ref);
  const framework::PreparedProgram& program() const { return *program_; }
  size_t num_ops() const { return program_->ops.size(); }

 private:
  std::unique_ptr<framework::PreparedProgram> program_;
  absl::flat_hash_map<Scope*, framework::BoundProgram> bound_;
  std::vector<py::object> scope_refs_;
};

class PyExecutor {
 public:
  // `place`: CPUPlace or a CUDA device (kernels and variables there; see framework/executor.h).
  PyExecutor(const framework::OpRegistry* registry, uint64_t seed, Place place = CPUPlace());

  std::shared_ptr<PyPrepared> Prepare(const py::bytes& program_bytes, int block_id);

  // Fills the feed holder, runs (step hooks around it), and returns copies of the fetch
  // holder's tensors, in host memory (on a device: the one wait of the step, when anything is
  // fetched). The GIL is released while the program runs.
  std::vector<LoDTensor> Run(PyPrepared& prepared, py::object scope_obj,
                             const std::vector<LoDTensor>& feeds, const std::string& feed_holder,
                             const std::string& fetch_holder);

  const framework::Executor& executor() const { return executor_; }
  uint64_t seed() const { return seed_; }
  bool profiling() const { return profiling_; }
  void set_profiling(bool on) { profiling_ = on; }
  framework::RunStats& stats() { return stats_; }
  void reset_stats() { stats_ = framework::RunStats{}; }

  const std::shared_ptr<framework::RuntimeResources>& resources() const {
    return executor_.resources();
  }
  void set_resources(std::shared_ptr<framework::RuntimeResources> resources) {
    executor_.set_resources(std::move(resources));
  }

 private:
  framework::Executor executor_;
  framework::RunState state_;
  framework::RunStats stats_;
  uint64_t seed_;
  int64_t steps_ = 0;
  bool profiling_ = false;
};

// bind_trainer.cc: adds run_from_dataset to the bound Executor class.
void BindTrainer(py::module_& m);

}  // namespace fleet::python
