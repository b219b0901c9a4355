"""User-facing utilities, as in ``paddle.utils``: ``fleet.utils.run_check()`` checks that Fleet
works on this machine (also ``python -m fleet.run_check``)."""

from __future__ import annotations

from typing import Any


def run_check(*args: Any, **kwargs: Any) -> bool:
    """See fleet.run_check.run_check. Imported on call, so that `import fleet` stays light and
    `python -m fleet.run_check` runs the module fresh."""
    from fleet.run_check import run_check as _run_check

    return _run_check(*args, **kwargs)


__all__ = ["run_check"]
