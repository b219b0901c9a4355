"""CompiledProgram, BuildStrategy and ExecutionStrategy: one-process data parallelism, as fluid's
`CompiledProgram(main).with_data_parallel(loss_name=...)` on CPU.

A compiled program runs on N replicas, threads of this process (`CPU_NUM`, default the
machine's cores, or `places=`). Every replica runs the forward and backward ops on its share of
the fed batch in a scope of its own; the gradients are reduced in memory in C++
(`csrc/trainer/data_parallel.h`), and each parameter's update ops run once, on the replica that
owns the parameter, on the one copy of the parameters all replicas share. With SGD this gives
the parameters of one process on the whole batch.

This module only plans: `plan_data_parallel` splits a program into the compute part and the
update phases and says which replica owns what. `fleet.executor` runs the plan.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import warnings
from typing import Any, Sequence

from fleet.backward import GRAD_SUFFIX
from fleet.errors import InvalidArgument, Unavailable
from fleet.framework import OP_ROLE_ATTR, OP_ROLE_OPTIMIZE, SELECTED_ROWS, Operator, Program
from fleet.proto import framework_pb2 as pb

# Ops that hand dense gradients to the parameter servers: they read the reduced gradients, once
# a step, so they move from the compute part (where a PS pass may have put them) to the update.
_ONCE_PER_STEP_OPS = frozenset({"send", "push_dense"})
# Ops that push a replica's own sparse gradients (rows of its share's ids): they stay in every
# replica, so their gradients must already carry the 1/replicas factor (see _scale_loss_grad).
_PER_REPLICA_PUSH_OPS = frozenset({"push_sparse"})
# Ops whose peers are other processes: N replicas calling them would not match the other ranks.
_COLLECTIVE_OP_PREFIX = "c_"
# Updates that, given a sparse gradient, change only the rows it holds, each from its own
# gradient row (adam only with lazy_mode): split by rows, every replica runs them on its share.
_ROW_LOCAL_UPDATES = frozenset({"sgd", "adagrad", "adam"})
# Adam's outputs that advance state shared by every row: done once, after every share's update.
_ADAM_POWERS = (("Beta1Pow", "Beta1PowOut", "beta1"), ("Beta2Pow", "Beta2PowOut", "beta2"))
# The variable holding a replica's share of the rows of a gradient split by rows.
_ROWS_SUFFIX = "@ROWS"
# Dense gradients are split by rows when the largest replica's share of the whole gradients is
# over this times the mean (the engine's kOwnerBalance, csrc/trainer/gradient_reduce.cc).
_OWNER_BALANCE = 1.1


class _NoticeFields:
    """Accepts fluid's fields; setting one Fleet does not act on gives a notice (a Python
    warning, shown once per call site by the default filters)."""

    _ACTED_ON: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and not hasattr(type(self), name):
            raise AttributeError(f"{type(self).__name__} has no field '{name}'")
        if name not in self._ACTED_ON and not name.startswith("_"):
            warnings.warn(
                f"{type(self).__name__}.{name} is accepted for compatibility and has no effect "
                "in Fleet (CPU replicas share one copy of the parameters in memory)",
                stacklevel=2,
            )
        object.__setattr__(self, name, value)


class BuildStrategy(_NoticeFields):
    """How a data-parallel program is built. Fleet acts on `reduce_strategy` and
    `gradient_scale_strategy`; the other fluid fields are accepted with a notice.
    `overlap_reduction` is Fleet's own (no fluid field): True reduces each gradient during the
    backward pass, once every replica is past it (when the replicas own equal shares of the
    gradients); False reduces them all after it. Both give the same parameters, bit for bit.
    `split_sparse_updates`, also Fleet's own: True splits the reduction and update of an
    `is_sparse` parameter whose update touches only the rows of its gradient (SGD, Adagrad,
    lazy Adam) by rows over every replica; False gives each such parameter to one replica.
    Both give the same parameters, bit for bit. `split_dense_updates`, also Fleet's own: when
    the replicas' shares of the dense gradients, each given whole to one replica, are
    unbalanced, True splits as few large dense ones as balance them by rows (a block of rows a
    replica, reduced and updated there), so that each replica reduces its own gradients during
    the backward pass; False keeps them whole. Both give the same parameters, bit for bit.
    `even_barrier_work`, also Fleet's own: with the reduction overlapped, True lets a replica
    with less work after the barrier that ends the backward pass (where the owner of the first
    layer's gradients reduces them) keep its last reductions until after it, so that the work on
    both sides of the barrier is even; False reduces each gradient as soon as every replica is
    past it. Both give the same parameters, bit for bit. `share_barrier_work`, also Fleet's
    own: with the reduction overlapped, True lets a replica that has finished its own work after
    that barrier (its last reductions and its parameters' updates, cut into tasks of a gradient
    each) take the tasks another replica has not started, instead of waiting for it at the end
    of the step; False leaves each replica its own. Both give the same parameters, bit for bit.
    `early_barrier_work`, also Fleet's own: with that work shared, True lets a replica that has
    finished its backward pass before another run its own tasks of it while it waits at the
    barrier, each as soon as every replica is past the last op that touches the task's gradient,
    parameter or moments; False keeps every task until after the barrier. Both give the same
    parameters, bit for bit.
    `split_weight_gradients`, also Fleet's
    own: True leaves the weight gradient of a `mul` (an fc layer's) out of the backward pass
    when an update of rows could take it by rows (its parameter is rank 2 and one SGD, Adagrad
    or Adam op reads it); each replica then computes its block of rows over the whole batch from
    every replica's input and output gradient, so no per-replica gradients are summed and each
    is zeroed once, not once a replica, but each replica packs every replica's output gradient
    for its GEMMs. It saves CPU when a step's whole batch has fewer rows than the weight (the
    benchmark's MLP: 512 against 1024) and costs some when it has more (CTR-DNN: 1024 against
    273-400), so it is off by default. The parameters agree to rounding (the sums are grouped
    differently)."""

    class ReduceStrategy(enum.IntEnum):
        AllReduce = 0  # every replica gets the reduced gradients
        Reduce = 1  # each gradient is reduced into the replica that owns its parameter's update

    class GradientScaleStrategy(enum.IntEnum):
        CoeffNumDevice = 0  # average over the replicas (the whole batch's mean loss)
        One = 1  # sum over the replicas
        Customized = 2

    _ACTED_ON = frozenset(
        {
            "reduce_strategy",
            "gradient_scale_strategy",
            "overlap_reduction",
            "split_sparse_updates",
            "split_dense_updates",
            "even_barrier_work",
            "share_barrier_work",
            "early_barrier_work",
            "split_weight_gradients",
        }
    )

    reduce_strategy = ReduceStrategy.AllReduce
    gradient_scale_strategy = GradientScaleStrategy.CoeffNumDevice
    overlap_reduction = True
    split_sparse_updates = True
    split_dense_updates = True
    even_barrier_work = True
    share_barrier_work = True
    early_barrier_work = True
    split_weight_gradients = False
    fuse_all_reduce_ops = False
    fuse_all_optimizer_ops = False
    fuse_elewise_add_act_ops = False
    fuse_bn_act_ops = False
    fuse_relu_depthwise_conv = False
    fuse_broadcast_ops = False
    enable_inplace = False
    memory_optimize = False
    enable_sequential_execution = False
    remove_unnecessary_lock = True
    sync_batch_norm = False
    cache_runtime_context = False
    enable_auto_fusion = False
    enable_backward_optimizer_op_deps = True
    debug_graphviz_path = ""
    num_trainers = 1
    trainer_id = 0
    trainers_endpoints: Sequence[str] = ()
    nccl_comm_num = 1
    use_hierarchical_allreduce = False
    hierarchical_allreduce_inter_nranks = 0
    mkldnn_enabled_op_types: Sequence[str] = ()
    async_mode = False
    is_distribution = False


class ExecutionStrategy(_NoticeFields):
    """How a data-parallel program runs. `num_threads` is accepted (each replica is one thread;
    the replica count comes from CPU_NUM or places=); the others with a notice."""

    _ACTED_ON = frozenset({"num_threads"})

    num_threads = 0
    num_iteration_per_drop_scope = 100
    num_iteration_per_run = 1
    use_experimental_executor = False
    use_thread_barrier = False
    allow_op_delay = False


def cpu_replicas(places: Any = None) -> int:
    """The number of CPU replicas: len(places) (or an int), else CPU_NUM, else the cores."""
    if places is not None:
        count = places if isinstance(places, int) else len(list(places))
        if count < 1:
            raise InvalidArgument(f"with_data_parallel: places= gives {count} replicas")
        return int(count)
    value = os.environ.get("CPU_NUM")
    if value is None or value == "":
        return os.cpu_count() or 1
    try:
        count = int(value)
    except ValueError:
        raise InvalidArgument(f"CPU_NUM must be a positive integer, got {value!r}") from None
    if count < 1:
        raise InvalidArgument(f"CPU_NUM must be a positive integer, got {value!r}")
    return count


class CompiledProgram:
    """A program plus how to run it. Without with_data_parallel it runs as the plain program."""

    def __init__(self, program_or_graph: Program, build_strategy: BuildStrategy | None = None):
        if not isinstance(program_or_graph, Program):
            raise InvalidArgument(
                f"CompiledProgram takes a fleet Program, got {type(program_or_graph).__name__}"
            )
        self.program = program_or_graph
        self._build_strategy = build_strategy or BuildStrategy()
        self._exec_strategy = ExecutionStrategy()
        self._data_parallel = False
        self._loss_name: str | None = None
        self._replicas = 1
        self._share_vars_from: CompiledProgram | None = None

    # fluid spells the wrapped program `_program`; Fleet's executor reads `program`.
    @property
    def _program(self) -> Program:
        return self.program

    def with_data_parallel(
        self,
        loss_name: str | None = None,
        build_strategy: BuildStrategy | None = None,
        exec_strategy: ExecutionStrategy | None = None,
        share_vars_from: "CompiledProgram | None" = None,
        places: Any = None,
    ) -> "CompiledProgram":
        """Runs the program on CPU replicas (CPU_NUM, default the cores, or `places`)."""
        if self._data_parallel:
            raise InvalidArgument("with_data_parallel was already called on this CompiledProgram")
        if places is not None and not isinstance(places, int):
            places = list(places)
            for place in places:
                if type(place).__name__ != "CPUPlace":
                    raise Unavailable(
                        f"with_data_parallel: place {place!r}: data parallelism runs on CPU "
                        "replicas in this version; use CPUPlace() places or CPU_NUM"
                    )
        if loss_name is not None and not self.program.global_block().has_var(loss_name):
            raise InvalidArgument(
                f"with_data_parallel: loss_name '{loss_name}' is not a variable of the program"
            )
        self._data_parallel = True
        self._loss_name = loss_name
        self._build_strategy = build_strategy or self._build_strategy
        self._exec_strategy = exec_strategy or self._exec_strategy
        self._share_vars_from = share_vars_from
        self._replicas = cpu_replicas(places)
        return self

    @property
    def is_data_parallel(self) -> bool:
        return self._data_parallel

    @property
    def replicas(self) -> int:
        return self._replicas if self._data_parallel else 1

    @property
    def build_strategy(self) -> BuildStrategy:
        return self._build_strategy

    def plan(self) -> "DataParallelPlan":
        """The data-parallel plan of the program as it is now (the program may change)."""
        return plan_data_parallel(
            self.program, self.replicas, self._build_strategy, self._loss_name
        )


@dataclasses.dataclass
class DataParallelPlan:
    """What each replica runs. `compute` holds the forward and backward ops; `phases[p][r]` the
    ops replica r runs in phase p (None: nothing), with a barrier between phases: the first
    `prelude_phases` before the compute part (ops that advance shared state once a step, such
    as a learning-rate schedule's counter), the others after the reduction (the updates);
    `gradients[i]` is reduced into replica `owners[i]` (-1: every replica, because ops on more
    than one replica read it), or, when it is a key of `row_parts`, split by rows: each replica
    gets its share of the rows in the variable `row_parts[name]`, and runs the update on it.
    A gradient of `products`, (X, Out@GRAD) of its mul, is split by rows and not computed by
    `compute`: each replica computes its rows from every replica's X and Out@GRAD."""

    replicas: int
    all_reduce: bool
    gradient_scale: float  # 0: 1 / replicas that ran the step
    compute: pb.ProgramDesc
    phases: list[list[pb.ProgramDesc | None]]
    gradients: list[str]
    owners: list[int]
    param_owner: dict[str, int]
    prelude_phases: int = 0
    overlap_reduction: bool = True  # BuildStrategy.overlap_reduction
    even_barrier_work: bool = True  # BuildStrategy.even_barrier_work
    share_barrier_work: bool = True  # BuildStrategy.share_barrier_work
    early_barrier_work: bool = True  # BuildStrategy.early_barrier_work
    row_parts: dict[str, str] = dataclasses.field(default_factory=dict)
    products: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)


def plan_data_parallel(
    program: Program, replicas: int, strategy: BuildStrategy, loss_name: str | None = None
) -> DataParallelPlan:
    """Splits `program` for `replicas` CPU replicas. Gradients are averaged over the replicas
    that ran a step by the reduction; a parameter-server worker's program, whose sparse pushes
    leave every replica unreduced, gets Paddle's CoeffNumDevice instead: the loss gradient each
    replica starts its backward pass from is 1/replicas, and the reduction sums."""
    block = program.global_block()
    ops = list(block.ops)
    for op in ops:
        if op.type.startswith(_COLLECTIVE_OP_PREFIX):
            raise Unavailable(
                f"with_data_parallel: the program has collective op '{op.type}'; a collective "
                "program already runs one replica per process (use fleetrun), it cannot also "
                "be split across replicas in the process"
            )
    first_update = next(
        (i for i, op in enumerate(ops) if op.attrs.get(OP_ROLE_ATTR) == OP_ROLE_OPTIMIZE),
        len(ops),
    )
    persistable = {v.name for v in block.vars.values() if v.persistable}
    prelude, compute = _split_prelude(
        [op for op in ops[:first_update] if op.type not in _ONCE_PER_STEP_OPS], persistable
    )
    update = [op for op in ops[:first_update] if op.type in _ONCE_PER_STEP_OPS]
    update += ops[first_update:]
    # Only gradients are reduced, as Paddle all-reduces only the parameters' gradients. Any
    # other value the compute part gives the updates (a learning rate a schedule computes from
    # the shared step counter) every replica computes alike, and each one's updates read its own:
    # reduced, it would be summed (GradientScaleStrategy.One) and read by several replicas.
    written = {n for op in compute for n in op.output_names}
    gradients: list[str] = []
    for op in update:
        for name in op.input_names:
            if (
                name in written
                and name.endswith(GRAD_SUFFIX)
                and name not in persistable
                and name not in gradients
            ):
                gradients.append(name)
    sparse = _sparse_parameters(compute)
    param_owner = _assign_parameters(update, block, replicas, sparse)
    op_owner = _op_owners(update, param_owner, persistable)
    owners = []
    for name in gradients:
        readers = {op_owner[i] for i, op in enumerate(update) if name in op.input_names}
        readers = {0 if r is None else r for r in readers}
        owners.append(readers.pop() if len(readers) == 1 else -1)
    row_parts: dict[str, str] = {}
    if strategy.split_sparse_updates and replicas > 1:
        row_parts = _row_split_gradients(compute, update, gradients, sparse)
    products: dict[str, tuple[str, str]] = {}
    if strategy.split_weight_gradients and replicas > 1:
        products, compute = _weight_products(compute, update, gradients, block, replicas, sparse)
    dense_split = set(products)
    if strategy.split_dense_updates and replicas > 1:
        dense_split |= _dense_row_split_gradients(
            update, gradients, owners, block, replicas, sparse, set(products)
        )
    row_parts.update({name: name + _ROWS_SUFFIX for name in dense_split})
    if row_parts:
        update, op_owner = _split_by_rows(update, op_owner, row_parts, replicas, dense_split)
    parts = [_rows_var(block, grad, part) for grad, part in row_parts.items()]
    phases = _phases(program, update, op_owner, replicas, parts)
    if prelude:
        phases.insert(0, [_desc_with_ops(program, prelude)] + [None] * (replicas - 1))
    average = strategy.gradient_scale_strategy == BuildStrategy.GradientScaleStrategy.CoeffNumDevice
    compute_desc = _desc_with_ops(program, compute)
    gradient_scale = 0.0 if average else 1.0
    if average and any(op.type in _PER_REPLICA_PUSH_OPS for op in compute):
        _scale_loss_grad(compute_desc, loss_name, 1.0 / replicas)
        gradient_scale = 1.0
    return DataParallelPlan(
        replicas=replicas,
        all_reduce=strategy.reduce_strategy == BuildStrategy.ReduceStrategy.AllReduce,
        gradient_scale=gradient_scale,
        compute=compute_desc,
        phases=phases,
        gradients=gradients,
        owners=owners,
        param_owner=param_owner,
        prelude_phases=1 if prelude else 0,
        overlap_reduction=bool(strategy.overlap_reduction),
        even_barrier_work=bool(strategy.even_barrier_work),
        share_barrier_work=bool(strategy.share_barrier_work),
        early_barrier_work=bool(strategy.early_barrier_work),
        row_parts=row_parts,
        products=products,
    )


def _split_prelude(ops: list[Any], persistable: set[str]) -> tuple[list[Any], list[Any]]:
    """(prelude, compute): an op of the forward part that only reads and writes persistable
    variables, none of which an earlier kept op writes (fluid's learning-rate schedules: the
    `increment` of the step counter), runs once a step before the replicas; run by every
    replica it would advance the shared state once a replica."""
    prelude, compute, written = [], [], set()
    for op in ops:
        inputs, outputs = set(op.input_names), set(op.output_names)
        shared = outputs and inputs <= persistable and outputs <= persistable
        if shared and not (inputs | outputs) & written:
            prelude.append(op)
        else:
            compute.append(op)
            written |= outputs
    return prelude, compute


def _scale_loss_grad(desc: pb.ProgramDesc, loss_name: str | None, scale: float) -> None:
    """Sets the value of the fill_constant op that starts the backward pass at `loss_name`."""
    if loss_name is None:
        raise InvalidArgument(
            "with_data_parallel: this program pushes sparse gradients to parameter servers from "
            "every replica, which needs the loss's gradient scaled: pass loss_name="
        )
    target = f"{loss_name}@GRAD"
    for op in desc.blocks[0].ops:
        outputs = [a for v in op.outputs for a in v.arguments]
        if op.type == "fill_constant" and outputs == [target]:
            for attr in op.attrs:
                if attr.name == "value":
                    attr.f = attr.f * scale
                    return
    raise InvalidArgument(
        f"with_data_parallel: no fill_constant op starts the backward pass at loss '{loss_name}' "
        f"(no op writes '{target}'); is loss_name the loss that minimize() was called with?"
    )


def _sparse_parameters(compute: list[Any]) -> set[str]:
    """Parameters whose gradient an `is_sparse` op writes (rows, not the whole table), also
    through a renamed part of it (`emb@GRAD@RENAME@3`, summed into `emb@GRAD`)."""
    sparse = set()
    for op in compute:
        if op.attrs.get("is_sparse"):
            sparse |= {n[: n.index(GRAD_SUFFIX)] for n in op.output_names if GRAD_SUFFIX in n}
    return sparse


def _assign_parameters(
    update: list[Any], block: Any, replicas: int, sparse: set[str]
) -> dict[str, int]:
    """Each updated parameter to a replica: largest first onto the least loaded replica, so
    the replicas' update work is balanced (the role of Paddle's Reduce placement). Dense and
    sparse parameters are balanced apart: a sparse update costs the rows a step touches, not
    the table's size, so a large embedding counted whole would leave its owner no dense
    parameter, and the dense reduction and updates unbalanced (the engine then cuts
    gradients into ranges instead of letting each owner reduce and update its own)."""
    params = []
    for op in update:
        for name in op.inputs.get("Param", []):
            if name not in params:
                params.append(name)

    def size(name: str) -> int:
        n = 1
        for d in block.var(name).shape if block.has_var(name) else ():
            n *= max(int(d), 1)
        return n

    owner: dict[str, int] = {}
    for group in ([p for p in params if p not in sparse], [p for p in params if p in sparse]):
        load = [0] * replicas
        for name in sorted(group, key=lambda n: (-size(n), params.index(n))):
            r = min(range(replicas), key=lambda i: (load[i], i))
            owner[name] = r
            load[r] += size(name)
    return owner


def _op_owners(
    update: list[Any], param_owner: dict[str, int], persistable: set[str]
) -> list[int | None]:
    """The replica that runs each update op: its parameter's owner; an op without a Param
    (regularisation, a scaled learning rate) takes the owner of the ops that read its outputs,
    when there is exactly one and its outputs are not persistable; else None (run alone by
    replica 0 between barriers, e.g. a learning-rate schedule every update reads)."""
    owners: list[int | None] = [None] * len(update)
    for i in reversed(range(len(update))):
        op = update[i]
        params = op.inputs.get("Param", [])
        if params:
            owners[i] = param_owner[params[0]]
            continue
        outputs = set(op.output_names)
        if not outputs or outputs & persistable:
            continue
        readers = {
            owners[j] for j in range(i + 1, len(update)) if outputs & set(update[j].input_names)
        }
        if len(readers) == 1 and None not in readers:
            owners[i] = readers.pop()
    return owners


def _row_split_gradients(
    compute: list[Any], update: list[Any], gradients: list[str], sparse: set[str]
) -> dict[str, str]:
    """The gradients to split by rows, each with the variable of a replica's share: those of an
    `is_sparse` parameter, written only by sparse lookups' gradients and their sum, and read
    only by one update that touches just the rows it is given (_ROW_LOCAL_UPDATES)."""
    split = {}
    for name in gradients:
        param = name[: -len(GRAD_SUFFIX)]
        writers = [op for op in compute if any(n.startswith(name) for n in op.output_names)]
        if param not in sparse or not all(
            op.attrs.get("is_sparse") or op.type == "sum" for op in writers
        ):
            continue
        readers = [op for op in update if name in op.input_names]
        if len(readers) != 1:
            continue
        op = readers[0]
        row_local = op.type in _ROW_LOCAL_UPDATES and (
            op.type != "adam" or bool(op.attrs.get("lazy_mode"))
        )
        if row_local and op.input("Param") == [param] and op.input("Grad") == [name]:
            split[name] = name + _ROWS_SUFFIX
    return split


def _dense_row_split_gradients(
    update: list[Any],
    gradients: list[str],
    owners: list[int],
    block: Any,
    replicas: int,
    sparse: set[str],
    presplit: set[str] = frozenset(),
) -> set[str]:
    """The dense gradients to split by rows (a block of rows a replica) so that the replicas'
    shares of the dense reduction and update are balanced, when the whole parameters' placement
    leaves them unbalanced (the engine's test: the largest share over 1.1 times the mean), so
    that the plan is owner_local and the reduction overlaps the backward pass. Candidates are
    rank-2 parameters with at least a row a replica whose gradient one update reads that, given
    rows, touches only those rows: sgd, adagrad, adam (its copies run with lazy_mode, which on
    the blocks, every row once, is the dense update element for element). While the plan is
    unbalanced, the smallest split that balances it is taken, else the one that most lowers the
    largest share; as few elements as possible go the per-row way. When no splits balance the
    plan, none is made (the engine then cuts the gradients into ranges after the backward
    pass, as before). The gradients of `presplit` are split already: each replica has its
    block of their rows."""

    def size(name: str) -> int:
        n = 1
        for d in block.var(name).shape:
            n *= max(int(d), 1)
        return n

    load = [0] * replicas
    candidates: dict[str, tuple[int, int]] = {}  # gradient -> (owner, elements)
    for name, owner in zip(gradients, owners):
        param = name[: -len(GRAD_SUFFIX)]
        if param in sparse or not block.has_var(param):
            continue
        if name in presplit:
            rows = int(block.var(param).shape[0])
            for r in range(replicas):
                load[r] += (rows * (r + 1) // replicas - rows * r // replicas) * (
                    size(param) // rows
                )
            continue
        if owner < 0:
            return set()  # read by several replicas: the plan cannot be owner_local anyway
        load[owner] += size(param)
        readers = [op for op in update if name in op.input_names]
        shape = block.var(param).shape
        if (
            len(readers) == 1
            and readers[0].type in _ROW_LOCAL_UPDATES
            and readers[0].input("Param") == [param]
            and readers[0].input("Grad") == [name]
            and len(shape) == 2
            and int(shape[0]) >= replicas
        ):
            candidates[name] = (owner, size(param))

    def balanced(loads: list[int]) -> bool:
        return max(loads) * replicas <= _OWNER_BALANCE * sum(loads)

    def moved(loads: list[int], name: str) -> list[int]:
        """The loads with `name` split: its owner gives it up, each replica takes its block."""
        owner, n = candidates[name]
        rows = int(block.var(name[: -len(GRAD_SUFFIX)]).shape[0])
        width = n // rows
        return [
            x
            - (n if r == owner else 0)
            + (rows * (r + 1) // replicas - rows * r // replicas) * width
            for r, x in enumerate(loads)
        ]

    split: set[str] = set()
    while not balanced(load):
        left = sorted((n, g) for g, (_, n) in candidates.items() if g not in split)
        if not left:
            return set()  # no split balances the plan: keep every gradient whole
        # The smallest split that balances the plan, else the one that most lowers the largest
        # share.
        fits = [g for _, g in left if balanced(moved(load, g))]
        pick = fits[0] if fits else min(left, key=lambda c: (max(moved(load, c[1])), c[0]))[1]
        if not fits and max(moved(load, pick)) >= max(load):
            return set()
        load = moved(load, pick)
        split.add(pick)
    return split


def _weight_products(
    compute: list[Any],
    update: list[Any],
    gradients: list[str],
    block: Any,
    replicas: int,
    sparse: set[str],
) -> tuple[dict[str, tuple[str, str]], list[Any]]:
    """The weight gradients the replicas compute by rows after the backward pass (see
    BuildStrategy.split_weight_gradients), each with its mul's X and Out@GRAD, and the compute
    ops without them: the mul_grad that wrote one keeps only X@GRAD, or goes when it has none.
    A gradient qualifies when one mul_grad writes it whole (Y is its rank-2 parameter, with at
    least a row a replica; y_num_col_dims 1), no other compute op touches it, one update that
    touches only given rows reads it (_ROW_LOCAL_UPDATES), and no op after the mul_grad writes
    its X or Out@GRAD (the replicas read them after the backward pass)."""
    products: dict[str, tuple[str, str]] = {}
    dropped: dict[int, Any] = {}  # compute op index -> its replacement (None: removed)
    for name in gradients:
        param = name[: -len(GRAD_SUFFIX)]
        if param in sparse or not block.has_var(param):
            continue
        shape = block.var(param).shape
        readers = [op for op in update if name in op.input_names]
        touching = [
            i
            for i, op in enumerate(compute)
            if any(n == name or n.startswith(name + "@") for n in op.input_names + op.output_names)
        ]
        if not (
            len(shape) == 2
            and int(shape[0]) >= replicas
            and len(readers) == 1
            and readers[0].type in _ROW_LOCAL_UPDATES
            and readers[0].input("Param") == [param]
            and readers[0].input("Grad") == [name]
            and len(touching) == 1
        ):
            continue
        at = touching[0]
        op = compute[at]
        if (
            op.type != "mul_grad"
            or op.input("Y") != [param]
            or op.outputs.get("Y@GRAD") != [name]
            or int(op.attrs.get("y_num_col_dims", 1)) != 1
            or name in op.input_names
        ):
            continue
        x, dout = op.input("X")[0], op.input("Out@GRAD")[0]
        if any({x, dout} & set(later.output_names) for later in compute[at + 1 :]):
            continue
        if block.has_var(x) and block.var(x).persistable:
            continue
        outputs = {k: v for k, v in op.outputs.items() if k != "Y@GRAD" and v}
        dropped[at] = (
            Operator(op.block, op.type, dict(op.inputs), outputs, dict(op.attrs))
            if outputs
            else None
        )
        products[name] = (x, dout)
    kept = [dropped.get(i, op) for i, op in enumerate(compute)]
    return products, [op for op in kept if op is not None]


def _split_by_rows(
    update: list[Any],
    op_owner: list[int | None],
    row_parts: dict[str, str],
    replicas: int,
    dense: set[str] = frozenset(),
) -> tuple[list[Any], list[int | None]]:
    """The update ops with the update of each split gradient replaced by one copy a replica,
    reading that replica's share of the rows (with lazy_mode for the copies of a dense
    gradient's Adam, so that each touches only its block). Adam's beta powers, which every copy
    reads, are advanced after them by `scale` ops of replica 0, placed before the next op that
    is not a parallel one or touches them (a phase of replica 0 alone, run without waking the
    others)."""
    ops: list[Any] = []
    owners: list[int | None] = []
    pending: list[Any] = []  # power updates not placed yet

    def place_pending() -> None:
        ops.extend(pending)
        owners.extend([None] * len(pending))
        pending.clear()

    for op, owner in zip(update, op_owner):
        names = set(op.input_names) | set(op.output_names)
        if owner is None or any(names & set(p.input_names + p.output_names) for p in pending):
            place_pending()
        grad = op.input("Grad")[0] if op.input("Grad") else None
        if grad not in row_parts:
            ops.append(op)
            owners.append(owner)
            continue
        outputs = dict(op.outputs)
        for power, power_out, beta in _ADAM_POWERS if op.type == "adam" else ():
            if outputs.pop(power_out, None):
                scale = {"scale": float(op.attrs.get(beta, 0.9 if beta == "beta1" else 0.999))}
                pending.append(
                    Operator(
                        op.block,
                        "scale",
                        {"X": op.input(power)},
                        {"Out": op.output(power_out)},
                        {**scale, "bias": 0.0, OP_ROLE_ATTR: OP_ROLE_OPTIMIZE},
                    )
                )
        inputs = {**op.inputs, "Grad": [row_parts[grad]]}
        attrs = {**op.attrs, "lazy_mode": True} if op.type == "adam" and grad in dense else op.attrs
        for r in range(replicas):
            ops.append(Operator(op.block, op.type, dict(inputs), dict(outputs), dict(attrs)))
            owners.append(r)
    place_pending()
    return ops, owners


def _rows_var(block: Any, grad: str, part: str) -> pb.VarDesc:
    """The declaration of a replica's share of the rows of the split gradient `grad`."""
    like = block.var(grad[: -len(GRAD_SUFFIX)])
    return pb.VarDesc(name=part, type=SELECTED_ROWS, dtype=like.dtype, shape=like.shape)


def _phases(
    program: Program,
    update: list[Any],
    op_owner: list[int | None],
    replicas: int,
    extra_vars: Sequence[pb.VarDesc] = (),
) -> list[list[pb.ProgramDesc | None]]:
    """Consecutive owned ops form one parallel phase; unowned ops a phase of replica 0."""
    groups: list[tuple[bool, list[list[Any]]]] = []
    for op, owner in zip(update, op_owner):
        parallel = owner is not None
        if not groups or groups[-1][0] != parallel:
            groups.append((parallel, [[] for _ in range(replicas)]))
        groups[-1][1][owner if parallel else 0].append(op)
    return [
        [_desc_with_ops(program, ops, extra_vars) if ops else None for ops in per_replica]
        for _, per_replica in groups
    ]


def _desc_with_ops(
    program: Program, ops: list[Any], extra_vars: Sequence[pb.VarDesc] = ()
) -> pb.ProgramDesc:
    desc = pb.ProgramDesc()
    desc.CopyFrom(program.desc())
    del desc.blocks[0].ops[:]
    desc.blocks[0].ops.extend(op.to_desc() for op in ops)
    desc.blocks[0].vars.extend(extra_vars)
    return desc


__all__ = [
    "BuildStrategy",
    "CompiledProgram",
    "DataParallelPlan",
    "ExecutionStrategy",
    "cpu_replicas",
    "plan_data_parallel",
]
