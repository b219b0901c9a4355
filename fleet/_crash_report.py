"""The native crash report (csrc/core/crash_report.h).

When FLEET_NATIVE_BACKTRACE is 1 in a process's environment, `import fleet` installs it: a
SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT then writes the C++ stack of the crashing thread to
stderr, symbolized, then Python's faulthandler (enabled here if it was not) writes the Python
stacks, and the process dies of the signal as before. fleetrun sets FLEET_NATIVE_BACKTRACE=1 for
every process it launches, unless its own environment sets the variable (0 turns it off).

Like PYTHONFAULTHANDLER, this is a switch of the process, read once at import, not a setting of
the job: it is the one environment variable read outside the role maker and the launcher.
"""

from __future__ import annotations

import faulthandler
import sys
from typing import Mapping

from fleet import _core
from fleet.errors import InvalidArgument

NATIVE_BACKTRACE = "FLEET_NATIVE_BACKTRACE"
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def requested(environ: Mapping[str, str]) -> bool:
    """Whether `environ` asks for the report. An unknown value is an error, not a silent off:
    a crash report that was asked for and is missing would be found only after the crash."""
    value = environ.get(NATIVE_BACKTRACE, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise InvalidArgument(
        f"{NATIVE_BACKTRACE}={environ[NATIVE_BACKTRACE]!r}: use 1 (report native crashes) or 0"
    )


def install() -> bool:
    """Enables Python's faulthandler (on stderr, all threads) if it is off, then installs the C++
    report in front of it. Returns False when the report was already installed."""
    if not faulthandler.is_enabled():
        # File descriptor 2 rather than sys.stderr, which a test runner or a notebook may have
        # replaced by an object without a descriptor.
        faulthandler.enable(file=2, all_threads=True)
    program = sys.argv[0] if sys.argv and sys.argv[0] else sys.executable
    return _core.install_crash_report(program)


def install_if_requested(environ: Mapping[str, str]) -> bool:
    """install() when `environ` asks for it (see requested()); returns whether it is installed."""
    if requested(environ):
        install()
    return _core.crash_report_installed()
