"""How a machine that runs only parameter servers learns that the job's workers are gone.

The servers of a job spanning several machines learn of a failed worker (its presence call
drops, see csrc/ps/ps.proto), but a server outlives its workers: nothing tells the `fleetrun` of
a servers-only machine that the job is over when the workers' machines fail, or when they never
start. So, in parameter-server jobs spanning machines:

- the `fleetrun` of a machine running workers holds a `WorkerBeacon`: a socket listening on each
  of its workers' endpoints (--workers, which nothing else of the job listens on in a PS job),
  open while its share of the job runs and closed when that `fleetrun` ends (job done, failed,
  or its machine gone). It answers every connection with the job's identity and closes it;
- the `fleetrun` of a machine running servers only holds a `WorkerHostWatch`, which connects to
  every worker endpoint once a second. Only the answer "this job's beacon" counts as a worker:
  a refused or silent endpoint, or one where something else listens (another job's beacon or
  any program that took the port after the worker's machine died), is a worker that is no
  longer there. When every worker endpoint is gone for `settle_s` (enough for servers told to
  stop by the workers' normal end to exit on their own), or when none has answered within
  `start_timeout_s` of the start (the workers' machines never came up), `failure()` says why,
  naming the workers and their hosts, and the controller ends the job.

The watch samples: a workers' machine whose share of the job began and ended between two probes
(within about a second) was never seen, and is reported after `start_timeout_s` as never having
come up. `answered()` says once it has been seen (fleetrun prints it).

Probes are parallel and bounded by `probe_timeout_s`, so a machine that is gone without a trace
(no RST) costs one timeout per round, not one per worker. Every wait is measured with the local
monotonic clock: nothing here compares times across machines.
"""

from __future__ import annotations

import errno
import hashlib
import select
import socket
import threading
import time
from typing import Mapping, Optional

from fleet import role_maker as rm
from fleet._endpoints import parse_endpoint

_ANSWER_PREFIX = b"fleet-worker-beacon "
_ANSWER_MAX = 512


def beacon_answer(env: Mapping[str, str], servers: list[str], workers: list[str]) -> bytes:
    """What a job's beacon answers, the same on every machine of the job: its job identity
    (FLEET_JOB_ID or a cluster manager's job id, see fleet.role_maker), else a digest of its
    server and worker lists, which every machine is given alike."""
    job = rm.job_id_of(env)
    if job is None:
        lists = ",".join(servers) + "|" + ",".join(workers)
        job = "endpoints-" + hashlib.sha1(lists.encode()).hexdigest()[:12]
    return _ANSWER_PREFIX + job.encode()[: _ANSWER_MAX - len(_ANSWER_PREFIX) - 1] + b"\n"


class WorkerBeacon:
    """Listens on `endpoints` (this machine's workers) and answers every connection with
    `answer` and closes it, so a watching machine's probes never fill the accept queue, until
    close()."""

    def __init__(self, endpoints: list[str], answer: bytes) -> None:
        self._answer = answer
        self._sockets: list[socket.socket] = []
        try:
            for endpoint in endpoints:
                host, port = parse_endpoint(endpoint, "worker endpoint")
                s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
                self._sockets.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
                s.listen(64)
        except OSError:
            self.close()
            raise
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="worker-beacon", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select(self._sockets, [], [], 0.2)
            except (OSError, ValueError):  # closed under us
                return
            for s in ready:
                try:
                    conn, _ = s.accept()
                except OSError:
                    continue
                try:
                    # A few bytes into an empty send buffer: never blocks. The prober sends
                    # nothing, so closing sends FIN after them, not RST.
                    conn.setblocking(False)
                    conn.send(self._answer)
                except OSError:
                    pass
                finally:
                    conn.close()

    def close(self) -> None:
        closed = getattr(self, "_closed", None)
        if closed is not None:
            closed.set()
            self._thread.join(timeout=2.0)
        for s in self._sockets:
            s.close()
        self._sockets = []


def unanswered(endpoints: list[str], answer: bytes, timeout_s: float) -> set[str]:
    """The endpoints that do not give `answer` within `timeout_s` (refused, silent, or another
    listener that says something else), probed all at once."""
    pending: dict[int, tuple[socket.socket, str]] = {}
    received: dict[int, bytes] = {}
    gone: set[str] = set()
    poller = select.poll()
    for endpoint in endpoints:
        host, port = parse_endpoint(endpoint, "worker endpoint")
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.setblocking(False)
        code = s.connect_ex((host, port))
        if code in (0, errno.EINPROGRESS, errno.EAGAIN):
            pending[s.fileno()] = (s, endpoint)
            received[s.fileno()] = b""
            # Writable once connected (or failed), readable once the answer or EOF arrives.
            poller.register(s, select.POLLIN | select.POLLOUT)
        else:
            s.close()
            gone.add(endpoint)
    deadline = time.monotonic() + timeout_s
    while pending:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            break
        for fd, events in poller.poll(left_ms):
            s, endpoint = pending[fd]
            verdict = _read_answer(s, events, received, answer)
            if verdict is None:
                poller.modify(fd, select.POLLIN)  # connected: wait for the answer only
                continue
            if verdict is False:
                gone.add(endpoint)
            poller.unregister(fd)
            del pending[fd]
            s.close()
    for s, endpoint in pending.values():  # silent until the timeout
        s.close()
        gone.add(endpoint)
    return gone


def _read_answer(
    s: socket.socket, events: int, received: dict[int, bytes], answer: bytes
) -> Optional[bool]:
    """One poll event of a probe: True (the beacon's answer, whole), False (refused, reset,
    closed early or something else said), None (connected, the answer not yet whole)."""
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
        return False
    if not events & (select.POLLIN | select.POLLHUP | select.POLLERR):
        return None  # connected; the answer has not come yet
    try:
        chunk = s.recv(_ANSWER_MAX)
    except BlockingIOError:
        return None
    except OSError:
        return False
    got = received[s.fileno()] + chunk
    received[s.fileno()] = got
    if not answer.startswith(got) or (not chunk and got != answer):
        return False  # another listener, or closed before the whole answer
    return True if got == answer else None


def describe_workers(endpoints: list[str], all_workers: list[str]) -> str:
    """ "worker 0 at 10.0.0.3:6171, worker 1 at 10.0.0.3:6172 (host(s) 10.0.0.3)"."""
    named = [f"worker {all_workers.index(e)} at {e}" for e in endpoints]
    hosts = list(dict.fromkeys(parse_endpoint(e, "worker endpoint")[0] for e in endpoints))
    return f"{', '.join(named)} (host(s) {', '.join(hosts)})"


class WorkerHostWatch:
    """Probes the job's worker endpoints from a background thread (see the module doc);
    failure() is None while the job may go on."""

    def __init__(
        self,
        workers: list[str],
        answer: bytes,
        start_timeout_s: float,
        settle_s: float = 5.0,
        period_s: float = 1.0,
        probe_timeout_s: float = 1.0,
    ) -> None:
        self._workers = workers
        self._answer = answer
        self._start_timeout_s = start_timeout_s
        self._settle_s = settle_s
        self._period_s = period_s
        self._probe_timeout_s = probe_timeout_s
        self._started = time.monotonic()
        self._seen_up = False
        self._all_gone_since: Optional[float] = None
        self._failure: Optional[str] = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-host-watch", daemon=True)
        self._thread.start()

    def failure(self) -> Optional[str]:
        with self._lock:
            return self._failure

    def answered(self) -> bool:
        """Whether a worker of the job has answered a probe since the start."""
        with self._lock:
            return self._seen_up

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._probe_timeout_s + 2.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            gone = unanswered(self._workers, self._answer, self._probe_timeout_s)
            with self._lock:
                self._failure = self._judge(gone, time.monotonic())
                if self._failure is not None:
                    return
            self._stop.wait(self._period_s)

    def _judge(self, gone: set[str], now: float) -> Optional[str]:
        if len(gone) < len(self._workers):
            self._seen_up = True
            self._all_gone_since = None
            return None
        listed = describe_workers(self._workers, self._workers)
        if not self._seen_up:
            waited = now - self._started
            if waited < self._start_timeout_s:
                return None
            return (
                f"no worker of the job came up within {self._start_timeout_s:g} s "
                f"(--host_timeout): {listed} never answered; start their fleetrun, or check "
                "the addresses in --workers"
            )
        if self._all_gone_since is None:
            self._all_gone_since = now
        if now - self._all_gone_since < self._settle_s:
            return None
        return (
            f"every worker of the job is gone: {listed} no longer answer (their fleetrun "
            "ended, or their host is down or unreachable) while the servers here still run"
        )
