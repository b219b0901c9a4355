// Python view of the native crash report (core/crash_report.h): fleet/_crash_report.py installs
// it after enabling Python's faulthandler, so a crash prints the C++ stack, then the Python ones.

#include "core/crash_report.h"
#include "python/bindings.h"

namespace fleet::python {

void BindCrashReport(py::module_& m) {
  m.def("install_crash_report", &InstallCrashReport, py::arg("program"),
        "Writes the C++ stack to stderr on SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT, then calls "
        "the handler installed before (Python's faulthandler). False when already installed.");
  m.def("crash_report_installed", &CrashReportInstalled);
}

}  // namespace fleet::python
