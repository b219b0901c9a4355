"""Live metrics of a real parameter-server job (issue 30): `fleetrun --metrics_port=BASE` with
2 servers and 2 workers on 127.0.0.2 (metrics_job.py). Every process serves /metrics on its
role's address at BASE+i; a direct scrape sees the series and sees them move, and a real
Prometheus server (Debian's package) scrapes the same job and answers queries for them."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request

import pytest

from tests.python.e2e import metrics_job as mj
from tests.python.e2e.metrics_job import value

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("metrics_job")]

PROMETHEUS = shutil.which("prometheus")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """One running job for the module; at the end it is stopped and must end cleanly."""
    running = mj.start(tmp_path_factory.mktemp("metrics_job"))
    try:
        # Ready once every worker has trained a step that counted samples and every server
        # holds rows: from then on the series must move.
        mj.wait_until(
            lambda: (
                all(
                    value(mj.scrape(running.endpoint(i)), "fleet_train_samples_total") > 0
                    for i in range(mj.SERVERS, mj.SERVERS + mj.WORKERS)
                )
                and all(
                    value(mj.scrape(running.endpoint(i)), "fleet_ps_table_rows", type="sparse") > 0
                    for i in range(mj.SERVERS)
                )
            ),
            "every worker counting samples and every server holding rows",
            launcher=running.launcher,
        )
        yield running
    finally:
        ended = mj.stop(running)
    assert ended.returncode == 0, ended.stdout + ended.stderr


def moved(before: dict, after: dict, name: str, **labels: str) -> bool:
    return value(after, name, **labels) > value(before, name, **labels)


def test_every_process_serves_its_series_and_they_move(job):
    first = {i: mj.scrape(job.endpoint(i)) for i in range(len(job.names()))}
    # Scrape again once every worker has trained more (the job trains in the background).
    mj.wait_until(
        lambda: all(
            moved(first[i], mj.scrape(job.endpoint(i)), "fleet_train_samples_total")
            for i in range(mj.SERVERS, mj.SERVERS + mj.WORKERS)
        ),
        "every worker's samples counter increasing",
        launcher=job.launcher,
    )
    second = {i: mj.scrape(job.endpoint(i)) for i in range(len(job.names()))}

    for i, name in enumerate(job.names()):
        role, index = name.split(".")
        before, after = first[i], second[i]
        # Each process labels its series with its role and index.
        assert value(after, "fleet_ps_rpcs_in_flight", role=role, index=index) == value(
            after, "fleet_ps_rpcs_in_flight"
        ), name
        assert all(dict(labels)["role"] == role for (n, labels) in after if n.startswith("fleet_"))
        assert value(after, "process_cpu_seconds_total") > 0, name
        if role == "worker":
            for series in ("fleet_train_steps_total", "fleet_train_samples_total"):
                assert moved(before, after, series, role=role, index=index), (name, series)
            # A step is 8 samples of 3 ids: samples are counted by the fed variable's LoD. The
            # counters are read one after the other while a step may end: one step apart at most.
            steps = value(after, "fleet_train_steps_total")
            samples = value(after, "fleet_train_samples_total")
            assert samples % 8 == 0 and abs(samples - 8 * steps) <= 8, (name, samples, steps)
            timed = value(after, "fleet_train_step_seconds_count")
            assert abs(timed - steps) <= 1, (name, timed, steps)
            inf = value(after, "fleet_train_step_seconds_bucket", le="+Inf")
            assert inf == timed, name
            # The worker's client: sparse pulls and pushes, their latency histograms and
            # bytes move; nothing in flight is negative.
            for kind in ("pull_sparse", "push_sparse"):
                labels = dict(side="client", kind=kind)
                assert moved(before, after, "fleet_ps_rpc_seconds_count", **labels), (name, kind)
                assert moved(before, after, "fleet_ps_rpc_sent_bytes_total", **labels), name
                assert moved(before, after, "fleet_ps_rpc_received_bytes_total", **labels), name
            assert value(after, "fleet_ps_rpcs_in_flight", side="client") >= 0
            assert value(after, "fleet_ps_rpc_errors_total") == 0, name
        else:
            # A server: its share of the sparse table grows with fresh ids, the dense table
            # holds blocks, and it served the workers' pulls and pushes.
            assert value(after, "fleet_ps_table_rows", type="sparse") > 0, name
            assert value(after, "fleet_ps_table_memory_bytes") > 0, name
            assert moved(before, after, "fleet_ps_rpc_seconds_count", side="server"), name
            assert moved(before, after, "fleet_ps_rpc_received_bytes_total", side="server"), name
            assert not any(n.startswith("fleet_train_") for n, _ in after), name


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a socket listening on `port` (IPv4 and IPv6), from /proc."""
    found = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        with open(table) as f:
            next(f)
            for line in f:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    raw = bytes.fromhex(address)
                    if width == 4:
                        found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                    else:  # four little-endian 32-bit words
                        words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                        found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def test_metrics_bind_the_role_address_only(job):
    # Each process listens on 127.0.0.2 at its port, and nothing of the job on a wildcard.
    for i in range(len(job.names())):
        addresses = listening_addresses(job.base + i)
        assert mj.HOST in addresses, (job.names()[i], addresses)
        assert not addresses & {"0.0.0.0", "::"}, (job.names()[i], addresses)
    assert mj.scrape(job.endpoint(0))


def query(prometheus: str, promql: str) -> list[dict]:
    """The result vector of an instant query to Prometheus's HTTP API."""
    url = f"http://{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as reply:
        answer = json.load(reply)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def by_instance(result: list[dict]) -> dict[str, float]:
    return {r["metric"]["instance"]: float(r["value"][1]) for r in result}


@pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the prometheus binary is not installed (Debian package 'prometheus'; "
    "scripts/setup_env.sh installs it)",
)
def test_a_prometheus_server_scrapes_the_job(job, tmp_path):
    listen = f"127.0.0.1:{mj.free_ports('127.0.0.1', 1)[0]}"
    config = tmp_path / "prometheus.yml"
    targets = json.dumps(job.targets())
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: fleet\n"
        f"    static_configs:\n      - targets: {targets}\n"
    )
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address={listen}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # Every process of the job is a healthy target.
        mj.wait_until(
            lambda: by_instance(query(listen, "up")) == {t: 1.0 for t in job.targets()},
            "Prometheus scraping all four processes",
            launcher=server,
        )
        workers = set(job.targets()[mj.SERVERS :])
        servers = set(job.targets()[: mj.SERVERS])
        first = mj.wait_until(
            lambda: (lambda got: got if set(got) == workers else None)(
                by_instance(query(listen, "fleet_train_samples_total"))
            ),
            "Prometheus holding both workers' samples counters",
            launcher=server,
        )
        # The counters move between Prometheus's scrapes.
        mj.wait_until(
            lambda: all(
                v > first[t]
                for t, v in by_instance(query(listen, "fleet_train_samples_total")).items()
            ),
            "the workers' samples counters increasing in Prometheus",
            launcher=server,
        )
        rows = by_instance(query(listen, 'sum by (instance) (fleet_ps_table_rows{type="sparse"})'))
        assert set(rows) == servers and all(v > 0 for v in rows.values()), rows
        # PromQL over the histograms: a pull latency quantile per worker (NaN, not > 0, until
        # the rate window holds two scrapes with pulls between them).
        p99 = "histogram_quantile(0.99, sum by (instance, le) (rate(fleet_ps_rpc_seconds_bucket{"
        p99 += 'side="client",kind="pull_sparse"}[1m])))'
        mj.wait_until(
            lambda: (lambda got: set(got) == workers and all(v > 0 for v in got.values()))(
                by_instance(query(listen, p99))
            ),
            "a p99 pull latency for each worker",
            launcher=server,
        )
    finally:
        server.terminate()
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
