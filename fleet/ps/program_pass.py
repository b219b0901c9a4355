"""The parameter-server program pass: rewrites a worker's programs after the user's optimizer
appended backward and update ops, and records the tables the servers must hold.

* An embedding with ``is_sparse=True`` or ``is_distributed=True`` becomes a sparse table on the
  servers, keyed by the raw int64 id (any value: the vocabulary size is only a hint). Its
  ``lookup_table`` ops become ``pull_sparse``, their gradient ops ``push_sparse``; the table
  parameter, its optimizer op and state leave both programs (nothing of size vocab x dim is
  allocated on a worker). The parameter's initializer becomes the table's initializer.
* Every other trained parameter is dense. All dense parameters are packed, in program order, in
  one dense table split across the servers in blocks. Except in GEO mode their optimizer ops
  (and state) leave the worker and one ``send`` op hands the gradients (after regularization)
  to the communicator; the user's optimizer becomes the servers' update rule. In GEO mode the
  optimizer ops stay: the worker trains its copy and the communicator exchanges deltas.
* The user's optimizer (SGD, Adagrad, Adam, with their hyper-parameters and learning rate)
  becomes each table's update rule; anything the servers cannot apply (Momentum, a learning-rate
  variable, a per-parameter learning rate on a sparse table) is refused naming the parameter.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fleet.base.distributed_strategy import DistributedStrategy, PsMode
from fleet.errors import InvalidArgument
from fleet.framework import OP_ROLE_ATTR, OP_ROLE_OPTIMIZE, Parameter, Program
from fleet.optimizer import SGD, Adagrad, Adam, Optimizer
from fleet.proto import ps_pb2

DENSE_TABLE_ID = 0
_UPDATE_OPS = ("sgd", "adagrad", "adam", "momentum")


@dataclasses.dataclass
class SparseTablePlan:
    table_id: int
    param: str
    dim: int
    config: ps_pb2.TableConfig


@dataclasses.dataclass
class DensePlan:
    param: str
    grad: str
    offset: int
    numel: int


@dataclasses.dataclass
class PsPlan:
    """What init_server / init_worker need: the mode, the tables and the dense packing."""

    mode: PsMode
    strategy: DistributedStrategy
    sparse: list[SparseTablePlan]
    dense: list[DensePlan]
    dense_config: ps_pb2.TableConfig | None  # each table config carries its update rule

    def table_configs(self) -> list[ps_pb2.TableConfig]:
        tables = [t.config for t in self.sparse]
        if self.dense_config is not None:
            tables.append(self.dense_config)
        return tables


def optimizer_config(optimizer: Optimizer, where: str) -> ps_pb2.OptimizerConfig:
    """The servers' update rule for `optimizer`; InvalidArgument for what they cannot apply."""
    lr = optimizer._learning_rate
    if not isinstance(lr, (int, float)) or isinstance(lr, bool):
        raise InvalidArgument(
            f"{where}: the parameter servers need a constant learning rate, "
            f"got a variable {getattr(lr, 'name', lr)!r}"
        )
    config = ps_pb2.OptimizerConfig(learning_rate=float(lr))
    if isinstance(optimizer, Adam):
        config.adam.beta1, config.adam.beta2 = optimizer.beta1, optimizer.beta2
        config.adam.epsilon = optimizer.epsilon
    elif isinstance(optimizer, Adagrad):
        config.adagrad.epsilon = optimizer.epsilon
        config.adagrad.initial_accumulator = optimizer.initial_accumulator_value
    elif isinstance(optimizer, SGD):
        config.sgd.SetInParent()
    else:
        raise InvalidArgument(
            f"{where}: {type(optimizer).__name__} has no server-side update "
            "rule; use SGD, Adagrad or Adam in a parameter-server job"
        )
    return config


def _initializer_config(startup: Program, param: str, seed_base: int) -> ps_pb2.InitializerConfig:
    """The table initializer equivalent to the startup op that initialises `param`."""
    for op in startup.global_block().ops:
        if param not in op.output_names:
            continue
        seed = int(op.attrs.get("seed", 0)) or (seed_base * 7919 + len(param))
        if op.type == "uniform_random":
            return ps_pb2.InitializerConfig(
                seed=seed,
                uniform=ps_pb2.UniformInit(
                    low=float(op.attrs.get("min", -1.0)), high=float(op.attrs.get("max", 1.0))
                ),
            )
        if op.type == "gaussian_random":
            return ps_pb2.InitializerConfig(
                seed=seed,
                gaussian=ps_pb2.GaussianInit(
                    mean=float(op.attrs.get("mean", 0.0)), std=float(op.attrs.get("std", 1.0))
                ),
            )
        if op.type == "fill_constant" and float(op.attrs.get("value", 0.0)) == 0.0:
            return ps_pb2.InitializerConfig(seed=seed, zero=ps_pb2.ZeroInit())
        raise InvalidArgument(
            f"sparse table '{param}': its initializer ({op.type} "
            f"{ {k: v for k, v in op.attrs.items() if k in ('value', 'min', 'max')} }) "
            "has no server-side equivalent; use Uniform, Normal or zero"
        )
    raise InvalidArgument(f"sparse table '{param}': no initializer in the startup program")


def _remove_ops_and_state(
    main: Program, startup: Program, update_ops: list[Any], keep: set[str]
) -> None:
    """Removes optimizer ops and the persistable state only they use (moments, beta powers),
    from main and from the startup program that initialises it."""
    block = main.global_block()
    state: set[str] = set()
    for op in update_ops:
        for name in op.input_names + op.output_names:
            var = block.vars.get(name)
            if var is not None and var.persistable and name not in keep:
                state.add(name)
    for op in update_ops:
        block.ops.remove(op)
    still_used = {n for op in block.ops for n in op.input_names + op.output_names}
    for name in state - still_used:
        if not isinstance(block.vars.get(name), Parameter):
            block._remove_var(name)
            _remove_startup_init(startup, name)


def _remove_startup_init(startup: Program, name: str) -> None:
    sblock = startup.global_block()
    for op in [op for op in sblock.ops if op.output_names == [name]]:
        sblock.ops.remove(op)
    if name in sblock.vars:
        sblock.vars.pop(name)


def _fuse_by_table(
    block: Any, op_type: str, inputs: tuple[str, ...], outputs: tuple[str, ...], first: bool
) -> None:
    """Joins the ops of `op_type` that read one table into one op (a step then makes one request
    per table, not one per slot). Pulls go where the first was (every Ids is fed before the
    program runs), pushes where the last was (after every gradient they read exists)."""
    groups: dict[int, list[Any]] = {}
    for op in block.ops:
        if op.type == op_type:
            groups.setdefault(int(op.attrs["table_id"]), []).append(op)
    for ops in groups.values():
        if len(ops) < 2:
            continue
        keep = ops[0] if first else ops[-1]
        for slot in inputs:
            keep.inputs[slot] = [n for op in ops for n in op.input(slot)]
        for slot in outputs:
            keep.outputs[slot] = [n for op in ops for n in op.output(slot)]
        for op in ops:
            if op is not keep:
                block.ops.remove(op)


def rewrite(
    fleet: Any,
    main: Program,
    startup: Program,
    optimizer: Optimizer,
    params_grads: list,
    strategy: DistributedStrategy,
) -> PsPlan:
    """Rewrites `main` and `startup` in place for a PS worker and stores the plan on `fleet`."""
    mode = strategy.mode
    block = main.global_block()
    grad_of = {p.name: g.name for p, g in params_grads}
    rule = optimizer_config(optimizer, "distributed_optimizer")
    own = strategy.table_optimizers
    update_ops = {}
    for op in block.ops:
        if op.type in _UPDATE_OPS and op.attrs.get(OP_ROLE_ATTR) == OP_ROLE_OPTIMIZE:
            update_ops[op.input("Param")[0]] = op

    sparse_params: list[str] = []
    for op in block.ops:
        if op.type == "lookup_table" and (
            op.attrs.get("is_sparse") or op.attrs.get("is_distributed")
        ):
            name = op.input("W")[0]
            if name not in sparse_params:
                sparse_params.append(name)

    sparse_plans = []
    for index, name in enumerate(sparse_params):
        param = block.var(name)
        if getattr(param, "learning_rate", 1.0) != 1.0:
            raise InvalidArgument(
                f"sparse table '{name}': a per-parameter learning rate "
                "is not supported on the parameter servers"
            )
        if getattr(param, "regularizer", None) is not None:
            raise InvalidArgument(
                f"sparse table '{name}': regularization of a sparse table "
                "is not supported on the parameter servers"
            )
        dim = int(param.shape[1])
        config = ps_pb2.TableConfig(
            table_id=index + 1,
            name=name,
            type=ps_pb2.SPARSE,
            dim=dim,
            initializer=_initializer_config(startup, name, main.random_seed or 1),
        )
        if name in own:
            config.optimizer.CopyFrom(optimizer_config(own[name], f"sparse table '{name}'"))
        else:
            config.optimizer.CopyFrom(rule)
        config.count_filter.min_count = strategy.sparse_table_configs["count_filter"]
        sparse_plans.append(SparseTablePlan(index + 1, name, dim, config))
    table_of = {p.param: p for p in sparse_plans}

    # Lookups and their gradients become pulls and pushes.
    for i, op in enumerate(list(block.ops)):
        if op.type == "lookup_table" and op.input("W")[0] in table_of:
            plan = table_of[op.input("W")[0]]
            index = block.ops.index(op)
            block.ops.remove(op)
            block._insert_op(
                index,
                "pull_sparse",
                inputs={"Ids": op.input("Ids")},
                outputs={"Out": op.output("Out")},
                attrs={
                    "table_id": plan.table_id,
                    "dim": plan.dim,
                    "padding_idx": int(op.attrs.get("padding_idx", -1)),
                    "is_test": False,
                    OP_ROLE_ATTR: op.attrs[OP_ROLE_ATTR],
                },
                infer_shape=False,
            )
        elif op.type == "lookup_table_grad" and op.input("W")[0] in table_of:
            plan = table_of[op.input("W")[0]]
            index = block.ops.index(op)
            block.ops.remove(op)
            block._insert_op(
                index,
                "push_sparse",
                inputs={"Ids": op.input("Ids"), "Grad": op.input("Out@GRAD")},
                attrs={
                    "table_id": plan.table_id,
                    "dim": plan.dim,
                    "padding_idx": int(op.attrs.get("padding_idx", -1)),
                    OP_ROLE_ATTR: op.attrs[OP_ROLE_ATTR],
                },
                infer_shape=False,
            )
    _fuse_by_table(block, "pull_sparse", ("Ids",), ("Out",), first=True)
    _fuse_by_table(block, "push_sparse", ("Ids", "Grad"), (), first=False)
    sparse_updates = [update_ops[n] for n in sparse_params if n in update_ops]
    _remove_ops_and_state(main, startup, sparse_updates, keep=set())
    for name in sparse_params:
        grad = grad_of.get(name)
        if grad:
            # A table shared by several lookups had its partial gradients summed into one:
            # the pushes replace that sum and the partials.
            for op in [op for op in block.ops if grad in op.output_names]:
                block.ops.remove(op)
            used = {n for op in block.ops for n in op.input_names + op.output_names}
            for var in [v for v in block.vars if v.startswith(grad) and v not in used]:
                block._remove_var(var)
        block._remove_var(name)
        _remove_startup_init(startup, name)

    # Dense parameters: packed in one table, with one rule (GEO's workers apply their own).
    shared_rule = [p.name for p, _ in params_grads if p.name in own and p.name not in table_of]
    if shared_rule and mode is not PsMode.GEO:
        raise InvalidArgument(
            f"DistributedStrategy.table_optimizers: {shared_rule} are dense parameters, which "
            "share one table and one update rule on the servers; only sparse tables "
            f"({', '.join(sparse_params) or 'none in this program'}) can have their own"
        )
    dense_plans, offset = [], 0
    for param, _ in params_grads:
        if param.name in table_of or param.name not in update_ops:
            continue
        numel = 1
        for d in param.shape:
            numel *= int(d)
        # The gradient the update op reads (after regularization, when there is one).
        grad = update_ops[param.name].input("Grad")[0]
        dense_plans.append(DensePlan(param.name, grad, offset, numel))
        offset += numel
    dense_config = None
    if dense_plans:
        dense_config = ps_pb2.TableConfig(
            table_id=DENSE_TABLE_ID,
            name="dense",
            type=ps_pb2.DENSE,
            dim=offset,
            initializer=ps_pb2.InitializerConfig(zero={}),
        )
        dense_config.optimizer.CopyFrom(rule)
        if mode is not PsMode.GEO:
            dense_updates = [update_ops[p.param] for p in dense_plans]
            _remove_ops_and_state(main, startup, dense_updates, keep={p.param for p in dense_plans})
            with main.op_role_guard(OP_ROLE_OPTIMIZE):
                block.append_op(
                    "send",
                    inputs={"X": [p.grad for p in dense_plans]},
                    attrs={"table_id": DENSE_TABLE_ID},
                    infer_shape=False,
                )
    plan = PsPlan(mode, strategy, sparse_plans, dense_plans, dense_config)
    fleet._ps_plan = plan
    return plan


__all__ = [
    "DENSE_TABLE_ID",
    "DensePlan",
    "PsPlan",
    "SparseTablePlan",
    "optimizer_config",
    "rewrite",
]
