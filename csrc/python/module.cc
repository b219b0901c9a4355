// fleet._core: the compiled half of Fleet. The Python package re-exports what users need; this
// module is private.

#include "python/bindings.h"
#include "python/py_executor.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "Fleet's C++ core (private; use the fleet package)";
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
