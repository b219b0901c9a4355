// fleet's test-only crash hooks: `tests/python/_crash_testing*.so`. Each call ends the process
// with a signal raised in a C++ frame of this module, for the tests of the native crash report
// (csrc/core/crash_report.h). Never part of fleet._core.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

// Opaque to the optimizer, so the faults below are real loads, stores and divisions, not
// undefined behaviour the compiler may fold away.
volatile uintptr_t g_null_address = 0;
volatile int g_zero = 0;
volatile int g_one = 1;  // 1 / x alone is folded into a comparison, without a division

// The frame the report must name: kept out of line and out of identical-code folding.
[[gnu::noinline]] int CrashInNativeFrame(const std::string& kind) {
  if (kind == "segv") {
    *reinterpret_cast<volatile int*>(g_null_address) = 1;
  } else if (kind == "fpe") {
    return g_one / g_zero;
  } else if (kind == "abort") {
    std::abort();
  } else if (kind == "ill") {
    __builtin_trap();
  }
  throw std::invalid_argument("crash: kind must be segv, fpe, abort or ill, got '" + kind + "'");
}

}  // namespace

PYBIND11_MODULE(_crash_testing, m) {
  m.doc() = "Test-only: crash the process in a C++ frame (tests of the native crash report)";
  m.def("crash", &CrashInNativeFrame, pybind11::arg("kind"),
        "Ends the process with SIGSEGV ('segv'), SIGFPE ('fpe'), SIGABRT ('abort') or SIGILL "
        "('ill') raised in the C++ function CrashInNativeFrame.");
}
