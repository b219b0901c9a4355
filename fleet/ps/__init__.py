"""Fleet's parameter server: tables with server-side update rules behind gRPC servers, and the
client workers use. The engine is C++ (``csrc/ps``); this package wraps ``fleet._core.ps``.

    config = server_config(0, 1, [{"table_id": 1, "type": "SPARSE", "dim": 8,
                                   "optimizer": {"learning_rate": 0.1, "sgd": {}}}])
    server = start_server(config)            # or run_server(config) to block
    client = PsClient([server.endpoint])
    rows = client.pull_sparse(1, keys)
"""

from fleet.ps.client import Future, PsClient
from fleet.ps.config import read_server_config, server_config, table_config, write_server_config
from fleet.ps.serving import Server, run_server, serve_until_stopped, start_server

__all__ = [
    "Future",
    "PsClient",
    "Server",
    "read_server_config",
    "run_server",
    "serve_until_stopped",
    "server_config",
    "start_server",
    "table_config",
    "write_server_config",
]
