#pragma once
// Native crash report: when the process gets SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT, write the
// C++ stack of the thread that got it to stderr, symbolized, then hand the signal to whatever
// handled it before (Python's faulthandler, which adds the Python stacks), so the process still
// dies of that signal.
//
// Why not absl's InstallFailureSignalHandler: Debian's abseil walks frame pointers on x86-64, and
// Fleet, Gloo and gRPC are built without them, so its stacks stop after a frame or two. This
// report unwinds with the unwind tables (glibc's backtrace) and names each frame with absl's
// async-signal-safe symbolizer, adding the object file and the offset in it, so a frame of a
// stripped library can still be resolved offline (addr2line -e <object> <offset>).

#include <string>

namespace fleet {

// Installs the report for every thread of the process. The handlers that were installed before
// are kept and called after the report (install after Python's faulthandler.enable() to get both
// stacks). `program` names the process in the report's first line. Returns false when it was
// already installed (the call is then a no-op). Thread-safe.
bool InstallCrashReport(const std::string& program);

// Whether InstallCrashReport has run in this process.
bool CrashReportInstalled();

}  // namespace fleet
