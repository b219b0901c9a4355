"""Live metrics in one process (fleet.monitoring): the step meter as an executor's step hook,
the RPC meters of a real in-process server and client, the exporter's HTTP endpoint parsed by
prometheus_client's parser, and fleetrun's --metrics_port plan. The multi-process job and the
Prometheus server are in tests/python/e2e/test_metrics.py."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import fleet
from fleet import _core, layers
from fleet.errors import InvalidArgument, Timeout, Unavailable
from fleet.launch.args import parse_args
from fleet.launch.plan import build_plan
from fleet.monitoring import MetricsExporter, ProcessMetrics, fed_variables
from fleet.ps import PsClient, server_config, start_server
from fleet.role_maker import metrics_port_of

TABLE = {
    "table_id": 1,
    "type": "SPARSE",
    "dim": 2,
    "optimizer": {"learning_rate": 1.0, "sgd": {}},
    "initializer": {"zero": {}},
}


def scrape(endpoint: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


def sequence_model() -> tuple[fleet.Program, fleet.Program, object]:
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        dense = layers.data("dense", [3])
        emb = layers.embedding(ids, size=[10, 2])
        joined = layers.concat([layers.sequence_pool(emb, "sum"), dense], axis=1)
        loss = layers.reduce_sum(layers.fc(joined, 1))
    return main, startup, loss


def test_fed_variables_are_the_inputs_no_op_writes():
    main, _, _ = sequence_model()
    assert fed_variables(main) == ["ids", "dense"]


def test_steps_samples_and_step_times_of_an_executor():
    main, startup, loss = sequence_model()
    resources = _core.RuntimeResources()
    exe = fleet.Executor(fleet.CPUPlace(), resources=resources)
    exe.run(startup)
    metrics = ProcessMetrics("worker", 3, resources, client=lambda: None, server=lambda: None)
    metrics.count_samples_of(main)
    endpoint = metrics.start("127.0.0.1", 0)
    try:
        before = scrape(endpoint)
        # Samples of a step: the sequences of the LoD input (the first fed variable).
        for sequences in (4, 2, 5):
            lengths = [2] * sequences
            exe.run(
                main,
                feed={
                    "ids": fleet.LoDTensor(np.ones((2 * sequences, 1), np.int64), [lengths]),
                    "dense": np.zeros((sequences, 3), np.float32),
                },
                fetch_list=[loss],
            )
        after = scrape(endpoint)
    finally:
        metrics.close()
    labels = {"role": "worker", "index": "3"}
    assert value(before, "fleet_train_steps_total", **labels) == 0
    assert value(after, "fleet_train_steps_total", **labels) == 3
    assert value(after, "fleet_train_samples_total", **labels) == 11
    assert value(after, "fleet_train_step_seconds_count", **labels) == 3
    assert value(after, "fleet_train_step_seconds_bucket", le="+Inf", **labels) == 3
    assert value(after, "fleet_train_step_seconds_sum", **labels) > 0
    # Cumulative buckets never decrease.
    buckets = sorted(
        (float(dict(ls)["le"]), v)
        for (n, ls), v in after.items()
        if n == "fleet_train_step_seconds_bucket"
    )
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    # Closed: the hook is gone and the port no longer served.
    assert resources.num_step_hooks() == 0
    with pytest.raises(OSError):
        scrape(endpoint)


def test_steps_and_samples_of_a_dataset_pass_on_two_threads(tmp_path):
    # 35 samples in batches of 8 on two trainer threads: every step counted once, samples by
    # each batch's own size (the last batch holds 3).
    path = tmp_path / "part-0"
    path.write_text("".join(f"2 {i}.0 1.0\n" for i in range(35)))
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [2])
        layers.scale(x, scale=2.0)
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var([x])
    dataset.set_batch_size(8)
    dataset.set_filelist([str(path)])
    resources = _core.RuntimeResources()
    exe = fleet.Executor(fleet.CPUPlace(), resources=resources)
    metrics = ProcessMetrics("worker", 0, resources, client=lambda: None, server=lambda: None)
    metrics.count_samples_of(main)
    endpoint = metrics.start("127.0.0.1", 0)
    try:
        with fleet.scope_guard(_core.Scope()):
            result = exe.train_from_dataset(main, dataset, thread=2, print_period=0)
        got = scrape(endpoint)
    finally:
        metrics.close()
    assert result.samples == 35
    assert value(got, "fleet_train_steps_total") == 5
    assert value(got, "fleet_train_samples_total") == 35
    assert value(got, "fleet_train_step_seconds_count") == 5


@pytest.fixture
def server_and_client():
    server = start_server(server_config(0, 1, [TABLE]))
    client = PsClient([server.endpoint])
    yield server, client
    client.close()
    server.shutdown(1.0)


def test_rpc_meters_of_a_client_and_its_server(server_and_client):
    server, client = server_and_client
    exporter = MetricsExporter("worker", 0)
    exporter.watch_rpcs("client", lambda: _core.monitoring.client_rpcs(client.core_client))
    exporter.watch_rpcs("server", lambda: _core.monitoring.server_rpcs(server))
    exporter.watch_tables(lambda: _core.monitoring.server_tables(server))
    endpoint = exporter.start("127.0.0.1", 0)
    try:
        keys = np.arange(100)
        for _ in range(3):
            client.pull_sparse(1, keys)
        client.push_sparse(1, keys, np.ones((100, 2), np.float32))
        got = scrape(endpoint)
        # A call to a server that has gone fails with its status code, counted by the client.
        server.shutdown(1.0)
        with pytest.raises((Unavailable, Timeout)):
            client.pull_sparse(1, keys)
        failed = scrape(endpoint)
    finally:
        exporter.close()
    pull = {"side": "client", "kind": "pull_sparse"}
    assert value(got, "fleet_ps_rpc_seconds_count", **pull) == 3
    assert value(got, "fleet_ps_rpc_errors_total") == 0
    assert value(got, "fleet_ps_rpc_seconds_count", side="client", kind="push_sparse") == 1
    # 100 keys of 8 bytes go out per pull; 100 rows of 2 floats come back.
    assert value(got, "fleet_ps_rpc_sent_bytes_total", **pull) >= 3 * 800
    assert value(got, "fleet_ps_rpc_received_bytes_total", **pull) >= 3 * 800
    # The server saw the same calls, the other way round.
    served = {"side": "server", "kind": "pull_sparse"}
    assert value(got, "fleet_ps_rpc_seconds_count", **served) == 3
    for sent, received in (("sent", "received"), ("received", "sent")):
        assert value(got, f"fleet_ps_rpc_{sent}_bytes_total", **pull) == value(
            got, f"fleet_ps_rpc_{received}_bytes_total", **served
        )
    assert value(got, "fleet_ps_rpcs_in_flight", side="client") == 0
    assert value(got, "fleet_ps_table_rows", table="1", type="sparse") == 100
    assert value(got, "fleet_ps_table_memory_bytes", table="1") > 0
    errors = {
        dict(ls)["code"]: v
        for (n, ls), v in failed.items()
        if n == "fleet_ps_rpc_errors_total" and dict(ls)["kind"] == "pull_sparse"
    }
    assert sum(errors.values()) >= 1 and set(errors) <= {"UNAVAILABLE", "DEADLINE_EXCEEDED"}


def test_exporter_on_a_taken_port_names_it():
    first = MetricsExporter("server", 0)
    endpoint = first.start("127.0.0.1", 0)
    try:
        port = int(endpoint.rsplit(":", 1)[1])
        with pytest.raises(Unavailable, match=f"127.0.0.1:{port}"):
            MetricsExporter("server", 1).start("127.0.0.1", port)
    finally:
        first.close()


def test_fleetrun_metrics_port_numbers_processes_in_launch_order(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    args = parse_args(["--server_num=2", "--worker_num=3", "--metrics_port=9100", str(script)])
    ports = {p.name: p.env["FLEET_METRICS_PORT"] for p in build_plan(args, {}).procs}
    assert ports == {
        "server.0": "9100",
        "server.1": "9101",
        "worker.0": "9102",
        "worker.1": "9103",
        "worker.2": "9104",
    }
    args = parse_args(["--collective", "--nproc_per_node=2", "--metrics_port=9100", str(script)])
    assert [p.env["FLEET_METRICS_PORT"] for p in build_plan(args, {}).procs] == ["9100", "9101"]
    args = parse_args(["--server_num=1", "--worker_num=1", str(script)])
    assert all("FLEET_METRICS_PORT" not in p.env for p in build_plan(args, {}).procs)
    with pytest.raises(InvalidArgument, match="--metrics_port=70000"):
        parse_args(["--server_num=1", "--worker_num=1", "--metrics_port=70000", str(script)])
    args = parse_args(["--server_num=1", "--worker_num=2", "--metrics_port=65534", str(script)])
    with pytest.raises(InvalidArgument, match="worker.1 would serve on port 65536"):
        build_plan(args, {})


def test_role_maker_reads_the_metrics_port():
    assert metrics_port_of({"FLEET_METRICS_PORT": "9100"}) == 9100
    assert metrics_port_of({}) is None
    with pytest.raises(InvalidArgument, match="FLEET_METRICS_PORT='x'"):
        metrics_port_of({"FLEET_METRICS_PORT": "x"})
