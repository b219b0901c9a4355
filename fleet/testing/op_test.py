"""Single-op test harness: run one registered op on NumPy inputs, and check its gradient against
finite differences.

    out = run_op("relu", {"X": x}, ["Out"])                 # -> {"Out": ndarray}
    check_grad("relu", {"X": x}, wrt=["X"])                  # raises AssertionError on mismatch
    grads("relu", {"X": x}, wrt=["X"], cuda_device=0)        # gradients from the CUDA kernels

`cuda_device` runs the ops on that CUDA device instead of the CPU (inputs are copied there,
outputs back), so GPU tests compare the CUDA kernels with the CPU ones on the same inputs.

Input values may be an ndarray, a `Seq` (ndarray + lod offsets), a `Rows` (SelectedRows) or a
list of those for a multi-variable slot. Ops run in float32 as in training; the finite
differences and the loss are accumulated in float64. The coverage test
(tests/python/unit/ops/test_grad_coverage.py) finds grad checks by scanning test sources for
`check_grad("<op type>"`, so call it with the op type as a literal first argument.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from fleet import _core
from fleet._attrs import encode_attr
from fleet.proto import framework_pb2 as pb


@dataclasses.dataclass
class Seq:
    """A sequence (LoD) input: `values` rows split by `lod` offsets, e.g. [[0, 2, 5]]."""

    values: np.ndarray
    lod: list[list[int]]


@dataclasses.dataclass
class Rows:
    """A SelectedRows input: `value[i]` is row `rows[i]` of a [height, width] matrix."""

    rows: list[int]
    value: np.ndarray
    height: int


InputValue = Any  # ndarray | Seq | Rows | list of those


def _as_list(value: InputValue) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _var_names(slot: str, count: int) -> list[str]:
    base = slot.replace("@", "_")
    return [f"{base}_{i}" for i in range(count)]


def make_op_desc(
    op_type: str,
    inputs: Mapping[str, list[str]],
    outputs: Mapping[str, list[str]],
    attrs: Mapping[str, Any],
) -> pb.OpDesc:
    op = pb.OpDesc(type=op_type)
    for slot, names in inputs.items():
        op.inputs.add(parameter=slot, arguments=names)
    for slot, names in outputs.items():
        op.outputs.add(parameter=slot, arguments=names)
    for name, value in sorted(attrs.items()):
        encode_attr(op.attrs.add(), name, value)
    return op


def _set_value(scope: Any, name: str, value: InputValue) -> None:
    var = scope.var(name)
    if isinstance(value, Rows):
        var.get_selected_rows().set(list(value.rows), np.asarray(value.value), value.height)
        return
    tensor = var.get_tensor()
    if isinstance(value, Seq):
        tensor.set(np.asarray(value.values))
        tensor.set_lod(value.lod)
    else:
        tensor.set(np.asarray(value))


def _read_value(var: Any) -> Any:
    if var.is_selected_rows():
        return var.get_selected_rows()
    return var.get_tensor().numpy()


def _run_ops(
    ops: Sequence[pb.OpDesc], scope: Any, var_names: Sequence[str], cuda_device: int | None = None
) -> None:
    program = pb.ProgramDesc()
    block = program.blocks.add(idx=0, parent_idx=-1)
    for name in var_names:
        block.vars.add(name=name, persistable=True)
    block.ops.extend(ops)
    device = -1 if cuda_device is None else cuda_device
    executor = _core.Executor(seed=1234, cuda_device=device)
    prepared = executor.prepare(program.SerializeToString(), 0)
    executor.run(prepared, scope, [])


def run_op(
    op_type: str,
    inputs: Mapping[str, InputValue],
    outputs: Sequence[str] | Mapping[str, int],
    attrs: Mapping[str, Any] | None = None,
    *,
    raw: bool = False,
    cuda_device: int | None = None,
) -> dict[str, Any]:
    """Runs one op and returns its outputs by slot: an ndarray (or a list of them for a slot
    with several variables). With raw=True the values are the LoDTensor / SelectedRows objects,
    so a test can read lod() or rows(). `cuda_device`: run on that CUDA device."""
    attrs = dict(attrs or {})
    counts = dict(outputs) if isinstance(outputs, Mapping) else {s: 1 for s in outputs}
    scope = _core.Scope()
    in_names = {slot: _var_names(slot, len(_as_list(v))) for slot, v in inputs.items()}
    out_names = {slot: [f"out_{n}" for n in _var_names(slot, c)] for slot, c in counts.items()}
    for slot, value in inputs.items():
        for name, item in zip(in_names[slot], _as_list(value)):
            _set_value(scope, name, item)
    op = make_op_desc(op_type, in_names, out_names, attrs)
    _run_ops([op], scope, [], cuda_device)
    result: dict[str, Any] = {}
    for slot, names in out_names.items():
        values = []
        for name in names:
            var = scope.find_var(name)
            if raw:
                values.append(
                    var.get_selected_rows() if var.is_selected_rows() else var.get_tensor()
                )
            else:
                values.append(_read_value(var))
        result[slot] = (
            values[0] if len(values) == 1 and not isinstance(outputs, Mapping) else values
        )
    return result


def _dense(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    return np.asarray(value.to_dense())  # SelectedRows


def _loss(outputs: dict[str, Any], weights: dict[str, list[np.ndarray]]) -> float:
    total = 0.0
    for slot, ws in weights.items():
        for value, w in zip(
            _as_list(outputs[slot]) if isinstance(outputs[slot], list) else [outputs[slot]], ws
        ):
            total += float(np.sum(np.asarray(value, dtype=np.float64) * w))
    return total


def _perturbable(value: InputValue) -> np.ndarray:
    """The float array a finite difference perturbs in place."""
    if isinstance(value, Seq):
        return value.values
    if isinstance(value, Rows):
        return value.value
    return value


def check_grad(
    op_type: str,
    inputs: Mapping[str, InputValue],
    wrt: Sequence[str],
    attrs: Mapping[str, Any] | None = None,
    out_slots: Sequence[str] = ("Out",),
    delta: float = 1e-3,
    rtol: float = 1e-2,
    atol: float = 1e-3,
    seed: int = 0,
    aux_slots: Sequence[str] = (),
) -> None:
    """Compares the op's analytic gradient (its registered grad ops) with central finite
    differences of loss = sum_o sum(w_o * out_o) for random weights w_o, for every input slot in
    `wrt`. `aux_slots` are outputs the op must bind but the loss leaves out (intermediates its
    gradient reads, like top_k's Indices). Raises AssertionError naming the op, slot, element and
    both values on mismatch."""
    attrs = dict(attrs or {})
    rng = np.random.default_rng(seed)
    inputs = {
        slot: [dataclasses.replace(v) if isinstance(v, (Seq, Rows)) else v for v in _as_list(value)]
        if isinstance(value, (list, tuple))
        else value
        for slot, value in inputs.items()
    }
    # Own float32 copies, so perturbation never touches the caller's arrays.
    for slot, value in list(inputs.items()):
        items = _as_list(value)
        copies = []
        for item in items:
            if isinstance(item, Seq):
                copies.append(Seq(np.array(item.values), item.lod))
            elif isinstance(item, Rows):
                copies.append(
                    Rows(list(item.rows), np.array(item.value, dtype=np.float32), item.height)
                )
            else:
                copies.append(np.array(item))
        inputs[slot] = copies if isinstance(value, (list, tuple)) else copies[0]

    counts = {slot: 1 for slot in (*out_slots, *aux_slots)}
    forward = run_op(op_type, inputs, counts, attrs)
    weights = {
        slot: [
            rng.uniform(0.5, 1.5, size=np.shape(_dense(v)))
            * rng.choice([-1.0, 1.0], size=np.shape(_dense(v)))
            for v in forward[slot]
        ]
        for slot in out_slots
    }

    analytic = _analytic_grads(op_type, inputs, attrs, forward, weights, wrt)
    for slot in wrt:
        for index, item in enumerate(_as_list(inputs[slot])):
            array = _perturbable(item)
            numeric = np.zeros(array.shape, dtype=np.float64)
            flat = array.reshape(-1)
            for j in range(flat.size):
                original = flat[j]
                flat[j] = original + delta
                plus = _loss(run_op(op_type, inputs, counts, attrs), weights)
                flat[j] = original - delta
                minus = _loss(run_op(op_type, inputs, counts, attrs), weights)
                flat[j] = original
                numeric.reshape(-1)[j] = (plus - minus) / (2 * delta)
            got = analytic[slot][index]
            if got.shape != numeric.shape:
                raise AssertionError(
                    f"{op_type}: gradient of {slot}[{index}] has shape "
                    f"{got.shape}, expected {numeric.shape}"
                )
            bad = np.abs(got - numeric) > atol + rtol * np.abs(numeric)
            if bad.any():
                j = tuple(np.argwhere(bad)[0])
                raise AssertionError(
                    f"{op_type}: gradient of {slot}[{index}] at {j} is {got[j]:.6g}, finite "
                    f"differences give {numeric[j]:.6g} ({int(bad.sum())} of {bad.size} "
                    f"elements differ)"
                )


def grads(
    op_type: str,
    inputs: Mapping[str, InputValue],
    wrt: Sequence[str],
    attrs: Mapping[str, Any] | None = None,
    out_slots: Sequence[str] = ("Out",),
    seed: int = 0,
    cuda_device: int | None = None,
) -> dict[str, list[np.ndarray]]:
    """The op's analytic gradients (its registered grad ops) of loss = sum_o sum(w_o * out_o),
    per slot of `wrt` (one array per variable), with weights w_o drawn from `seed` as check_grad
    draws them. `cuda_device` runs forward and grad ops on that CUDA device."""
    attrs = dict(attrs or {})
    rng = np.random.default_rng(seed)
    counts = {slot: 1 for slot in out_slots}
    forward = run_op(op_type, inputs, counts, attrs, cuda_device=cuda_device)
    weights = {
        slot: [
            rng.uniform(0.5, 1.5, size=np.shape(_dense(v)))
            * rng.choice([-1.0, 1.0], size=np.shape(_dense(v)))
            for v in forward[slot]
        ]
        for slot in out_slots
    }
    return _analytic_grads(op_type, inputs, attrs, forward, weights, wrt, cuda_device)


def _analytic_grads(
    op_type: str,
    inputs: Mapping[str, InputValue],
    attrs: Mapping[str, Any],
    forward: dict[str, list],
    weights: dict[str, list[np.ndarray]],
    wrt: Sequence[str],
    cuda_device: int | None = None,
) -> dict[str, list[np.ndarray]]:
    scope = _core.Scope()
    in_names = {slot: _var_names(slot, len(_as_list(v))) for slot, v in inputs.items()}
    out_names = {
        slot: [f"out_{n}" for n in _var_names(slot, len(vals))] for slot, vals in forward.items()
    }
    for slot, value in inputs.items():
        for name, item in zip(in_names[slot], _as_list(value)):
            _set_value(scope, name, item)
    fwd = make_op_desc(op_type, in_names, out_names, attrs)
    # Re-run forward in this scope so grad ops see the exact forward outputs (with their lod).
    _run_ops([fwd], scope, [], cuda_device)
    for slot, ws in weights.items():
        for name, w in zip(out_names[slot], ws):
            tensor = scope.var(name + "@GRAD").get_tensor()
            tensor.set(w.astype(np.float32))
            lod = scope.find_var(name).get_tensor().lod()
            if lod:
                tensor.set_lod(lod)
    grad_ops = [
        pb.OpDesc.FromString(b) for b in _core.op_registry.make_grad_ops(fwd.SerializeToString())
    ]
    # Keep only gradients that are asked for or consumed, as autodiff would.
    wanted = {n + "@GRAD" for slot in wrt for n in in_names[slot]}
    for op in grad_ops:
        for out in op.outputs:
            kept = [a for a in out.arguments if a in wanted or not a.endswith("@GRAD")]
            del out.arguments[:]
            out.arguments.extend(kept)
    _run_ops(grad_ops, scope, [], cuda_device)
    result: dict[str, list[np.ndarray]] = {}
    for slot in wrt:
        grads = []
        for name in in_names[slot]:
            var = scope.find_var(name + "@GRAD")
            if var is None or not var.is_initialized():
                raise AssertionError(f"{op_type}: grad ops did not produce {name}@GRAD")
            grads.append(np.asarray(_dense(_read_value(var)), dtype=np.float64))
        result[slot] = grads
    return result
