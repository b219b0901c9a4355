// fleet._core: the compiled half of Fleet. The Python package re-exports what users need; this
// module is private.

#include "absl/synchronization/mutex.h"
#include "python/bindings.h"
#include "python/py_executor.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "Fleet's C++ core (private; use the fleet package)";
  // Debian's absl is built without NDEBUG, so it tracks the order of every absl::Mutex
  // acquisition to detect potential deadlocks (GraphCycles::GetId and its lock: 0.2% of a PS
  // job's CPU). absl built with NDEBUG has it off; this makes the module the same. Nothing in
  // Fleet asks for it (no AssertNotHeld, no test expects its report), and the C++ tests
  // (fleet_cpp_tests) do not load this module, so they keep checking the lock order.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  fleet::python::BindErrors(m);
  fleet::python::BindCore(m);
  fleet::python::BindFramework(m);
  fleet::python::BindData(m);
  fleet::python::BindTrainer(m);       // after BindFramework and BindData: extends _core.Executor
  fleet::python::BindDataParallel(m);  // after BindFramework: uses its Executor and programs
  fleet::python::BindCuda(m);
  fleet::python::BindCollective(m);
  fleet::python::BindNccl(m);               // after BindCollective: uses its Store
  fleet::python::BindCollectiveRuntime(m);  // after BindCollective and BindFramework
  fleet::python::BindPs(m);
  fleet::python::BindDistributed(m);  // after BindPs and BindFramework: uses their classes
  fleet::python::BindMonitoring(m);   // after BindPs and BindFramework: uses their classes
  fleet::python::BindCrashReport(m);
}
