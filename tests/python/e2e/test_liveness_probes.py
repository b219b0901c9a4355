"""The liveness listener (csrc/collective/liveness.h) answers every probe, however many: a real
process holds one on 127.0.0.1, and this test probes it over real sockets many more times than a
listen queue holds (128). Each probe must see the listener close its end (the answer), and the
listening process must not keep a descriptor or a thread per probe.

Without an accepting thread, the kernel queues the first ~128 connections and never hands them
on: those probes get no answer, and later ones are not even accepted, so a rank that is alive
would be named gone after a failure elsewhere. (Before that, the listener said its port was 0,
so every probe was refused and a rank that was only slow was named gone at once.)"""

from __future__ import annotations

import os
import socket
import threading

import numpy as np
import pytest

from fleet import _core
from fleet.errors import Timeout
from tests.python.e2e.serving_child import serving_child

pytestmark = pytest.mark.timeout(300)

LISTENER = """
import sys
from fleet import _core
listener = _core.LivenessListener("127.0.0.1", 0)
print(listener.port, flush=True)
sys.stdin.read()  # listens until the test closes our stdin
"""

# How long a probe may wait for its answer before the test calls it unanswered: a guard against
# hanging, far above what a loaded machine needs (the answer is a close by the listener).
HANG_GUARD_S = 20.0


@pytest.fixture
def listener_process():
    with serving_child(LISTENER) as served:
        yield served


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def answered(probe: socket.socket) -> bool:
    """True when the listener closed its end of `probe` (an end of stream, or a reset)."""
    probe.settimeout(HANG_GUARD_S)
    try:
        return probe.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_every_one_of_many_sequential_probes_is_answered(listener_process):
    proc, port = listener_process
    fds_before, threads_before = open_fds(proc.pid), threads(proc.pid)
    for i in range(1000):
        with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as probe:
            assert answered(probe), f"probe {i} got no answer from a live listener"
    assert proc.poll() is None, proc.stderr.read()
    assert open_fds(proc.pid) <= fds_before + 1, "the listener kept descriptors of probes"
    assert threads(proc.pid) == threads_before


def test_a_burst_of_probes_held_open_at_once_is_answered(listener_process):
    proc, port = listener_process
    fds_before = open_fds(proc.pid)
    # More connections at once than the listen queue holds: the listener must drain the queue
    # while they arrive, or the later ones are never accepted.
    probes = [
        socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) for _ in range(400)
    ]
    try:
        fds_during = open_fds(proc.pid)
        unanswered = [i for i, probe in enumerate(probes) if not answered(probe)]
    finally:
        for probe in probes:
            probe.close()
    assert unanswered == [], f"{len(unanswered)} of 400 probes got no answer"
    # The listener closes each probe at once: it never holds one descriptor per probe.
    assert fds_during <= fds_before + 4, f"{fds_during - fds_before} descriptors held for probes"
    assert open_fds(proc.pid) <= fds_before + 1
    assert proc.poll() is None, proc.stderr.read()


def test_a_rank_that_is_slow_but_alive_is_not_named_gone():
    """Two ranks of a real Gloo group (threads of this process, a real TCP store): rank 1 never
    calls the all-reduce, so rank 0's call times out; rank 1's listener answers the probe, so
    the message says every other rank still runs instead of naming rank 1 gone."""
    server = _core.TcpStoreServer("127.0.0.1", 0)
    groups = [None, None]

    def join(rank: int) -> None:
        store = _core.TcpStore("127.0.0.1", server.port, connect_timeout_s=30)
        groups[rank] = _core.GlooGroup.connect(store, rank, 2, "127.0.0.1", "slow", 60.0, 60.0)

    joining = [threading.Thread(target=join, args=(rank,)) for rank in range(2)]
    try:
        for t in joining:
            t.start()
        for t in joining:
            t.join(timeout=90)
        assert all(g is not None for g in groups), "the group did not connect"
        with pytest.raises(Timeout) as timed_out:
            groups[0].all_reduce(np.ones(4, np.float32), "sum", timeout_s=0.5)
        message = str(timed_out.value)
        assert "rank(s) [1] did not arrive" in message, message
        assert "every other rank of 2 still runs" in message and "are gone" not in message, message
    finally:
        groups.clear()
        server.close()
