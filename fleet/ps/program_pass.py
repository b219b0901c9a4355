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
  becomes each table's update rule; anything the servers cannot apply (Momentum, a learning rate
  computed by ops other than a fluid schedule, a per-parameter learning rate on a sparse table,
  or on a dense parameter outside GEO mode) is refused naming the parameter. A sparse table's
  L2Decay / L1Decay goes into its rule.
* A learning rate from a fluid schedule (layers.exponential_decay, ...: an ``lr_decay`` op) goes
  to the servers with the rule, and each table on each server steps it once per push it
  applies: in sync mode once per step of the job (the servers apply the workers' summed
  gradients once), otherwise once per worker's push, so that decay_steps count the steps of all
  workers together, as Paddle's servers count their trainers' steps (a sparse table's share on
  a server steps only on pushes with keys there; the async communicator's merged pushes count
  once). A table's step count restarts with its server (it is not in checkpoints). In GEO mode
  the workers apply the optimizer themselves and the servers only add their deltas (no step):
  dense update ops stay in the program and read its own lr variable, and the GEO communicator
  steps each sparse table's local rule once per training step of the worker, so that step k
  updates rows at the schedule's rate of step k, as the program's lr variable has it.

Internal: fleet.distributed_optimizer(optimizer, strategy).minimize(loss) runs it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fleet.distributed_strategy import DistributedStrategy, PsMode
from fleet.errors import InvalidArgument
from fleet.framework import (
    LOD_TENSOR,
    OP_ROLE_ATTR,
    OP_ROLE_OPTIMIZE,
    SELECTED_ROWS,
    Parameter,
    Program,
    Variable,
)
from fleet.optimizer import SGD, Adagrad, Adam, Optimizer
from fleet.proto import ps_pb2

DENSE_TABLE_ID = 0
_UPDATE_OPS = ("sgd", "adagrad", "adam", "momentum")


@dataclasses.dataclass
class SparseTablePlan:
    """One sparse table. `id_vars`: the variables holding the ids a step pulls from it (the
    inputs of its pull_sparse op, in order), which the async communicator prefetches."""

    table_id: int
    param: str
    dim: int
    config: ps_pb2.TableConfig
    id_vars: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class DensePlan:
    param: str
    grad: str
    offset: int
    numel: int
    # The parameter's own learning rate, as a multiple of the optimizer's
    # (ParamAttr(learning_rate)): the servers apply it (TableConfig.rate_scales), GEO workers
    # with their own update ops.
    rate: float = 1.0


@dataclasses.dataclass
class PsPlan:
    """What the PS pass decided, all that init_server / init_worker need: the mode, the tables
    (with the variables each one's pulls read) and the dense packing."""

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


def _schedule_config(lr: Variable, where: str) -> ps_pb2.LrScheduleConfig:
    """The schedule of the lr_decay op that computes `lr`; InvalidArgument when other ops do."""
    writers = [op for op in lr.block.ops if lr.name in op.output_names]
    if [op.type for op in writers] != ["lr_decay"]:
        raise InvalidArgument(
            f"{where}: the parameter servers take a constant learning rate or one of fluid's "
            f"schedules (layers.exponential_decay, ...), but variable '{lr.name}' is computed "
            f"by {[op.type for op in writers] or 'no op'}"
        )
    attrs = dict(writers[0].attrs)
    name = attrs["schedule"]
    config = ps_pb2.LrScheduleConfig(name=name, begin=1 if name == "noam_decay" else 0)
    for field in ps_pb2.LrScheduleConfig.DESCRIPTOR.fields:
        if field.name in attrs and field.name not in ("name", "begin"):
            value = attrs[field.name]
            if isinstance(value, list):
                getattr(config, field.name).extend(float(v) for v in value)
            else:
                setattr(config, field.name, type(getattr(config, field.name))(value))
    return config


def optimizer_config(optimizer: Optimizer, where: str) -> ps_pb2.OptimizerConfig:
    """The servers' update rule for `optimizer`; InvalidArgument for what they cannot apply."""
    lr = optimizer.learning_rate
    if isinstance(lr, Variable):
        schedule = _schedule_config(lr, where)
        # The rate before the first push; each push sets the schedule's rate first.
        first = schedule.learning_rate or (schedule.values[0] if schedule.values else 1.0)
        config = ps_pb2.OptimizerConfig(learning_rate=first if first > 0 else 1.0)
        config.schedule.CopyFrom(schedule)
    elif not isinstance(lr, (int, float)) or isinstance(lr, bool):
        raise InvalidArgument(f"{where}: learning_rate {lr!r} is not a number or a variable")
    else:
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
        if op.type == "truncated_gaussian_random":
            return ps_pb2.InitializerConfig(
                seed=seed,
                truncated_gaussian=ps_pb2.TruncatedGaussianInit(
                    mean=float(op.attrs.get("mean", 0.0)), std=float(op.attrs.get("std", 1.0))
                ),
            )
        if op.type == "fill_constant":
            value = float(op.attrs.get("value", 0.0))
            if value == 0.0:
                return ps_pb2.InitializerConfig(seed=seed, zero=ps_pb2.ZeroInit())
            return ps_pb2.InitializerConfig(seed=seed, constant=ps_pb2.ConstantInit(value=value))
        raise InvalidArgument(
            f"sparse table '{param}': its initializer ({op.type} "
            f"{ {k: v for k, v in op.attrs.items() if k in ('value', 'min', 'max')} }) "
            "has no server-side equivalent; use Uniform, Normal, TruncatedNormal, Xavier, "
            "MSRA or Constant"
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
    main: Program,
    startup: Program,
    optimizer: Optimizer,
    params_grads: list,
    strategy: DistributedStrategy,
) -> PsPlan:
    """Rewrites `main` and `startup` in place for a PS worker; returns the plan of the tables
    (the facade builds the PS runtime from it)."""
    if strategy.gradient_merge:
        raise InvalidArgument(
            "DistributedStrategy.gradient_merge is a collective strategy: in a parameter-server "
            "job the servers apply every push. To merge gradients before they are pushed, use "
            "a_sync_configs['max_merge_var_num'] (async) or GEO mode (a_sync_configs['k_steps'])"
        )
    block = main.global_block()
    rule = optimizer_config(optimizer, "distributed_optimizer")
    update_ops = _update_ops(block)
    sparse = _sparse_tables(main, startup, strategy, rule)
    _sparse_decay_to_rules(block, sparse)
    _lookups_to_pulls_and_pushes(block, {t.param: t for t in sparse})
    _remove_sparse_parameters(main, startup, sparse, update_ops, params_grads)
    for table in sparse:
        table.id_vars = _pulled_ids(block, table.table_id)
    dense = _dense_parameters(params_grads, update_ops, strategy, sparse)
    dense_config = None
    if dense:
        dense_config = _dense_table_config(dense, rule, strategy)
        if strategy.mode is not PsMode.GEO:
            _send_dense_gradients(main, startup, dense, update_ops)
    return PsPlan(strategy.mode, strategy, sparse, dense, dense_config)


def _update_ops(block: Any) -> dict[str, Any]:
    """The optimizer's update ops, by the parameter they update."""
    return {
        op.input("Param")[0]: op
        for op in block.ops
        if op.type in _UPDATE_OPS and op.attrs.get(OP_ROLE_ATTR) == OP_ROLE_OPTIMIZE
    }


def _sparse_tables(
    main: Program, startup: Program, strategy: DistributedStrategy, rule: ps_pb2.OptimizerConfig
) -> list[SparseTablePlan]:
    """A table per parameter of an is_sparse / is_distributed embedding (ids from 1, in program
    order), with its initializer and update rule; refuses what the servers cannot apply."""
    block = main.global_block()
    names: list[str] = []
    for op in block.ops:
        if op.type == "lookup_table" and (
            op.attrs.get("is_sparse") or op.attrs.get("is_distributed")
        ):
            name = op.input("W")[0]
            if name not in names:
                names.append(name)
    own = strategy.table_optimizers
    tables = []
    for table_id, name in enumerate(names, start=1):
        param = block.var(name)
        rate = getattr(param, "learning_rate", 1.0)
        if rate != 1.0:
            raise InvalidArgument(
                f"sparse table '{name}': a per-parameter learning rate "
                f"(ParamAttr(learning_rate={rate!r})) is not supported on the parameter servers"
            )
        dim = int(param.shape[1])
        config = ps_pb2.TableConfig(
            table_id=table_id,
            name=name,
            type=ps_pb2.SPARSE,
            dim=dim,
            initializer=_initializer_config(startup, name, main.random_seed or 1),
        )
        if name in own:
            config.optimizer.CopyFrom(optimizer_config(own[name], f"sparse table '{name}'"))
        else:
            config.optimizer.CopyFrom(rule)
        settings = strategy.sparse_table_configs
        config.count_filter.min_count = settings["count_filter"]
        if settings["storage"] == "ssd":
            if not settings["memory_budget_mb"] or not settings["ssd_path"]:
                raise InvalidArgument(
                    f"sparse table '{name}': sparse_table_configs storage 'ssd' needs "
                    "memory_budget_mb and ssd_path"
                )
            config.storage = "ssd"
            config.memory_budget_mb = settings["memory_budget_mb"]
            config.ssd_path = settings["ssd_path"]
        tables.append(SparseTablePlan(table_id, name, dim, config))
    return tables


def _sparse_decay_to_rules(block: Any, tables: list[SparseTablePlan]) -> None:
    """A sparse table's weight decay (the sparse_weight_decay op fleet/regularizer.py appends
    for an is_sparse embedding) moves into its update rule: the servers (GEO: the workers'
    local rule) add the penalty's gradient to each row a push updates, so a row is decayed once
    per push that carries it (sync: once per step of the job, as one process decays the rows of
    its batch)."""
    table_of = {t.param: t for t in tables}
    for op in [op for op in block.ops if op.type == "sparse_weight_decay"]:
        table = table_of.get(op.input("Param")[0])
        if table is None:
            continue
        rule = table.config.optimizer
        setattr(rule, f"{op.attrs['kind']}_decay", float(op.attrs["coeff"]))
        block.ops.remove(op)


def _lookups_to_pulls_and_pushes(block: Any, table_of: dict[str, SparseTablePlan]) -> None:
    """Each lookup of a table becomes a pull_sparse, its gradient op a push_sparse; then the
    pulls (and the pushes) of one table are fused into one op."""
    for op in list(block.ops):
        if op.type not in ("lookup_table", "lookup_table_grad"):
            continue
        table = table_of.get(op.input("W")[0])
        if table is None:
            continue
        table_attrs = {
            "table_id": table.table_id,
            "dim": table.dim,
            "padding_idx": int(op.attrs.get("padding_idx", -1)),
        }
        role = {OP_ROLE_ATTR: op.attrs[OP_ROLE_ATTR]}
        index = block.ops.index(op)
        block.ops.remove(op)
        if op.type == "lookup_table":
            block._insert_op(
                index,
                "pull_sparse",
                inputs={"Ids": op.input("Ids")},
                outputs={"Out": op.output("Out")},
                attrs={**table_attrs, "is_test": False, **role},
                infer_shape=False,
            )
        else:
            block._insert_op(
                index,
                "push_sparse",
                inputs={"Ids": op.input("Ids"), "Grad": op.input("Out@GRAD")},
                attrs={**table_attrs, **role},
                infer_shape=False,
            )
    _fuse_by_table(block, "pull_sparse", ("Ids",), ("Out",), first=True)
    _fuse_by_table(block, "push_sparse", ("Ids", "Grad"), (), first=False)


def _remove_sparse_parameters(
    main: Program,
    startup: Program,
    tables: list[SparseTablePlan],
    update_ops: dict[str, Any],
    params_grads: list,
) -> None:
    """Takes the tables' parameters, their optimizer ops and state and their summed gradients out
    of both programs: nothing of size vocab x dim stays on a worker."""
    block = main.global_block()
    names = [t.param for t in tables]
    sparse_updates = [update_ops[n] for n in names if n in update_ops]
    _remove_ops_and_state(main, startup, sparse_updates, keep=set())
    grad_of = {p.name: g.name for p, g in params_grads}
    for name in names:
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


def _pulled_ids(block: Any, table_id: int) -> list[str]:
    """The id variables the pull_sparse ops of `table_id` read, in order."""
    return [
        name
        for op in block.ops
        if op.type == "pull_sparse" and int(op.attrs["table_id"]) == table_id
        for name in op.input("Ids")
    ]


def _dense_parameters(
    params_grads: list,
    update_ops: dict[str, Any],
    strategy: DistributedStrategy,
    sparse: list[SparseTablePlan],
) -> list[DensePlan]:
    """Every other trained parameter, packed in program order into the one dense table; refuses
    an own update rule for one (they share the table's rule; GEO's workers apply their own)."""
    sparse_names = [t.param for t in sparse]
    own = strategy.table_optimizers
    shared_rule = [p.name for p, _ in params_grads if p.name in own and p.name not in sparse_names]
    if shared_rule and strategy.mode is not PsMode.GEO:
        raise InvalidArgument(
            f"DistributedStrategy.table_optimizers: {shared_rule} are dense parameters, which "
            "share one table and one update rule on the servers; only sparse tables "
            f"({', '.join(sparse_names) or 'none in this program'}) can have their own"
        )
    dense, offset = [], 0
    for param, _ in params_grads:
        if param.name in sparse_names or param.name not in update_ops:
            continue
        numel = 1
        for d in param.shape:
            numel *= int(d)
        # The gradient the update op reads (after regularization, when there is one).
        grad = update_ops[param.name].input("Grad")[0]
        dense.append(DensePlan(param.name, grad, offset, numel, _own_rate(param)))
        offset += numel
    return dense


def _own_rate(param: Parameter) -> float:
    """A dense parameter's own learning rate (ParamAttr(learning_rate=k)), which one process
    applies as k times the optimizer's rate (0 freezes it); InvalidArgument naming the
    parameter for a k that is not a finite number >= 0."""
    rate = getattr(param, "learning_rate", 1.0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < math.inf:
        raise InvalidArgument(
            f"dense parameter '{param.name}': ParamAttr(learning_rate={rate!r}) must be a "
            "finite number >= 0 (a multiple of the optimizer's rate)"
        )
    return float(rate)


def _dense_table_config(
    dense: list[DensePlan], rule: ps_pb2.OptimizerConfig, strategy: DistributedStrategy
) -> Any:
    dim = sum(d.numel for d in dense)
    config = ps_pb2.TableConfig(
        table_id=DENSE_TABLE_ID,
        name="dense",
        type=ps_pb2.DENSE,
        dim=dim,
        initializer=ps_pb2.InitializerConfig(zero={}),
        # 1.x program config: min_block_size, slice_var_up (fleet/ps_strategy_configs.py).
        dense_block_size=strategy.get_program_config().dense_block_size(dim),
    )
    config.optimizer.CopyFrom(rule)
    if strategy.mode is not PsMode.GEO:  # GEO workers apply the rates and push deltas
        for d in dense:
            if d.rate != 1.0:
                config.rate_scales.add(offset=d.offset, size=d.numel, scale=d.rate)
    return config


def _densify_gradients(block: Any, params: list[str]) -> None:
    """The send op takes dense tensors: a grad op that would write rows of a dense parameter's
    gradient (nce with is_sparse, as word2vec has it) writes the whole gradient instead."""
    prefixes = tuple(f"{p}@GRAD" for p in params)
    for op in block.ops:
        outputs = [n for n in op.output_names if n.startswith(prefixes)]
        if not outputs or not op.attrs.get("is_sparse"):
            continue
        op.attrs["is_sparse"] = False
        for name in outputs:
            if block.has_var(name) and block.var(name).kind == SELECTED_ROWS:
                block.var(name).kind = LOD_TENSOR
    block.program._bump()


def _send_dense_gradients(
    main: Program, startup: Program, dense: list[DensePlan], update_ops: dict[str, Any]
) -> None:
    """The dense optimizer ops and their state leave the worker (the servers apply the rule);
    one send op hands every dense gradient to the communicator, right after the last op that
    writes one of them.

    Why there and not at the end of the program: in async mode the send starts the dense push
    whose reply the next step waits for (max_dense_staleness 0), so every op after it runs while
    the push is on its way. In CTR-DNN the backward of the embeddings (concat_grad, a
    sequence_pool_grad per slot) and the sparse pushes follow the last dense gradient. The send
    copies the gradients, and no later op writes them, so it hands over the same values. It
    takes the role of the op before it: a send inside the backward ops is one of them (the
    data-parallel compiler finds the first update op by its role, and moves the send itself)."""
    _remove_ops_and_state(
        main, startup, [update_ops[d.param] for d in dense], keep={d.param for d in dense}
    )
    block = main.global_block()
    _densify_gradients(block, [d.param for d in dense])
    grads = {d.grad for d in dense}
    writers = [i for i, op in enumerate(block.ops) if grads.intersection(op.output_names)]
    at = writers[-1] + 1 if writers else len(block.ops)
    role = block.ops[at - 1].attrs.get(OP_ROLE_ATTR, OP_ROLE_OPTIMIZE) if at else OP_ROLE_OPTIMIZE
    block._insert_op(
        at,
        "send",
        inputs={"X": [d.grad for d in dense]},
        attrs={"table_id": DENSE_TABLE_ID, OP_ROLE_ATTR: role},
        infer_shape=False,
    )


__all__ = [
    "DENSE_TABLE_ID",
    "DensePlan",
    "PsPlan",
    "SparseTablePlan",
    "optimizer_config",
    "rewrite",
]
