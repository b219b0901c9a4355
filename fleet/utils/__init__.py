"""User-facing utilities, as in ``paddle.utils``: ``fleet.utils.run_check()`` checks that Fleet
works on this machine (also ``python -m fleet.run_check``)."""

from fleet.run_check import run_check

__all__ = ["run_check"]
