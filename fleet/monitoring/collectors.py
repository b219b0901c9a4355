"""prometheus_client collectors that read the C++ core's counters at scrape time.

Each collector is given the object to read, or a function returning it (None while it does not
exist: a worker's client before init_worker, a server before init_server), and yields the
metric families of one area. Every series carries the process's labels (role, index).

Series (Prometheus names; counters get _total, histograms _bucket/_sum/_count):
  fleet_train_steps, fleet_train_samples                   counters (rate() gives samples/s)
  fleet_train_step_seconds                                  histogram
  fleet_ps_rpc_seconds{side,kind}                           histogram of RPC latency
  fleet_ps_rpc_sent_bytes / _received_bytes{side,kind}      counters of payload bytes
  fleet_ps_rpc_errors{side,kind,code}                       counter of failed RPCs
  fleet_ps_rpcs_in_flight{side}                             gauge (the RPC queue's depth)
  fleet_ps_table_rows / fleet_ps_table_memory_bytes{table,type}   gauges (servers)
side is "client" (a worker's calls) or "server" (the pulls and pushes a server served).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

Labels = dict[str, str]


def _cumulative(bounds: Sequence[float], counts: Sequence[int]) -> list[tuple[str, float]]:
    """Prometheus buckets (le, cumulative count) from per-bucket counts whose last is +Inf."""
    buckets, total = [], 0
    for le, count in zip([*map(repr, bounds), "+Inf"], counts):
        total += count
        buckets.append((le, float(total)))
    return buckets


class TrainingCollector(Collector):
    """Steps, samples and step times of a `_core.monitoring.StepMeter`."""

    def __init__(self, meter: Any, labels: Labels) -> None:
        self._meter = meter
        self._labels = labels

    def collect(self) -> Iterator[Any]:
        names, values = list(self._labels), list(self._labels.values())
        snap = self._meter.snapshot()
        steps = CounterMetricFamily("fleet_train_steps", "Training steps run", labels=names)
        steps.add_metric(values, snap.steps)
        samples = CounterMetricFamily(
            "fleet_train_samples",
            "Samples trained (the batch size of each step's first fed variable)",
            labels=names,
        )
        samples.add_metric(values, snap.samples)
        seconds = HistogramMetricFamily(
            "fleet_train_step_seconds", "Time of one training step's kernels", labels=names
        )
        seconds.add_metric(
            values,
            _cumulative(snap.step_time_bounds, snap.step_time_buckets),
            snap.step_seconds_sum,
        )
        yield from (steps, samples, seconds)


class RpcCollector(Collector):
    """The parameter-server RPCs of one side: `read()` returns a
    `_core.monitoring.RpcMeterSnapshot`, or None while there is nothing to read."""

    def __init__(self, side: str, read: Callable[[], Optional[Any]], labels: Labels) -> None:
        self._side = side
        self._read = read
        self._labels = labels

    def collect(self) -> Iterator[Any]:
        snap = self._read()
        if snap is None:
            return
        names = [*self._labels, "side", "kind"]
        base = [*self._labels.values(), self._side]
        latency = HistogramMetricFamily(
            "fleet_ps_rpc_seconds", "Parameter-server RPC latency", labels=names
        )
        sent = CounterMetricFamily(
            "fleet_ps_rpc_sent_bytes", "Payload bytes sent (protobuf size)", labels=names
        )
        received = CounterMetricFamily(
            "fleet_ps_rpc_received_bytes", "Payload bytes received (protobuf size)", labels=names
        )
        errors = CounterMetricFamily(
            "fleet_ps_rpc_errors", "Failed RPCs by status code", labels=[*names, "code"]
        )
        for kind in snap.kinds:
            values = [*base, kind.kind]
            buckets = _cumulative(snap.latency_bounds, kind.latency_buckets)
            latency.add_metric(values, buckets, kind.latency_sum_seconds)
            sent.add_metric(values, kind.bytes_sent)
            received.add_metric(values, kind.bytes_received)
            for error in kind.errors:
                errors.add_metric([*values, error.code], error.count)
        in_flight = GaugeMetricFamily(
            "fleet_ps_rpcs_in_flight", "RPCs begun and not ended", labels=[*self._labels, "side"]
        )
        in_flight.add_metric(base, snap.in_flight)
        yield from (latency, sent, received, errors, in_flight)


class TableCollector(Collector):
    """Rows and memory of a server's tables: `read()` returns a list of `_core.ps.TableStats`,
    or None while the server has not started."""

    def __init__(self, read: Callable[[], Optional[Sequence[Any]]], labels: Labels) -> None:
        self._read = read
        self._labels = labels

    def collect(self) -> Iterator[Any]:
        tables = self._read()
        if tables is None:
            return
        names = [*self._labels, "table", "type"]
        rows = GaugeMetricFamily(
            "fleet_ps_table_rows", "Sparse rows, or dense blocks, held by a table", labels=names
        )
        memory = GaugeMetricFamily(
            "fleet_ps_table_memory_bytes", "Memory held by a table", labels=names
        )
        for table in tables:
            values = [*self._labels.values(), str(table.table_id), table.type]
            rows.add_metric(values, table.rows)
            memory.add_metric(values, table.bytes)
        yield from (rows, memory)
