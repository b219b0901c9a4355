"""The gRPC echo peer of benchmarks/ps_throughput.py as a process of its own:

    PYTHONPATH=.:benchmarks python -m fleet_bench.echo_server --ready-file F [--address H:P]

Serves until a SIGTERM or SIGINT, like ``python -m fleet.ps.server``, and tunes the allocator
the same way, so that the benchmark compares like with like."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Optional

from fleet import _core
from fleet.ps.server import serve_until_stopped
from fleet_bench import EchoServer

logger = logging.getLogger("fleet_bench")


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description="Run the gRPC echo peer of the PS benchmark.")
    parser.add_argument("--address", default="127.0.0.1:0", help="host:port; port 0 = any free")
    parser.add_argument("--ready-file", help="file to receive host:port once serving")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    logger.info("allocator tuned for serving: %s", _core.ps.tune_allocator_for_serving())
    server = EchoServer.start(args.address)
    logger.info("gRPC echo peer listening on %s", server.endpoint)
    if args.ready_file:  # written whole, then renamed: a reader never sees a partial file
        tmp = f"{args.ready_file}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(server.endpoint)
        os.replace(tmp, args.ready_file)
    serve_until_stopped(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
