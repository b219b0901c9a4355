"""MetricsExporter: one process's metrics served over HTTP in the Prometheus text format."""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Sequence

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from fleet._endpoints import format_endpoint
from fleet.errors import InvalidArgument, Unavailable
from fleet.monitoring.collectors import RpcCollector, TableCollector, TrainingCollector

logger = logging.getLogger("fleet.monitoring")


class MetricsExporter:
    """The collectors of one process in a registry of its own (never prometheus_client's global
    one, so that two exporters in one process, as in tests, stay apart), served by start().

    Every series is labelled with `role` ("server" or "worker") and `index` (the process's index
    within its role). Not thread-safe: set it up, start it and close it from one thread; the
    HTTP thread only reads the collectors."""

    def __init__(self, role: str, index: int) -> None:
        self._labels = {"role": role, "index": str(index)}
        self._registry = CollectorRegistry()
        # CPU seconds and memory of this process (process_cpu_seconds_total, ...).
        ProcessCollector(registry=self._registry)
        self._http: Optional[Any] = None
        self._thread: Optional[Any] = None
        self._endpoint: Optional[str] = None

    @property
    def registry(self) -> CollectorRegistry:
        return self._registry

    @property
    def endpoint(self) -> Optional[str]:
        """host:port served (the port actually bound), None before start()."""
        return self._endpoint

    def watch_steps(self, meter: Any) -> None:
        """Serves the counts of a `_core.monitoring.StepMeter`."""
        self._registry.register(TrainingCollector(meter, self._labels))

    def watch_rpcs(self, side: str, read: Callable[[], Optional[Any]]) -> None:
        """Serves the RPC counters `read()` returns (a RpcMeterSnapshot or None) as `side`."""
        self._registry.register(RpcCollector(side, read, self._labels))

    def watch_tables(self, read: Callable[[], Optional[Sequence[Any]]]) -> None:
        """Serves the table statistics `read()` returns (a list of TableStats or None)."""
        self._registry.register(TableCollector(read, self._labels))

    def start(self, host: str, port: int) -> str:
        """Serves http://host:port/metrics from a daemon thread and returns host:port (port 0:
        a free one). `host` is the address of the process's role, never a wildcard unless the
        caller asks. Unavailable naming host:port when it cannot be bound."""
        if self._http is not None:
            raise InvalidArgument(f"the metrics exporter already serves {self._endpoint}")
        if not 0 <= port < 65536:
            raise InvalidArgument(f"metrics port {port} is not a port (0..65535)")
        try:
            self._http, self._thread = start_http_server(port, addr=host, registry=self._registry)
        except OSError as e:
            raise Unavailable(
                f"cannot serve metrics on {format_endpoint(host, port)}: {e.strerror or e}; "
                "hint: another process holds the port (fleetrun --metrics_port=BASE gives "
                "process i BASE+i: pick a BASE with enough free ports after it)"
            ) from None
        self._endpoint = format_endpoint(host, self._http.server_port)
        logger.info("serving metrics on http://%s/metrics", self._endpoint)
        return self._endpoint

    def close(self) -> None:
        """Stops serving (idempotent)."""
        if self._http is None:
            return
        self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = self._thread = None
