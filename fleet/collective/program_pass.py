"""The collective program pass: makes a program that the user's optimizer minimized train
data-parallel. Called by the facade (DistributedOptimizer.minimize) for collective jobs, after
backward and optimizer ops were appended as in one process. A pure rewrite: it takes the number
of ranks and touches no group; the step hook it asks for comes back in its plan.

What it does (`print(program)` shows every op it adds):

* startup: one `c_broadcast` per parameter from rank 0 after the initialisers, so all ranks start
  equal whatever their seeds;
* main, dense gradients, averaged over the ranks before the first optimizer op reads them:
  - `fuse_all_reduce_ops=False`: `c_allreduce_sum` + `scale(1/nranks)` per gradient;
  - `fuse_all_reduce_ops=True` (default): gradients packed in buckets of at most
    `fuse_grad_size_in_MB`, in the order backward produces them; `c_allreduce_start` right after
    the op that writes a bucket's last gradient (the bucket is reduced on the group's thread while
    backward goes on), `c_allreduce_wait` (unpack and scale) right before the first op that reads
    one of its gradients, so an optimizer waits only for its own bucket;
* main, `is_sparse` embedding gradients (SelectedRows): a table of at most
  SPARSE_DENSE_MAX_BYTES is made dense (its gradient op writes a dense tensor, reduced as above):
  a small table costs less to allreduce whole than to gather, and dense keeps the ops simple. A
  larger one is gathered (`c_allgather_rows`: every rank's ids and rows, scaled by 1/nranks),
  which moves batch-sized data instead of the table. Adam's lazy_mode always gathers: a dense
  gradient would update every row.
* gradient merge (`strategy.gradient_merge`, `gradient_merge_configs = {"k_steps": k, "avg":
  True}`): backward adds each gradient into a persistable accumulator (`c_gradient_merge_acc`,
  which also counts steps); the allreduces, the optimizer ops (reading the accumulators) and the
  accumulators' reset move to block 1, which a step hook runs after every k-th step. k
  micro-batches of B thus make one optimizer step on k * B, with one allreduce. Embedding
  gradients are made dense under gradient merge (accumulating SelectedRows would grow without
  bound).

Internal: fleet.distributed_optimizer(optimizer, strategy).minimize(loss) runs it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from fleet._dtypes import FLOAT32, INT64
from fleet.distributed_strategy import DistributedStrategy
from fleet.errors import InvalidArgument
from fleet.framework import (
    LOD_TENSOR,
    OP_ROLE_ATTR,
    OP_ROLE_BACKWARD,
    OP_ROLE_OPTIMIZE,
    Block,
    Operator,
    Program,
    Variable,
)
from fleet.optimizer import Adam, Optimizer

# How autodiff names the partial gradients of a variable used several times (fleet/backward.py).
_RENAME = "@RENAME@"

# Embedding tables up to this size have their is_sparse gradients made dense (see above).
SPARSE_DENSE_MAX_BYTES = 1 << 20
MERGE_SUFFIX = "@MERGED"
MERGE_STEP_VAR = "gradient_merge_step"
_ROLE = {OP_ROLE_ATTR: OP_ROLE_BACKWARD}


@dataclasses.dataclass
class GradientMergePlan:
    """The step hook a gradient-merge program needs: after every `k_steps`-th step (counted in
    `step_var`), run block `apply_block` of `program_desc` (the serialized main program)."""

    program_desc: bytes
    apply_block: int
    step_var: str
    k_steps: int


@dataclasses.dataclass
class CollectivePlan:
    """What the collective runtime must add for the rewritten program: `gradient_merge`, the
    step hook of a gradient-merge program (None otherwise)."""

    nranks: int
    gradient_merge: Optional[GradientMergePlan] = None


def rewrite(
    main: Program,
    startup: Program,
    optimizer: Optimizer,
    params_grads: Sequence[tuple[Any, Variable]],
    strategy: DistributedStrategy,
    nranks: int,
) -> CollectivePlan:
    """Rewrites `main` and `startup` in place to train data-parallel over `nranks` ranks;
    returns what the collective runtime must add (the gradient-merge step hook)."""
    block = main.global_block()
    _broadcast_parameters(main, startup)
    merge_k = strategy.gradient_merge_configs["k_steps"] if strategy.gradient_merge else 1
    dense, sparse = _split_gradients(
        block, params_grads, optimizer, strategy.table_optimizers, force_dense=merge_k > 1
    )
    bucket_bytes = int(strategy.fuse_grad_size_in_MB * (1 << 20))
    fuse = strategy.fuse_all_reduce_ops
    if merge_k > 1:
        avg = strategy.gradient_merge_configs["avg"]
        _gradient_merge(main, startup, dense, nranks, merge_k, avg, fuse, bucket_bytes)
        merge = GradientMergePlan(main.desc().SerializeToString(), 1, MERGE_STEP_VAR, merge_k)
        return CollectivePlan(nranks, merge)
    first = _first_optimize_index(block)
    for name in reversed(sparse):
        block._insert_op(
            first,
            "c_allgather_rows",
            inputs={"X": name},
            outputs={"Out": name},
            attrs=dict(_ROLE, scale=1.0 / nranks),
        )
    if fuse:
        _fused_allreduce(block, dense, nranks, bucket_bytes)
    else:
        _allreduce_each(block, dense, nranks)
    return CollectivePlan(nranks)


def _broadcast_parameters(main: Program, startup: Program) -> None:
    sblock = startup.global_block()
    for param in main.all_parameters():
        if sblock.has_var(param.name):
            sblock.append_op(
                "c_broadcast",
                inputs={"X": param.name},
                outputs={"Out": param.name},
                attrs={"root": 0},
            )


def _first_optimize_index(block: Block) -> int:
    for i, op in enumerate(block.ops):
        if op.attrs.get(OP_ROLE_ATTR) == OP_ROLE_OPTIMIZE:
            return i
    return len(block.ops)


def _split_gradients(
    block: Block,
    params_grads: Sequence[tuple[Any, Variable]],
    optimizer: Optimizer,
    table_optimizers: Mapping[str, Optimizer],
    force_dense: bool,
) -> tuple[list[str], list[str]]:
    """(dense gradient names, gathered sparse gradient names), in params_grads order; makes the
    gradients of small (or, with force_dense, all) sparse tables dense, unless the table's
    optimizer is a lazy Adam (it must see which rows the batch touched)."""
    sparse_writers = _sparse_grad_ops(block)
    dense, sparse = [], []
    for param, grad in params_grads:
        if grad.name not in sparse_writers:
            dense.append(grad.name)
            continue
        own = table_optimizers.get(param.name, optimizer)
        lazy = isinstance(own, Adam) and own.lazy_mode
        table_bytes = 4 * _numel(param.shape)
        if force_dense or (table_bytes <= SPARSE_DENSE_MAX_BYTES and not lazy):
            _make_dense(block, grad)
            dense.append(grad.name)
        else:
            sparse.append(grad.name)
    return dense, sparse


def _sparse_grad_ops(block: Block) -> dict[str, list[Operator]]:
    """The is_sparse embedding gradient ops, by the gradient they make (a SelectedRows at run
    time, whatever kind Python declared for it). A table shared by several lookups has several,
    each writing a partial gradient (`W@GRAD@RENAME@k`) that a `sum` op adds up into `W@GRAD`."""
    writers: dict[str, list[Operator]] = {}
    for op in block.ops:
        if op.type == "lookup_table_grad" and op.attrs.get("is_sparse") and op.output("W@GRAD"):
            writers.setdefault(op.output("W@GRAD")[0].split(_RENAME)[0], []).append(op)
    return writers


def _make_dense(block: Block, grad: Variable) -> None:
    for op in _sparse_grad_ops(block)[grad.name]:
        op.attrs["is_sparse"] = False
        for name in op.output("W@GRAD"):
            block.var(name).kind = LOD_TENSOR
    grad.kind = LOD_TENSOR
    block.program._bump()


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def _allreduce_each(block: Block, grads: list[str], nranks: int) -> None:
    first = _first_optimize_index(block)
    for name in reversed(grads):
        block._insert_op(
            first,
            "scale",
            inputs={"X": name},
            outputs={"Out": name},
            attrs=dict(_ROLE, scale=1.0 / nranks),
        )
        block._insert_op(
            first, "c_allreduce_sum", inputs={"X": name}, outputs={"Out": name}, attrs=dict(_ROLE)
        )


def _buckets(
    block: Block, grads: list[str], bucket_bytes: int, order: dict[str, int]
) -> list[list[str]]:
    """Gradients in the order they are produced, cut into buckets of at most bucket_bytes (a
    gradient larger than that gets a bucket of its own)."""
    buckets: list[list[str]] = []
    size = 0
    for name in sorted(grads, key=lambda n: order.get(n, -1)):
        nbytes = 4 * _numel(block.var(name).shape)
        if not buckets or size + nbytes > bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(name)
        size += nbytes
    return buckets


def _last_writers(block: Block, grads: list[str]) -> dict[str, int]:
    wanted, last = set(grads), {}
    for i, op in enumerate(block.ops[: _first_optimize_index(block)]):
        for name in wanted.intersection(op.output_names):
            last[name] = i
    return last


def _fused_allreduce(block: Block, grads: list[str], nranks: int, bucket_bytes: int) -> None:
    if not grads:
        return
    for name in grads:
        if block.var(name).dtype != FLOAT32:
            raise InvalidArgument(
                f"fuse_all_reduce_ops: gradient '{name}' is not float32; "
                "fused buckets hold float32 gradients (set "
                "strategy.fuse_all_reduce_ops = False)"
            )
    writers = _last_writers(block, grads)
    buckets = _buckets(block, grads, bucket_bytes, writers)
    names = [block.program.unique_name("fused_grad_bucket") for _ in buckets]
    for bucket, buffer in zip(buckets, names):
        block.create_var(
            buffer, shape=[sum(_numel(block.var(g).shape) for g in bucket)], dtype=FLOAT32
        )
    # Starts, latest position first so earlier positions stay valid.
    for bucket, buffer in sorted(zip(buckets, names), key=lambda bn: -writers.get(bn[0][-1], -1)):
        block._insert_op(
            writers.get(bucket[-1], -1) + 1,
            "c_allreduce_start",
            inputs={"X": bucket},
            outputs={"Out": buffer},
            attrs=dict(_ROLE),
        )
    first = _first_optimize_index(block)
    waits = []
    for bucket, buffer in zip(buckets, names):
        members = set(bucket)
        at = next(
            (
                i
                for i in range(first, len(block.ops))
                if members.intersection(block.ops[i].input_names)
            ),
            len(block.ops),
        )
        waits.append((at, bucket, buffer))
    for at, bucket, buffer in sorted(waits, key=lambda w: -w[0]):
        block._insert_op(
            at,
            "c_allreduce_wait",
            inputs={"X": buffer},
            outputs={"Out": bucket},
            attrs=dict(_ROLE, scale=1.0 / nranks),
        )


def _gradient_merge(
    main: Program,
    startup: Program,
    grads: list[str],
    nranks: int,
    k: int,
    avg: bool,
    fuse: bool,
    bucket_bytes: int,
) -> None:
    """Backward adds each gradient into an accumulator; the optimizer ops move to block 1 (run
    every k steps by the step hook), after the accumulators' allreduce and before their reset."""
    first = _first_optimize_index(main.global_block())
    accs = _add_accumulators(main, startup, grads)
    apply = _apply_block(main, first, grads, accs)
    scale = 1.0 / (nranks * (k if avg else 1))  # the average over the ranks and k micro-batches
    _allreduce_accumulators(main, apply, accs, scale, fuse, bucket_bytes)
    for acc in accs:
        del apply.vars[acc]  # declared there by _apply_block, see there
    main._bump()


def _add_accumulators(main: Program, startup: Program, grads: list[str]) -> list[str]:
    """A persistable zero-initialised accumulator per gradient (`<grad>@MERGED`) and the step
    counter, in both programs; returns the accumulators' names."""
    block, sblock = main.global_block(), startup.global_block()
    accs = []
    for name in grads:
        var = block.var(name)
        acc = name + MERGE_SUFFIX
        for b in (block, sblock):
            b.create_var(
                acc, shape=list(var.shape), dtype=var.dtype, persistable=True, stop_gradient=True
            )
        sblock.append_op(
            "fill_constant",
            outputs={"Out": acc},
            attrs={"shape": list(var.shape), "dtype": var.dtype, "value": 0.0},
        )
        accs.append(acc)
    for b in (block, sblock):
        b.create_var(MERGE_STEP_VAR, shape=[1], dtype=INT64, persistable=True, stop_gradient=True)
    sblock.append_op(
        "fill_constant",
        outputs={"Out": MERGE_STEP_VAR},
        attrs={"shape": [1], "dtype": INT64, "value": 0.0},
    )
    return accs


def _apply_block(main: Program, first: int, grads: list[str], accs: list[str]) -> Block:
    """Block 1, what runs every k steps: the ops from `first` (the optimize ops) move there,
    reading the accumulators, followed by the accumulators' reset; block 0 ends with the
    accumulating op instead."""
    block = main.global_block()
    apply = Block(main, 1, parent_idx=0)
    main.blocks.append(apply)
    moved = [block._remove_op(first) for _ in range(first, len(block.ops))]
    block.append_op(
        "c_gradient_merge_acc",
        inputs={"X": grads, "Acc": accs, "Step": MERGE_STEP_VAR},
        outputs={"AccOut": accs, "StepOut": MERGE_STEP_VAR},
        attrs=dict(_ROLE),
    )
    # The accumulators are declared in block 1 only while its ops are added (so that no op
    # creates a local copy of them there); they live in block 0, persistable, in the root scope.
    for acc in accs:
        apply.vars[acc] = block.var(acc)
    renamed = dict(zip(grads, accs))
    for op in moved:
        inputs = {slot: [renamed.get(n, n) for n in names] for slot, names in op.inputs.items()}
        apply.ops.append(Operator(apply, op.type, inputs, op.outputs, op.attrs))
    for acc in accs:
        apply._insert_op(
            len(apply.ops),
            "fill_constant",
            outputs={"Out": acc},
            attrs={
                "shape": list(block.var(acc).shape),
                "dtype": FLOAT32,
                "value": 0.0,
                OP_ROLE_ATTR: OP_ROLE_OPTIMIZE,
            },
        )
    return apply


def _allreduce_accumulators(
    main: Program, apply: Block, accs: list[str], scale: float, fuse: bool, bucket_bytes: int
) -> None:
    """The allreduce of the accumulators, scaled by `scale`, at the head of block 1: fused in
    buckets, or one allreduce and scale per accumulator."""
    block = main.global_block()
    if fuse:
        writers = {acc: i for i, acc in enumerate(accs)}
        for n, bucket in enumerate(_buckets(apply, accs, bucket_bytes, writers)):
            buffer = main.unique_name("merged_grad_bucket")
            apply.create_var(
                buffer, shape=[sum(_numel(block.var(a).shape) for a in bucket)], dtype=FLOAT32
            )
            apply._insert_op(
                2 * n,
                "c_allreduce_start",
                inputs={"X": bucket},
                outputs={"Out": buffer},
                attrs=dict(_ROLE),
            )
            apply._insert_op(
                2 * n + 1,
                "c_allreduce_wait",
                inputs={"X": buffer},
                outputs={"Out": bucket},
                attrs=dict(_ROLE, scale=scale),
            )
    else:
        for n, acc in enumerate(accs):
            apply._insert_op(
                2 * n, "c_allreduce_sum", inputs={"X": acc}, outputs={"Out": acc}, attrs=dict(_ROLE)
            )
            apply._insert_op(
                2 * n + 1,
                "scale",
                inputs={"X": acc},
                outputs={"Out": acc},
                attrs=dict(_ROLE, scale=scale),
            )


__all__ = [
    "MERGE_STEP_VAR",
    "SPARSE_DENSE_MAX_BYTES",
    "CollectivePlan",
    "GradientMergePlan",
    "rewrite",
]
