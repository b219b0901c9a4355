"""Writes the seed corpus of ps_service_fuzz: one valid serialized request per PsService method,
prefixed with the method byte the target dispatches on (tests/fuzz/ps_service_fuzz.cc). The
seeds of ps_checkpoint_fuzz come from the target itself (FLEET_FUZZ_WRITE_SEEDS, see its
header). Run from the repository root: .venv/bin/python tests/fuzz/ps_make_seeds.py"""

from pathlib import Path

import numpy as np

from fleet.proto import ps_pb2 as pb

OUT = Path(__file__).resolve().parent / "corpus" / "ps_service"
KEYS = np.array([-3, 0, 7, 2**40, 7], np.int64).tobytes()
SEEDS = {
    "pull_sparse": (0, pb.PullSparseRequest(table_id=1, keys=KEYS)),
    "push_sparse": (
        1,
        pb.PushSparseRequest(table_id=1, keys=KEYS[:32], grads=np.ones(16, np.float32).tobytes()),
    ),
    "push_sparse_delta": (
        1,
        pb.PushSparseRequest(
            table_id=1, keys=KEYS[:8], is_delta=True, grads=np.full(4, 1e30, np.float32).tobytes()
        ),
    ),
    "push_sparse_accumulate": (
        1,
        pb.PushSparseRequest(
            table_id=1, keys=KEYS[:16], grads=np.ones(8, np.float32).tobytes(), accumulate=True
        ),
    ),
    "push_dense_accumulate": (
        3,
        pb.PushDenseRequest(table_id=2, grads=np.ones(100, np.float32).tobytes(), accumulate=True),
    ),
    "barrier_apply": (
        4,
        pb.BarrierRequest(
            name="step", num_workers=1, worker_id=0, timeout_ms=1, apply_accumulated=True
        ),
    ),
    "pull_dense": (2, pb.PullDenseRequest(table_id=2)),
    "push_dense": (3, pb.PushDenseRequest(table_id=2, grads=np.ones(100, np.float32).tobytes())),
    "barrier": (4, pb.BarrierRequest(name="b", num_workers=2, worker_id=1, timeout_ms=1)),
    "save": (5, pb.SaveRequest(dirname="d", all_tables=True, save_id="s1")),
    "save_delta": (5, pb.SaveRequest(dirname="d", table_id=1, mode=pb.DELTA, save_id="s2")),
    "load": (6, pb.LoadRequest(dirname="d", all_tables=True)),
    "shrink": (7, pb.ShrinkRequest(table_id=1, max_unseen_saves=1)),
    "stats": (8, pb.StatsRequest()),
    "heartbeat": (9, pb.HeartbeatRequest()),
    "commit": (
        10,
        pb.CommitSaveRequest(
            dirname="d",
            save_id="s1",
            num_servers=1,
            write_manifest=True,
            files=[
                pb.CheckpointFile(
                    path="ps-s1/table_1/part-0-of-1.base",
                    table_id=1,
                    type=pb.SPARSE,
                    dim=4,
                    num_servers=1,
                    rows=4,
                    bytes=72 + 4 * 40,
                    crc32=1,
                )
            ],
        ),
    ),
    "stop": (11, pb.StopRequest()),
}

OUT.mkdir(parents=True, exist_ok=True)
for name, (method, request) in SEEDS.items():
    (OUT / name).write_bytes(bytes([method]) + request.SerializeToString())
