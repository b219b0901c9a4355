"""The benchmarks' native peers live in fleet_bench._bench (benchmarks/native), not in
fleet._core: they work there, and the product module no longer carries them."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from fleet import _core, errors
from fleet.testing.ps_cluster import start_servers
from tests.python.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import fleet_bench  # noqa: E402  (built by scripts/build.sh into benchmarks/fleet_bench)


def test_the_product_module_has_no_benchmark_pieces():
    for name in ("EchoServer", "EchoClient", "memcpy_seconds"):
        assert not hasattr(_core.ps, name)
    assert not hasattr(_core.GlooGroup, "_raw_gloo_allreduce_seconds")


def test_echo_peer_processes_return_the_requested_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT / "benchmarks"))
    with start_servers(tmp_path, None, 2, tag="echo", module="fleet_bench.echo_server") as peers:
        client = fleet_bench.EchoClient(peers.endpoints)
        request = np.arange(8, dtype=np.uint8)
        reply = np.zeros(20, np.uint8)
        client.echo(request, reply)
        # Each server gets half the request and fills its half of the reply from it, repeated.
        assert reply[:10].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
        assert reply[10:].tolist() == [4, 5, 6, 7, 4, 5, 6, 7, 4, 5]
        with pytest.raises(errors.InvalidArgument, match="writable"):
            client.echo(request, np.zeros(4, np.uint8)[::2])


def test_raw_gloo_group_all_reduces_in_place(tmp_path):
    out, failures = {}, []

    def rank(r: int) -> None:
        try:
            group = fleet_bench.RawGlooGroup(str(tmp_path), r, 2, timeout_s=30)
            x = np.full(1000, r + 1, np.float32)
            seconds = group.all_reduce_seconds(x, 2)
            out[r] = (group.rank, group.size, float(x[0]), seconds)
        except BaseException as e:  # re-raised below, in the test's thread
            failures.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not failures, failures
    for r in range(2):
        assert out[r][:3] == (r, 2, 6.0)  # 1 + 2, then doubled by the second sum
        assert out[r][3] > 0


def test_raw_gloo_group_names_a_missing_store_dir(tmp_path):
    with pytest.raises(errors.InvalidArgument, match="not a directory"):
        fleet_bench.RawGlooGroup(str(tmp_path / "missing"), 0, 1)


def test_memcpy_seconds_is_positive():
    assert fleet_bench.memcpy_seconds(1 << 20, 5) > 0
