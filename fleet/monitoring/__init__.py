"""Live metrics: a process's counters in the Prometheus text format on an HTTP port.

``fleetrun --metrics_port=BASE`` gives process i of the job's launch order (servers first, then
workers) ``FLEET_METRICS_PORT=BASE+i``; a process started another way sets that variable itself.
``fleet.init()`` then serves ``http://<the role's host>:<port>/metrics``: training steps, samples
and step times, the parameter-server RPCs' latencies, bytes, failures and calls in flight (a
worker's as a client, a server's as served), each server's table rows and memory, and the
process's CPU and memory. The values are read from the C++ core's counters when Prometheus
scrapes (prometheus_client custom collectors), so nothing polls in between.

Internal: the fleet facade starts the exporter; scripts only set the port.
"""

from __future__ import annotations

from fleet.monitoring.collectors import RpcCollector, TableCollector, TrainingCollector
from fleet.monitoring.exporter import MetricsExporter
from fleet.monitoring.process_metrics import ProcessMetrics
from fleet.monitoring.program_inputs import fed_variables

__all__ = [
    "MetricsExporter",
    "ProcessMetrics",
    "RpcCollector",
    "TableCollector",
    "TrainingCollector",
    "fed_variables",
]
