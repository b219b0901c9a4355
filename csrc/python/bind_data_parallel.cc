// One-process data parallelism: `_core.DataParallelEngine` (trainer/data_parallel.h) and
// `_core.split_batch` (trainer/batch_split.h). Steps run with the GIL released.

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <atomic>
#include <thread>

#include "python/numpy_convert.h"
#include "python/py_executor.h"
#include "python/read_stats.h"
#include "trainer/batch_split.h"
#include "trainer/data_parallel.h"
#include "trainer/data_parallel_pass.h"

namespace fleet::python {
namespace {

// The engine plus what must outlive it: the prepared programs it runs and the root scope.
class PyDataParallel {
 public:
  PyDataParallel(PyExecutor& executor, std::shared_ptr<PyPrepared> compute,
                 std::vector<std::vector<std::shared_ptr<PyPrepared>>> update, py::object scope,
                 trainer::DataParallelOptions options)
      : executor_(&executor),
        compute_(std::move(compute)),
        update_(std::move(update)),
        scope_(std::move(scope)) {
    trainer::UpdatePhases phases;
    for (const auto& phase : update_) {
      std::vector<const framework::PreparedProgram*> programs;
      for (const auto& p : phase) programs.push_back(p ? &p->program() : nullptr);
      phases.push_back(std::move(programs));
    }
    engine_ = std::make_unique<trainer::DataParallelEngine>(
        &executor.executor(), &compute_->program(), std::move(phases), scope_.cast<Scope*>(),
        std::move(options));
  }

  std::vector<std::vector<LoDTensor>> Step(const std::vector<std::string>& input_names,
                                           const std::vector<std::vector<LoDTensor>>& shares,
                                           const std::vector<std::string>& fetch_names) {
    py::gil_scoped_release release;
    framework::RunStats* stats = executor_->profiling() ? &executor_->stats() : nullptr;
    return engine_->Step(input_names, shares, fetch_names, stats);
  }

  // One pass of `dataset` on a thread of its own while this one waits with the GIL released,
  // waking every 100 ms for Python's signals (Ctrl-C stops the pass after its current step).
  trainer::DataParallelPassResult RunDataset(data::Dataset& dataset,
                                             trainer::DataParallelPassOptions options,
                                             const py::object& log) {
    if (!log.is_none()) {
      options.log = [&log](const std::string& line) {
        py::gil_scoped_acquire gil;
        try {
          log(line);
        } catch (py::error_already_set& e) {
          e.discard_as_unraisable("fleet data-parallel train_from_dataset progress callback");
        }
      };
    }
    framework::RunStats* stats = executor_->profiling() ? &executor_->stats() : nullptr;
    std::atomic<bool> stop{false}, done{false};
    trainer::DataParallelPassResult result;
    std::exception_ptr error;
    PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
    {
      py::gil_scoped_release release;
      std::thread pass([&] {
        try {
          result = trainer::RunDataParallelPass(engine_.get(), &dataset, options, stop, stats);
        } catch (...) {
          error = std::current_exception();
        }
        done.store(true);
      });
      while (!done.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (type != nullptr) continue;
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) {
          PyErr_Fetch(&type, &value, &trace);
          stop.store(true);
        }
      }
      pass.join();
    }
    if (type != nullptr) {
      PyErr_Restore(type, value, trace);
      throw py::error_already_set();
    }
    if (error) std::rethrow_exception(error);
    return result;
  }

  int replicas() const { return engine_->replicas(); }
  int64_t overlapped_steps() const { return engine_->overlapped_steps(); }
  int64_t deferred_reductions() const { return engine_->deferred_reductions(); }
  bool shares_barrier_work() const { return engine_->shares_barrier_work(); }
  int64_t shared_barrier_tasks() const { return engine_->shared_barrier_tasks(); }
  int64_t early_barrier_tasks() const { return engine_->early_barrier_tasks(); }
  py::dict polls_given_up() const {
    const trainer::DataParallelWaits waits = engine_->polls_given_up();
    py::dict out;
    out["for_work"] = waits.for_work;
    out["for_workers"] = waits.for_workers;
    out["for_compute"] = waits.for_compute;
    return out;
  }

 private:
  PyExecutor* executor_;
  std::shared_ptr<PyPrepared> compute_;
  std::vector<std::vector<std::shared_ptr<PyPrepared>>> update_;
  py::object scope_;
  std::unique_ptr<trainer::DataParallelEngine> engine_;
};

}  // namespace

void BindDataParallel(py::module_& m) {
  py::class_<trainer::DataParallelOptions>(m, "DataParallelOptions")
      .def(py::init<>())
      .def_readwrite("replicas", &trainer::DataParallelOptions::replicas)
      .def_readwrite("all_reduce", &trainer::DataParallelOptions::all_reduce)
      .def_readwrite("gradient_scale", &trainer::DataParallelOptions::gradient_scale)
      .def_readwrite("gradients", &trainer::DataParallelOptions::gradients)
      .def_readwrite("gradient_owners", &trainer::DataParallelOptions::gradient_owners)
      .def_readwrite("gradient_row_parts", &trainer::DataParallelOptions::gradient_row_parts)
      .def_readwrite("gradient_product_x", &trainer::DataParallelOptions::gradient_product_x)
      .def_readwrite("gradient_product_dout", &trainer::DataParallelOptions::gradient_product_dout)
      .def_readwrite("seed", &trainer::DataParallelOptions::seed)
      .def_readwrite("prelude_phases", &trainer::DataParallelOptions::prelude_phases)
      .def_readwrite("overlap_reduction", &trainer::DataParallelOptions::overlap_reduction)
      .def_readwrite("even_barrier_work", &trainer::DataParallelOptions::even_barrier_work)
      .def_readwrite("share_barrier_work", &trainer::DataParallelOptions::share_barrier_work)
      .def_readwrite("early_barrier_work", &trainer::DataParallelOptions::early_barrier_work)
      .def_readwrite("spin_before_sleep_us", &trainer::DataParallelOptions::spin_before_sleep_us);

  py::class_<trainer::DataParallelPassOptions>(m, "DataParallelPassOptions")
      .def(py::init<>())
      .def_readwrite("fetch_names", &trainer::DataParallelPassOptions::fetch_names)
      .def_readwrite("fetch_labels", &trainer::DataParallelPassOptions::fetch_labels)
      .def_readwrite("print_period", &trainer::DataParallelPassOptions::print_period);

  py::class_<trainer::DataParallelPassResult>(m, "DataParallelPassResult")
      .def_readonly("steps", &trainer::DataParallelPassResult::steps)
      .def_readonly("batches", &trainer::DataParallelPassResult::batches)
      .def_readonly("samples", &trainer::DataParallelPassResult::samples)
      .def_readonly("seconds", &trainer::DataParallelPassResult::seconds)
      .def_property_readonly("read",
                             [](const trainer::DataParallelPassResult& r) { return r.read; })
      .def_readonly("fetch_sums", &trainer::DataParallelPassResult::fetch_sums)
      .def_property_readonly("last_fetch", [](const trainer::DataParallelPassResult& r) {
        py::list out;
        for (const auto& t : r.last_fetch) {
          out.append(t.initialized() ? py::object(TensorToArray(t)) : py::object(py::none()));
        }
        return out;
      });

  py::class_<PyDataParallel>(m, "DataParallelEngine")
      .def(py::init<PyExecutor&, std::shared_ptr<PyPrepared>,
                    std::vector<std::vector<std::shared_ptr<PyPrepared>>>, py::object,
                    trainer::DataParallelOptions>(),
           py::arg("executor"), py::arg("compute"), py::arg("update"), py::arg("scope"),
           py::arg("options"), py::keep_alive<1, 2>(),
           "Binds the compute program and the update phases (update[p][r]: replica r's program "
           "in phase p, or None) in one child scope of `scope` per replica.")
      .def("replicas", &PyDataParallel::replicas)
      .def("overlapped_steps", &PyDataParallel::overlapped_steps,
           "Steps whose gradient reduction overlapped the compute program.")
      .def("deferred_reductions", &PyDataParallel::deferred_reductions,
           "Reductions of the backward pass kept until after the barrier that ends it, every "
           "overlapped step, to even out the replicas' work after it.")
      .def("shares_barrier_work", &PyDataParallel::shares_barrier_work,
           "Whether the work after an overlapped step's barrier is shared by the replicas.")
      .def("shared_barrier_tasks", &PyDataParallel::shared_barrier_tasks,
           "Tasks of the work after an overlapped step's barrier a replica ran for another.")
      .def("early_barrier_tasks", &PyDataParallel::early_barrier_tasks,
           "Tasks of that work a replica ran while it waited at the barrier for another.")
      .def("polls_given_up", &PyDataParallel::polls_given_up,
           "Replica waits whose poll gave up (likely sleeps) since the engine was made, by what "
           "they waited for: for_work, for_workers, for_compute.")
      .def("run_dataset", &PyDataParallel::RunDataset, py::arg("dataset"), py::arg("options"),
           py::arg("log"),
           "One pass of the dataset, one batch a replica per step (train_from_dataset).")
      .def("step", &PyDataParallel::Step, py::arg("input_names"), py::arg("shares"),
           py::arg("fetch_names"),
           "One step: shares[r] are replica r's input tensors (fewer shares than replicas: the "
           "rest sit out the compute); returns each replica's fetched tensors.");

  m.def("split_batch", &trainer::SplitBatch, py::arg("batch"), py::arg("replicas"), py::arg("name"),
        "The replicas' shares of a fed batch, as Paddle's ParallelExecutor cuts it.");
}

}  // namespace fleet::python
