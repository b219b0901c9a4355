"""Training cases for the collective equivalence tests, shared by the worker script (run by fleetrun
on every rank: `python collective_cases.py <out_dir> <case>...`) and by the test process, which
trains the same model in one process on the ranks' batches put together.

Every case trains STEPS steps of BATCH samples per rank. Rank r's batch of step s is rows
[r * BATCH, (r + 1) * BATCH) of the step's global batch, so one process on the whole global batch
must reach the same parameters (the loss is a mean, and the ranks average their gradients).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any

import numpy as np

import fleet
from fleet import _core, layers

BATCH, STEPS, FEATURES = 8, 4, 12


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    optimizer: str = "sgd"  # "sgd" or "adam"
    vocab: int = 0  # 0: the dense model; else an is_sparse embedding of this many rows
    fuse: bool = True
    bucket_mb: float = 0.001  # small: the dense model spreads over several buckets
    merge_k: int = 1  # gradient merge micro-batches (1: off)
    lazy: bool = False


CASES = {
    c.name: c
    for c in [
        Case("dense_sgd", "sgd", fuse=False),
        Case("dense_adam_fused", "adam"),
        Case("dense_adam_unfused", "adam", fuse=False),
        Case("sparse_small_sgd", "sgd", vocab=500),  # made dense by the pass
        Case("sparse_large_adam", "adam", vocab=40000),  # gathered (ids and rows)
        Case("sparse_large_sgd_unfused", "sgd", vocab=40000, fuse=False),
        Case("merge4_adam", "adam", merge_k=4),
        Case("merge4_sgd_unfused", "sgd", merge_k=4, fuse=False),
    ]
}


def build(case: Case) -> tuple[Any, Any, Any, Any]:
    """(main, startup, loss, optimizer) of the case's model, not minimized yet."""
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        label = layers.data("label", [1], dtype="float32")
        if case.vocab:
            ids = layers.data("ids", [1], dtype="int64", lod_level=1)
            emb = layers.embedding(ids, size=[case.vocab, 8], is_sparse=True)
            hidden = layers.fc(layers.sequence_pool(emb, "sum"), 16, act="relu")
        else:
            x = layers.data("x", [FEATURES], dtype="float32")
            hidden = layers.fc(layers.fc(x, 32, act="relu"), 16, act="tanh")
        logit = layers.fc(hidden, 1)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
    if case.optimizer == "adam":
        opt = fleet.optimizer.Adam(0.01, lazy_mode=case.lazy)
    else:
        opt = fleet.optimizer.SGD(0.5)
    return main, startup, loss, opt


def global_batch(case: Case, step: int, ranks: int) -> dict[str, Any]:
    """Step `step`'s batch of ranks * BATCH samples, as NumPy (ids: a list of id lists)."""
    rng = np.random.RandomState(1000 + step)
    n = ranks * BATCH
    batch: dict[str, Any] = {"label": (rng.rand(n, 1) > 0.5).astype(np.float32)}
    if case.vocab:
        # Ids crowd at the low end (Zipf-like), so ranks touch the same rows too.
        batch["ids"] = [list(rng.zipf(1.3, rng.randint(1, 4)) % case.vocab) for _ in range(n)]
    else:
        batch["x"] = rng.randn(n, FEATURES).astype(np.float32)
    return batch


def feed_of(batch: dict[str, Any], lo: int, hi: int) -> dict[str, Any]:
    feed = {"label": batch["label"][lo:hi]}
    if "ids" in batch:
        seqs = batch["ids"][lo:hi]
        values = np.array([i for s in seqs for i in s], np.int64).reshape(-1, 1)
        feed["ids"] = fleet.LoDTensor(values, lengths=[[len(s) for s in seqs]])
    else:
        feed["x"] = batch["x"][lo:hi]
    return feed


def micro_steps(case: Case) -> int:
    return STEPS * case.merge_k


def params_of(main: Any, scope: Any) -> dict[str, list]:
    return {
        p.name: np.asarray(scope.find_var(p.name).get_tensor().numpy()).tolist()
        for p in main.all_parameters()
    }


def reference(case: Case, ranks: int, initial: dict[str, list]) -> dict[str, np.ndarray]:
    """One process, from the ranks' initial parameters, on the global batches (with gradient
    merge: one step on the k micro-batches of every rank put together)."""
    main, startup, loss, opt = build(case)
    opt.minimize(loss, startup)
    scope = _core.Scope()
    exe = fleet.Executor(fleet.CPUPlace(), resources=_core.RuntimeResources())
    exe.run(startup, scope=scope)
    for name, value in initial.items():
        scope.find_var(name).get_tensor().set(np.asarray(value, np.float32))
    for step in range(STEPS):
        batches = [global_batch(case, step * case.merge_k + m, ranks) for m in range(case.merge_k)]
        merged = {
            k: (
                sum((b[k] for b in batches), [])
                if k == "ids"
                else np.concatenate([b[k] for b in batches])
            )
            for k in batches[0]
        }
        exe.run(main, feed=feed_of(merged, 0, ranks * BATCH * case.merge_k), scope=scope)
    return {p.name: scope.find_var(p.name).get_tensor().numpy() for p in main.all_parameters()}


def run_rank(case: Case, out_dir: str) -> None:
    """Trains the case data-parallel in this rank; writes <out_dir>/<case>.<rank>.json."""
    from fleet import fleet_api
    from fleet.base.distributed_optimizer import DistributedOptimizer
    from fleet.base.distributed_strategy import DistributedStrategy

    rank, ranks = fleet_api.worker_index(), fleet_api.worker_num()
    main, startup, loss, opt = build(case)
    strategy = DistributedStrategy()
    strategy.fuse_all_reduce_ops = case.fuse
    strategy.fuse_grad_size_in_MB = case.bucket_mb
    if case.merge_k > 1:
        strategy.gradient_merge = True
        strategy.gradient_merge_configs = {"k_steps": case.merge_k, "avg": True}
    DistributedOptimizer(fleet_api.instance, opt, strategy).minimize(loss, startup)
    scope = _core.Scope()
    # A different seed per rank: the startup broadcast must make the parameters equal anyway.
    exe = fleet.Executor(fleet.CPUPlace(), seed=7 + 1000 * rank)
    exe.run(startup, scope=scope)
    initial = params_of(main, scope)
    for step in range(micro_steps(case)):
        feed = feed_of(global_batch(case, step, ranks), rank * BATCH, (rank + 1) * BATCH)
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    result = {
        "initial": initial,
        "final": params_of(main, scope),
        "program": str(main),
        "startup": str(startup),
    }
    with open(os.path.join(out_dir, f"{case.name}.{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    from fleet import fleet_api

    fleet_api.init(is_collective=True)
    for name in sys.argv[2:]:
        run_rank(CASES[name], sys.argv[1])
