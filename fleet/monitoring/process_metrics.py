"""ProcessMetrics: what the fleet facade holds to serve its process's metrics: a step meter on
the runtime resources its executors see, and an exporter reading it, the worker's PS client and
the server."""

from __future__ import annotations

from typing import Any, Callable, Optional

from fleet import _core
from fleet.monitoring.exporter import MetricsExporter
from fleet.monitoring.program_inputs import fed_variables

CoreReader = Callable[[], Optional[Any]]


class ProcessMetrics:
    """Args:
    role: "server" or "worker"; index: the process's index within its role.
    resources: the `_core.RuntimeResources` whose executors' steps a worker counts.
    client: returns the worker's `_core.ps.Client`, or None while there is none.
    server: returns the process's `_core.ps.Server`, or None while there is none.
    The readers run on the exporter's HTTP thread at each scrape."""

    def __init__(
        self, role: str, index: int, resources: Any, client: CoreReader, server: CoreReader
    ) -> None:
        self._resources = resources
        self.exporter = MetricsExporter(role, index)
        # Workers train; a server's executors (if any) run no training steps worth a series.
        self._meter: Optional[Any] = None
        if role == "worker":
            self._meter = _core.monitoring.StepMeter()
            self._meter.attach(resources)
            self.exporter.watch_steps(self._meter)

        def client_rpcs() -> Optional[Any]:
            found = client()
            return None if found is None else _core.monitoring.client_rpcs(found)

        def server_rpcs() -> Optional[Any]:
            found = server()
            return None if found is None else _core.monitoring.server_rpcs(found)

        def server_tables() -> Optional[Any]:
            found = server()
            return None if found is None else _core.monitoring.server_tables(found)

        self.exporter.watch_rpcs("client", client_rpcs)
        self.exporter.watch_rpcs("server", server_rpcs)
        self.exporter.watch_tables(server_tables)

    def count_samples_of(self, program: Any) -> None:
        """Counts each step's samples by the variables `program` is fed (fed_variables)."""
        if self._meter is not None:
            self._meter.set_sample_vars(fed_variables(program))

    def start(self, host: str, port: int) -> str:
        """Serves http://host:port/metrics; returns host:port (see MetricsExporter.start)."""
        return self.exporter.start(host, port)

    def close(self) -> None:
        """Stops serving and counting steps."""
        self.exporter.close()
        if self._meter is not None:
            self._meter.detach(self._resources)
