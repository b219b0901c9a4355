"""How a machine that runs only parameter servers learns that the job's workers are gone.

The servers of a job spanning several machines learn of a failed worker (its presence call
drops, see csrc/ps/ps.proto), but a server outlives its workers: nothing tells the `fleetrun` of
a servers-only machine that the job is over when the workers' machines fail, or when they never
start. So, in parameter-server jobs spanning machines:

- the `fleetrun` of a machine running workers holds a `WorkerBeacon`: a socket listening on each
  of its workers' endpoints (--workers, which nothing else listens on in a PS job), open while
  its share of the job runs and closed when that `fleetrun` ends (job done, failed, or its
  machine gone);
- the `fleetrun` of a machine running servers only holds a `WorkerHostWatch`, which connects to
  every worker endpoint once a second. A refused or silent endpoint is a worker that is no
  longer there. When every worker endpoint is gone for `settle_s` (enough for servers told to
  stop by the workers' normal end to exit on their own), or when none has answered within
  `start_timeout_s` of the start (the workers' machines never came up), `failure()` says why,
  naming the workers and their hosts, and the controller ends the job.

Probes are plain TCP connects, parallel and bounded by `probe_timeout_s`, so a machine that
is gone without a trace (no RST) costs one timeout per round, not one per worker. Every wait is
measured with the local monotonic clock: nothing here compares times across machines.
"""

from __future__ import annotations

import errno
import select
import socket
import threading
import time
from typing import Optional

from fleet._endpoints import parse_endpoint


class WorkerBeacon:
    """Listens on `endpoints` (this machine's workers) and accepts and closes every
    connection, so a watching machine's probes never fill the accept queue, until close()."""

    def __init__(self, endpoints: list[str]) -> None:
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
                    conn.close()
                except OSError:
                    pass

    def close(self) -> None:
        closed = getattr(self, "_closed", None)
        if closed is not None:
            closed.set()
            self._thread.join(timeout=2.0)
        for s in self._sockets:
            s.close()
        self._sockets = []


def unreachable(endpoints: list[str], timeout_s: float) -> set[str]:
    """The endpoints that refuse a TCP connection or do not accept one within `timeout_s`,
    probed all at once."""
    pending: dict[int, tuple[socket.socket, str]] = {}
    gone: set[str] = set()
    poller = select.poll()
    for endpoint in endpoints:
        host, port = parse_endpoint(endpoint, "worker endpoint")
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.setblocking(False)
        code = s.connect_ex((host, port))
        if code == 0:
            s.close()
        elif code in (errno.EINPROGRESS, errno.EAGAIN):
            pending[s.fileno()] = (s, endpoint)
            poller.register(s, select.POLLOUT)
        else:
            s.close()
            gone.add(endpoint)
    deadline = time.monotonic() + timeout_s
    while pending:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            break
        for fd, _ in poller.poll(left_ms):
            s, endpoint = pending.pop(fd)
            poller.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                gone.add(endpoint)
            s.close()
    for s, endpoint in pending.values():  # silent until the timeout
        s.close()
        gone.add(endpoint)
    return gone


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
        start_timeout_s: float,
        settle_s: float = 5.0,
        period_s: float = 1.0,
        probe_timeout_s: float = 1.0,
    ) -> None:
        self._workers = workers
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

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._probe_timeout_s + 2.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            gone = unreachable(self._workers, self._probe_timeout_s)
            verdict = self._judge(gone, time.monotonic())
            if verdict is not None:
                with self._lock:
                    self._failure = verdict
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
