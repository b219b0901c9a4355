"""Exceptions raised by Fleet. The C++ core raises the same names (see csrc/core/errors.h)."""


class FleetError(Exception):
    """Base of every error Fleet raises on purpose."""


class InvalidArgument(FleetError, ValueError):
    """Something passed in is wrong: a shape, a dtype, an attribute, a line of a file."""


class NotFound(FleetError, LookupError):
    """A named thing (variable, op type, file, table, endpoint) does not exist."""


class Unavailable(FleetError, ConnectionError):
    """A peer or resource cannot be reached right now."""


class Timeout(FleetError, TimeoutError):
    """A blocking call ran past its deadline."""


class Internal(FleetError, RuntimeError):
    """A broken invariant inside Fleet: a bug to report, not a usage error."""


class OutOfMemory(FleetError, MemoryError):
    """Memory ran out, or a request was refused up front because it would not fit (a table
    larger than the machine, a full table shard): the same input may work with more memory."""


__all__ = [
    "FleetError",
    "InvalidArgument",
    "NotFound",
    "Unavailable",
    "Timeout",
    "Internal",
    "OutOfMemory",
]
