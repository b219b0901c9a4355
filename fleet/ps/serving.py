"""Running a parameter server: in this process (``start_server`` / ``run_server``) or as a
process of its own (``python -m fleet.ps.server --config cfg.json --ready-file f``, whose entry
point, ``main``, is here too).

The package imports this module, not ``fleet.ps.server``: a module that ``python -m`` runs must
not be imported before it runs (runpy warns that it would run twice)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Optional

from fleet import _core
from fleet.proto import ps_pb2
from fleet.ps.config import read_server_config

logger = logging.getLogger("fleet.ps")

Server = _core.ps.Server


def start_server(
    config: ps_pb2.ServerConfig,
    address: str = "127.0.0.1:0",
    max_threads: int = 256,
    load_dirname: Optional[str] = None,
    job_id: str = "",
    worker_restarts: bool = False,
    local_transport: bool = False,
) -> Server:
    """Builds the tables and starts serving in background threads; port 0 picks a free port
    (read it from ``server.endpoint``). Stop it with ``server.shutdown()``. With
    ``load_dirname``, every table is loaded from that checkpoint (written by any number of
    servers) before the port opens, so no client ever reads a value the load replaces; a
    missing, damaged or mismatched checkpoint fails the start with an error naming it. With
    ``job_id`` (``fleet.role_maker``'s), clients of another job are refused, naming both jobs.
    With ``worker_restarts`` (the job's ``a_sync_configs["worker_restarts"]``), a worker whose
    presence call dropped is waited for and rejoins when started again with its id, instead of
    failing every barrier. With ``local_transport`` (the job's
    ``a_sync_configs["local_transport"]``) it also listens on a Unix-domain socket named after
    ``address`` (``server.local_endpoint``; none for port 0), which clients on the same host
    use when given their host (``PsClient(local_host=...)``)."""
    return Server.start(
        config.SerializeToString(),
        address,
        max_threads,
        os.fspath(load_dirname) if load_dirname else "",
        job_id,
        worker_restarts,
        local_transport,
    )


def tune_allocator(config: ps_pb2.ServerConfig) -> _core.ps.AllocatorTuning:
    """Sets this process's allocator for serving ``config``'s tables (serving_allocator.h):
    large freed buffers are kept for reuse, and a server of a table with a memory budget
    (storage "ssd") shares few malloc arenas among its threads, so that freed memory does not
    pile up per thread. Process-wide: call once, before the server starts its threads."""
    bounded = any(table.storage == "ssd" for table in config.tables)
    return _core.ps.tune_allocator_for_serving(memory_bounded=bounded)


def _write_ready_file(path: str, endpoint: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(endpoint)
    os.replace(tmp, path)


def serve_until_stopped(server: Server, grace: float = 5.0, poll: float = 0.2) -> None:
    """Blocks until a Stop RPC, SIGTERM or SIGINT, then shuts the server down, letting the RPCs
    in flight finish for up to ``grace`` seconds. Signal handlers are installed only when called
    from the main thread (Python runs them there, between waits of ``poll`` seconds). Says on
    stderr why it stops: the signal's name, or a Stop RPC (whose caller and job the server's own
    line names), since a server that exits 0 looks, to its launcher, like one its job ended. Any
    object with ``request_stop``, ``wait_for_stop_request``, ``shutdown`` and ``endpoint`` will
    do (the benchmarks' echo peer is served the same way)."""
    previous = {}
    received: list[int] = []
    if threading.current_thread() is threading.main_thread():

        def on_signal(signum: int, frame: object) -> None:
            logger.info("signal %d: stopping", signum)
            received.append(signum)
            server.request_stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        while not server.wait_for_stop_request(poll):
            pass
        # Said here, not in the handler: printing from a handler can meet a write to the same
        # stream that it interrupted.
        why = f"received {signal.Signals(received[0]).name}" if received else "stop requested"
        if not received:
            why += " (a Stop RPC, or request_stop in this process)"
        print(f"parameter server {server.endpoint}: stopping: {why}", file=sys.stderr, flush=True)
    finally:
        server.shutdown(grace)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    logger.info("stopped %s", server.endpoint)


def run_server(
    config: ps_pb2.ServerConfig,
    address: str = "127.0.0.1:0",
    ready_file: Optional[str] = None,
    grace: float = 5.0,
    load_dirname: Optional[str] = None,
    local_transport: bool = False,
) -> None:
    """Starts a server (loading the checkpoint ``load_dirname`` first, when given), logs its
    endpoint and tables, writes the endpoint to ``ready_file`` (atomically) when given, and
    blocks until it is stopped (see ``serve_until_stopped``). ``local_transport``: see
    ``start_server``."""
    server = start_server(
        config, address, load_dirname=load_dirname, local_transport=local_transport
    )
    for line in server.describe().splitlines():
        logger.info("%s", line)
    if ready_file:
        _write_ready_file(ready_file, server.endpoint)
    serve_until_stopped(server, grace)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description="Run one Fleet parameter server.")
    parser.add_argument("--config", help="ServerConfig as .json or binary protobuf")
    parser.add_argument("--address", default="127.0.0.1:0", help="host:port; port 0 = any free")
    parser.add_argument("--ready-file", help="file to receive host:port once serving")
    parser.add_argument(
        "--load",
        metavar="DIR",
        help="load every table from the checkpoint in DIR before the port opens (a server "
        "restarted under a job that takes restarted servers)",
    )
    parser.add_argument(
        "--local_transport",
        action="store_true",
        help="also listen on a Unix-domain socket named after --address, for clients on this "
        "host (PsClient(local_host=...))",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    if not args.config:
        parser.error("--config is required")
    config = read_server_config(args.config)
    # This process is a server from here on: keep request buffers for reuse.
    tuning = tune_allocator(config)
    logger.info("allocator tuned for serving: %s", tuning)
    run_server(
        config,
        args.address,
        args.ready_file,
        load_dirname=args.load,
        local_transport=args.local_transport,
    )
    return 0
