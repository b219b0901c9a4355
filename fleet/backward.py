"""Reverse-mode autodiff over a block: append_backward(loss) appends the gradient ops.

The gradient of each op comes from its registered gradient maker (C++). This module decides
which ops need gradients, drops gradients nobody needs, fills missing output gradients with
zeros, and adds up the gradients of variables used more than once: each producer writes
`v@GRAD@RENAME@k` and a `sum` op makes `v@GRAD` before its first use.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.framework import OP_ROLE_BACKWARD, Block, Operator, Parameter, Variable
from fleet.proto import framework_pb2 as pb

GRAD_SUFFIX = "@GRAD"
_RENAME = "@RENAME@"


def grad_var_name(name: str) -> str:
    return name + GRAD_SUFFIX


def _forward_name(grad_name: str) -> str:
    base = grad_name.split(_RENAME)[0]
    return base[: -len(GRAD_SUFFIX)] if base.endswith(GRAD_SUFFIX) else base


def _ops_reaching(ops: Sequence[Operator], target: str) -> list[bool]:
    """For each op, whether one of its outputs flows into `target`."""
    needed = {target}
    reaches = [False] * len(ops)
    for i in range(len(ops) - 1, -1, -1):
        if needed.intersection(ops[i].output_names):
            reaches[i] = True
            needed.update(ops[i].input_names)
    return reaches


def _differentiable_vars(block: Block, ops: Sequence[Operator], no_grad: set[str]) -> set[str]:
    """Variables whose value depends on some trainable variable through ops with gradients."""
    registry = _core.op_registry
    live = {name for name, v in block.vars.items() if not v.stop_gradient and name not in no_grad}
    for op in ops:
        if registry.has_grad(op.type) and live.intersection(op.input_names):
            live.update(
                n for n in op.output_names if n not in no_grad and not block.vars[n].stop_gradient
            )
    return live


def _make_grad_ops(op: Operator) -> list[Operator]:
    descs = _core.op_registry.make_grad_ops(op.to_desc().SerializeToString())
    return [Operator.from_desc(op.block, pb.OpDesc.FromString(d)) for d in descs]


def _prune_outputs(grad_op: Operator, wanted: set[str]) -> None:
    for slot in list(grad_op.outputs):
        kept = [
            n
            for n in grad_op.outputs[slot]
            if not n.endswith(GRAD_SUFFIX) or _forward_name(n) in wanted
        ]
        if kept:
            grad_op.outputs[slot] = kept
        else:
            del grad_op.outputs[slot]


def _collect_grad_ops(
    block: Block, ops: Sequence[Operator], loss: Variable, differentiable: set[str]
) -> list[Operator]:
    reaches = _ops_reaching(ops, loss.name)
    available = {grad_var_name(loss.name)}
    result: list[Operator] = []
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if not reaches[i] or not _core.op_registry.has_grad(op.type):
            continue
        if not differentiable.intersection(op.input_names):
            continue
        for grad_op in _make_grad_ops(op):
            _prune_outputs(grad_op, differentiable)
            if not grad_op.output_names:
                continue
            grad_inputs = [n for n in grad_op.input_names if n.endswith(GRAD_SUFFIX)]
            missing = [n for n in grad_inputs if n not in available]
            if grad_inputs and len(missing) == len(grad_inputs):
                continue  # no gradient flows into this op
            for name in missing:
                # An output nobody differentiates (e.g. a second output): its gradient is zero.
                result.append(
                    Operator(
                        block, "fill_zeros_like", {"X": [_forward_name(name)]}, {"Out": [name]}, {}
                    )
                )
                available.add(name)
            result.append(grad_op)
            available.update(grad_op.output_names)
    return result


def _accumulate_duplicates(block: Block, grad_ops: list[Operator]) -> list[Operator]:
    producers: dict[str, int] = {}
    for op in grad_ops:
        for name in op.output_names:
            producers[name] = producers.get(name, 0) + 1
    counters: dict[str, int] = {}
    pending: dict[str, list[str]] = {}
    out: list[Operator] = []

    def flush(names: Iterable[str]) -> None:
        for name in list(names):
            if name in pending:
                out.append(Operator(block, "sum", {"X": pending.pop(name)}, {"Out": [name]}, {}))

    for op in grad_ops:
        flush([n for n in op.input_names if n in pending])
        for slot, names in op.outputs.items():
            renamed = []
            for name in names:
                if producers[name] > 1:
                    k = counters.get(name, 0)
                    counters[name] = k + 1
                    alias = f"{name}{_RENAME}{k}"
                    pending.setdefault(name, []).append(alias)
                    renamed.append(alias)
                else:
                    renamed.append(name)
            op.outputs[slot] = renamed
        out.append(op)
    flush(list(pending))
    return out


def _declare_grad_vars(block: Block, op: Operator) -> None:
    for name in op.output_names:
        if block.has_var(name):
            continue
        fwd = block._find_var_recursive(_forward_name(name))
        if fwd is None:
            block.create_var(name)
        else:
            block.create_var(name, shape=fwd.shape, dtype=fwd.dtype, lod_level=fwd.lod_level)


def append_backward(
    loss: Variable,
    parameter_list: Sequence[str] | None = None,
    no_grad_set: Iterable[str] | None = None,
) -> list[tuple[Parameter, Variable]]:
    """Appends gradient ops for `loss` to its block; returns (parameter, gradient) pairs for
    the trainable parameters (or those named in parameter_list) that receive a gradient."""
    block = loss.block
    program = block.program
    if loss.shape not in ((1,), (), (-1,)) and any(d != 1 for d in loss.shape if d >= 0):
        raise InvalidArgument(
            f"append_backward: loss '{loss.name}' must be a scalar (shape [1]), "
            f"got shape {list(loss.shape)}; reduce it with layers.mean"
        )
    no_grad = {n.name if isinstance(n, Variable) else n for n in (no_grad_set or [])}
    forward_ops = list(block.ops)
    differentiable = _differentiable_vars(block, forward_ops, no_grad)
    if loss.name not in differentiable:
        raise InvalidArgument(
            f"append_backward: loss '{loss.name}' does not depend on any trainable parameter"
        )
    with program.op_role_guard(OP_ROLE_BACKWARD):
        block.append_op(
            "fill_constant",
            outputs={"Out": grad_var_name(loss.name)},
            attrs={"shape": [1], "dtype": loss.dtype, "value": 1.0},
        )
        grad_ops = _accumulate_duplicates(
            block, _collect_grad_ops(block, forward_ops, loss, differentiable)
        )
        for op in grad_ops:
            _declare_grad_vars(block, op)
            block.append_op(
                op.type,
                op.inputs,
                op.outputs,
                {k: v for k, v in op.attrs.items() if k != "op_role"},
                infer_shape=False,
            )
    params = block.all_parameters()
    if parameter_list is not None:
        wanted = {p.name if isinstance(p, Variable) else p for p in parameter_list}
        params = [p for p in params if p.name in wanted]
    return [
        (p, block.var(grad_var_name(p.name)))
        for p in params
        if p.trainable and block.has_var(grad_var_name(p.name))
    ]


def gradients(targets: Variable, inputs: Sequence[Variable]) -> list[Variable | None]:
    """Gradients of a scalar target with respect to `inputs` (None where none flows)."""
    block = targets.block
    saved = {v.name: v.stop_gradient for v in inputs}
    for v in inputs:
        v.stop_gradient = False
    try:
        append_backward(targets)
    finally:
        for v in inputs:
            v.stop_gradient = saved[v.name]
    return [block.vars.get(grad_var_name(v.name)) for v in inputs]
