"""Every registered op with a gradient has a finite-difference gradient check, and every
forward op has a forward test against NumPy. Checks are found by scanning the test sources for
`check_grad("<type>"` and `run_op("<type>"` calls."""

import pathlib
import re

from fleet import _core

TESTS_ROOT = pathlib.Path(__file__).resolve().parents[2]
# Ops that only exist to serve the executor or autodiff; covered by executor tests.
INFRASTRUCTURE_OPS = {"feed", "fetch"}
# Ops whose kernels talk to parameter servers: checked against the servers' tables in
# tests/python/unit/test_ps_ops.py and end to end in tests/python/e2e/test_ps_training.py.
# Collective ops: checked against one process on twice the batch in
# tests/python/e2e/test_collective_training.py and tests/python/unit/test_collective_pass.py.
DISTRIBUTED_OPS = {
    "pull_sparse",
    "push_sparse",
    "send",
    "c_allgather_rows",
    "c_allreduce_start",
    "c_allreduce_sum",
    "c_allreduce_wait",
    "c_broadcast",
    "c_gradient_merge_acc",
}


def _called_ops(function: str) -> set[str]:
    pattern = re.compile(function + r'\(\s*"([a-z0-9_]+)"')
    found: set[str] = set()
    for path in TESTS_ROOT.rglob("test_*.py"):
        found.update(pattern.findall(path.read_text()))
    return found


def _forward_ops() -> list[str]:
    return [
        t
        for t in _core.op_registry.types()
        if not t.endswith("_grad") and t not in INFRASTRUCTURE_OPS | DISTRIBUTED_OPS
    ]


def test_every_op_with_a_gradient_has_a_gradient_check() -> None:
    checked = _called_ops("check_grad")
    with_grad = [t for t in _forward_ops() if _core.op_registry.has_grad(t)]
    missing = sorted(set(with_grad) - checked)
    assert with_grad, "no op with a gradient is registered"
    assert not missing, f"ops with a gradient but no check_grad test: {missing}"


def test_every_forward_op_has_a_numpy_reference_test() -> None:
    tested = _called_ops("run_op") | _called_ops("check_grad")
    missing = sorted(set(_forward_ops()) - tested)
    assert not missing, f"ops without a forward test (run_op): {missing}"


def test_every_grad_op_is_reachable_from_a_forward_op() -> None:
    types = set(_core.op_registry.types())
    orphans = sorted(t for t in types if t.endswith("_grad") and t[: -len("_grad")] not in types)
    assert not orphans, f"grad ops without a forward op: {orphans}"
