"""``python -m fleet.ps.server --config cfg.json [--address host:port] [--ready-file f]``: one
parameter server as a process of its own. The functions live in ``fleet.ps.serving`` (imported
by the package, so that running this module never finds it imported already); they are
re-exported here for code that imports them from this module."""

from __future__ import annotations

import sys

from fleet.ps.serving import Server, main, run_server, serve_until_stopped, start_server

__all__ = ["Server", "main", "run_server", "serve_until_stopped", "start_server"]

if __name__ == "__main__":
    sys.exit(main())
