"""A parameter-server job with live metrics, for the metrics tests: 2 servers and 2 workers
started by `fleetrun --metrics_port=BASE` on 127.0.0.2 (not the default 127.0.0.1, so that a
test sees each process serve its metrics on its role's address and nowhere else). The workers
train until the test says stop, so that every scrape finds them training."""

from __future__ import annotations

import dataclasses
import pathlib
import socket
import subprocess
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from fleet.launch.plan import free_ports
from tests.python.e2e import launch_helpers as lh

HOST = "127.0.0.2"
SERVERS, WORKERS = 2, 2

# Workers train on fresh ids each step (so the servers' rows grow) until $JOB_DIR/stop exists;
# the bound keeps a test that dies before saying stop from leaving a job behind for long.
TRAIN_UNTIL_STOPPED = """
    import fleet as F
    from fleet import layers
    main, startup = F.Program(), F.Program()
    with F.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = layers.embedding(ids, size=[1000, 4], is_sparse=True)
        pooled = layers.sequence_pool(emb, "sum")
        loss = layers.reduce_sum(layers.fc(pooled, 1))
        F.distributed_optimizer(F.optimizer.SGD(0.01),
                                F.DistributedStrategyFactory.create_async_strategy()
                                ).minimize(loss)
    if F.is_server():
        F.init_server(); F.run_server(); sys.exit(0)
    exe = F.Executor(F.CPUPlace())
    exe.run(F.startup_program)
    F.init_worker()
    rng = np.random.default_rng(F.worker_index())
    deadline = time.monotonic() + 300
    while not (JOB_DIR / "stop").exists() and time.monotonic() < deadline:
        batch = 8  # samples, each of 3 ids
        keys = rng.integers(0, 1 << 40, size=(3 * batch, 1))
        exe.run(F.main_program,
                feed={"ids": F.LoDTensor(keys, lengths=[[3] * batch])}, fetch_list=[loss])
        time.sleep(0.02)  # a gentle pace: the tests need movement, not throughput
    F.stop_worker()
"""


def free_port_run(host: str, count: int) -> int:
    """A port p such that p, p+1, ..., p+count-1 are free on `host` right now."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((host, 0))
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError(f"no run of {count} free ports on {host}")


@dataclasses.dataclass
class MetricsJob:
    job_dir: pathlib.Path
    launcher: subprocess.Popen
    base: int

    def names(self) -> list[str]:
        """Processes in launch order: process i serves on base + i."""
        return [f"server.{i}" for i in range(SERVERS)] + [f"worker.{i}" for i in range(WORKERS)]

    def endpoint(self, i: int, host: str = HOST) -> str:
        return f"{host}:{self.base + i}"

    def targets(self) -> list[str]:
        return [self.endpoint(i) for i in range(SERVERS + WORKERS)]


def start(job_dir: pathlib.Path) -> MetricsJob:
    """Starts the job on 127.0.0.2; stop it with stop()."""
    ports = free_ports(HOST, SERVERS + WORKERS)
    servers = ",".join(f"{HOST}:{p}" for p in ports[:SERVERS])
    workers = ",".join(f"{HOST}:{p}" for p in ports[SERVERS:])
    base = free_port_run(HOST, SERVERS + WORKERS)
    options = [
        f"--servers={servers}",
        f"--workers={workers}",
        f"--host={HOST}",
        f"--metrics_port={base}",
    ]
    launcher = lh.start_job(job_dir, options, TRAIN_UNTIL_STOPPED)
    return MetricsJob(job_dir, launcher, base)


def stop(job: MetricsJob, timeout: float = 120) -> subprocess.CompletedProcess:
    """Tells the workers to stop, waits for fleetrun to end the job, then checks that none of
    its processes is left; returns fleetrun's exit status and output."""
    (job.job_dir / "stop").write_text("")
    try:
        out, err = job.launcher.communicate(timeout=timeout)
    finally:
        lh.stop_launcher(job.launcher)
    left = lh.running(list(lh.pids(job.job_dir).values()))
    assert not left, f"processes left running after the job: {left}"
    return subprocess.CompletedProcess(job.launcher.args, job.launcher.returncode, out, err)


def scrape(endpoint: str, timeout: float = 10) -> dict[tuple[str, tuple], float]:
    """GET http://endpoint/metrics, parsed by prometheus_client's parser: {(sample name,
    sorted labels): value}."""
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=timeout) as reply:
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


def wait_until(check, what: str, timeout: float = 90, launcher: subprocess.Popen = None):
    """Polls check() (None/False: not yet; exceptions of a server not up yet count as not yet)
    until it returns a value; AssertionError naming `what` after `timeout` or if the job ended."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if launcher is not None and launcher.poll() is not None:
            out, err = launcher.communicate()
            raise AssertionError(f"the job ended before {what}: {out}\n{err}")
        try:
            got = check()
            if got:
                return got
        except OSError as e:
            last = e
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout} s: {what} (last error: {last})")
