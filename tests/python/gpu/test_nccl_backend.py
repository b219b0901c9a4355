"""The NCCL backend (collective/nccl_backend.h). What runs everywhere: the communicator-id
exchange through the store and its errors, and the clear error of a group asked for where the
build has no NCCL or the machine no GPU. What needs two GPUs (skipped otherwise): two ranks that
connect with two communicators each and meet at barriers."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from fleet import _core
from fleet.errors import InvalidArgument, Timeout, Unavailable

ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES


def test_every_rank_gets_the_id_rank_zero_published():
    store = _core.MemoryStore()
    published = bytes(range(128))
    got = {}

    def rank(r: int) -> None:
        got[r] = _core.exchange_unique_id(
            store,
            "nccl/g/id/0",
            r,
            ID_BYTES,
            rank0_id=published if r == 0 else b"",
            timeout_s=10.0,
            where=f"group 'g' rank {r}",
        )

    threads = [threading.Thread(target=rank, args=(r,)) for r in (2, 1, 0)]  # peers wait first
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert got[0] == got[1] == got[2] == published


def test_a_peer_whose_rank_zero_never_publishes_times_out_naming_it():
    store = _core.MemoryStore()
    with pytest.raises(
        Timeout, match=r"group 'g' \(rank 1 of 2\): rank 0 did not publish .*nccl/g/id/0"
    ):
        _core.exchange_unique_id(
            store, "nccl/g/id/0", 1, ID_BYTES, timeout_s=0.2, where="group 'g' (rank 1 of 2)"
        )


def test_an_id_of_the_wrong_size_is_refused_on_both_sides():
    store = _core.MemoryStore()
    with pytest.raises(InvalidArgument, match="made an id of 3 bytes, expected 128"):
        _core.exchange_unique_id(store, "k", 0, ID_BYTES, rank0_id=b"abc", timeout_s=1.0)
    store.set("k2", b"abc")
    with pytest.raises(InvalidArgument, match="has 3 bytes, expected 128.*another program"):
        _core.exchange_unique_id(store, "k2", 1, ID_BYTES, timeout_s=1.0)


def test_a_group_without_nccl_or_a_gpu_says_which_is_missing():
    if _core.nccl_device_count() > 0:
        pytest.skip("this machine has a GPU for NCCL")
    store = _core.MemoryStore()
    expected = "no CUDA device" if _core.nccl_compiled() else "no NCCL backend"
    with pytest.raises(Unavailable, match=rf"NCCL group 'g' \(rank 0 of 2\).*{expected}"):
        _core.NcclGroup.connect(store, 0, 2, name="g", timeout_s=1.0)


def test_bad_arguments_are_refused_before_any_device_is_touched():
    store = _core.MemoryStore()
    if not _core.nccl_compiled():
        pytest.skip("this build has no NCCL backend")
    with pytest.raises(InvalidArgument, match="rank must be in"):
        _core.NcclGroup.connect(store, 2, 2, name="g")
    with pytest.raises(InvalidArgument, match="comm_num must be at least 1"):
        _core.NcclGroup.connect(store, 0, 2, name="g", comm_num=0)


def _rank(endpoint: tuple[str, int], rank: int, out: "multiprocessing.Queue") -> None:
    try:
        store = _core.TcpStore(endpoint[0], endpoint[1], connect_timeout_s=60.0)
        group = _core.NcclGroup.connect(store, rank, 2, name="pair", device=rank, comm_num=2)
        for _ in range(4):  # round robin over both communicators, twice
            group.barrier(timeout_s=60.0)
        out.put((rank, group.comm_num, None))
    except Exception as e:  # reported to the parent, which asserts on it
        out.put((rank, 0, repr(e)))


def test_two_ranks_connect_with_two_communicators_and_meet():
    if _core.nccl_device_count() < 2:
        pytest.skip(f"needs 2 CUDA devices for NCCL (this machine has {_core.nccl_device_count()})")
    server = _core.TcpStoreServer("127.0.0.1", 0)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(("127.0.0.1", server.port), r, out)) for r in (0, 1)]
    try:
        for p in procs:
            p.start()
        results = sorted(out.get(timeout=120) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        server.close()
    assert results == [(0, 2, None), (1, 2, None)]
