"""benchmarks/data_parallel.py's replica_time_us_per_step: where the wall time of the runner's
replica threads goes in a pass (on a core, preempted, asleep), from each thread's schedstat."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from tests.python.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import data_parallel as bench  # noqa: E402

MS = 1_000_000  # ns


def test_a_pool_threads_wall_time_is_split_into_on_core_preempted_and_asleep():
    me = threading.get_native_id()
    before = {me: (0, 0), 101: (5 * MS, 1 * MS), 202: (1 * MS, 0)}
    # In a pass of 1 s and 10 steps: thread 101 ran 600 ms and waited 100 ms for a core; 202
    # barely ran; 303 was born during the pass (the reader) and is not a replica.
    after = {me: (2 * MS, 0), 101: (605 * MS, 101 * MS), 202: (2 * MS, 0), 303: (90 * MS, 0)}
    times = bench.replica_times(before, after, wall_s=1.0, cpu_s=1.5, steps=10)
    assert times["on_core"] == pytest.approx([60_000])  # us a step
    assert times["preempted"] == pytest.approx([10_000])
    assert times["asleep"] == pytest.approx([30_000])
    # Replica 0, the reader and the rest: the process's CPU less replica 1's.
    assert times["other_threads_cpu"] == pytest.approx(90_000)


def test_without_a_thread_of_the_runner_there_is_nothing_to_split():
    me = threading.get_native_id()
    assert bench.replica_times({me: (0, 0)}, {me: (MS, 0)}, 1.0, 1.0, 1) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux schedstat")
def test_thread_times_sees_this_threads_time_on_a_core_grow():
    me = threading.get_native_id()
    before = bench.thread_times()
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    after = bench.thread_times()
    assert me in before and me in after
    assert after[me][0] - before[me][0] >= 20 * MS  # of the 50 ms this thread spent running
    assert after[me][1] >= before[me][1]
