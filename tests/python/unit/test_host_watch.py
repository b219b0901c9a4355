"""The host watch of PS jobs over several machines (fleet/launch/host_watch.py) on real sockets of
127.0.0.1: a worker counts as there only when its job's beacon answers; a refused port, a
listener that says nothing and another job's beacon are all a worker that is gone."""

from __future__ import annotations

import socket
import time

import pytest

from fleet.launch.host_watch import WorkerBeacon, WorkerHostWatch, beacon_answer, unanswered
from fleet.launch.plan import free_ports

SERVERS = ["127.0.0.1:6001"]


def _endpoints(count: int) -> list[str]:
    return [f"127.0.0.1:{p}" for p in free_ports("127.0.0.1", count)]


def _answer(job: str, workers: list[str]) -> bytes:
    return beacon_answer({"FLEET_JOB_ID": job}, SERVERS, workers)


def _wait_until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold within the timeout"
        time.sleep(0.05)


def test_the_answer_is_the_job_identity_or_the_same_digest_on_every_machine():
    workers = _endpoints(2)
    assert _answer("job-a", workers) == b"fleet-worker-beacon job-a\n"
    cluster = beacon_answer({"PADDLE_JOB_ID": "pj-7"}, SERVERS, workers)
    assert cluster == b"fleet-worker-beacon PADDLE_JOB_ID=pj-7\n"
    derived = beacon_answer({}, SERVERS, workers)
    assert derived == beacon_answer({}, list(SERVERS), list(workers))
    assert derived != beacon_answer({}, SERVERS, workers[:1])


def test_only_this_jobs_beacon_counts_as_a_worker():
    mine, other_job, silent, refused = _endpoints(4)
    workers = [mine, other_job, silent, refused]
    answer = _answer("job-a", workers)
    beacon = WorkerBeacon([mine], answer)
    foreign = WorkerBeacon([other_job], _answer("job-b", workers))
    host, port = silent.split(":")
    listener = socket.socket()  # accepts (the kernel does) and never says anything
    try:
        listener.bind((host, int(port)))
        listener.listen(8)
        gone = unanswered(workers, answer, timeout_s=1.0)
    finally:
        listener.close()
        beacon.close()
        foreign.close()
    assert gone == {other_job, silent, refused}
    assert unanswered([mine], answer, timeout_s=1.0) == {mine}  # closed: refused now


def test_the_watch_ends_once_every_answering_worker_is_gone():
    workers = _endpoints(2)
    answer = _answer("job-a", workers)
    beacon = WorkerBeacon(workers, answer)
    watch = WorkerHostWatch(workers, answer, start_timeout_s=60, settle_s=1.0, period_s=0.1)
    try:
        _wait_until(watch.answered)
        assert watch.failure() is None
        beacon.close()
        _wait_until(lambda: watch.failure() is not None)
    finally:
        beacon.close()
        watch.close()
    assert watch.failure() == (
        f"every worker of the job is gone: worker 0 at {workers[0]}, worker 1 at {workers[1]} "
        "(host(s) 127.0.0.1) no longer answer (their fleetrun ended, or their host is down or "
        "unreachable) while the servers here still run"
    )


@pytest.mark.parametrize("listening", ["nothing", "another job"])
def test_workers_that_never_answer_end_the_watch_after_the_start_timeout(listening):
    workers = _endpoints(1)
    foreign = WorkerBeacon(workers, _answer("job-b", workers)) if listening != "nothing" else None
    watch = WorkerHostWatch(workers, _answer("job-a", workers), start_timeout_s=1.0, period_s=0.1)
    try:
        _wait_until(lambda: watch.failure() is not None)
    finally:
        watch.close()
        if foreign is not None:
            foreign.close()
    assert not watch.answered()
    assert watch.failure().startswith(
        f"no worker of the job came up within 1 s (--host_timeout): worker 0 at {workers[0]} "
        "(host(s) 127.0.0.1) never answered"
    )
