"""The static program model: Program -> Block -> Variable / Operator, built in Python and run in
C++ (serialised as framework.proto's ProgramDesc).

As in fluid, layers append ops to the default main program and parameter initialisers to the
default startup program; `program_guard` switches both. Each appended op gets its compile-time
output shapes from the C++ registry's shape inference, the user's file:line (so run-time errors
point at the script), and its role (forward, backward, optimize) for profiling.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import sys
from typing import Any, Iterator, Mapping, Sequence

from fleet import _core
from fleet._attrs import decode_attr, encode_attr
from fleet._dtypes import BOOL, FLOAT32, dtype_name, to_dtype
from fleet._tracked import TrackedDict, TrackedList
from fleet.errors import InvalidArgument, NotFound
from fleet.proto import framework_pb2 as pb

LOD_TENSOR, SELECTED_ROWS, LOD_TENSOR_ARRAY = 0, 1, 2
OP_ROLE_FORWARD, OP_ROLE_BACKWARD, OP_ROLE_OPTIMIZE, OP_ROLE_OTHER = 0, 1, 2, 3
OP_ROLE_ATTR, OP_CALLSITE_ATTR = "op_role", "op_callsite"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_callsite() -> str:
    """file:line of the innermost frame outside the fleet package (the user's script)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PACKAGE_DIR + os.sep):
            return f"{os.path.basename(path)}:{frame.f_lineno}"
        frame = frame.f_back
    return "<fleet>"


class Variable:
    """A named value in a block. Shapes use -1 for dimensions known only at run time."""

    def __init__(
        self,
        block: "Block",
        name: str,
        shape: Sequence[int] = (),
        dtype: Any = FLOAT32,
        lod_level: int = 0,
        persistable: bool = False,
        stop_gradient: bool = False,
        kind: int = LOD_TENSOR,
    ) -> None:
        self.block = block
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = to_dtype(dtype)
        self.lod_level = int(lod_level)
        self.persistable = persistable
        self.stop_gradient = stop_gradient
        self.kind = kind

    @property
    def is_parameter(self) -> bool:
        return False

    def to_desc(self) -> pb.VarDesc:
        return pb.VarDesc(
            name=self.name,
            type=self.kind,
            dtype=self.dtype,
            shape=self.shape,
            lod_level=self.lod_level,
            persistable=self.persistable,
            stop_gradient=self.stop_gradient,
            is_parameter=self.is_parameter,
        )

    def __repr__(self) -> str:
        kind = {LOD_TENSOR: "", SELECTED_ROWS: ", selected_rows", LOD_TENSOR_ARRAY: ", array"}[
            self.kind
        ]
        flags = "".join(
            [
                ", persistable" if self.persistable else "",
                f", lod_level={self.lod_level}" if self.lod_level else "",
                kind,
            ]
        )
        return (
            f"{type(self).__name__}({self.name}: {dtype_name(self.dtype)}{list(self.shape)}{flags})"
        )

    __str__ = __repr__

    # -- operators, as fluid's math_op_patch: each appends ops to the variable's block ----------
    # Arithmetic with a Python number uses one scale op (float32) or an elementwise op against a
    # [1] constant of the variable's dtype; with a variable, the elementwise op (Y broadcasts
    # against X as in elementwise_add with axis=-1). Comparisons give bool variables. __eq__
    # builds an `equal` op like Paddle's, so hashing stays by identity.

    __hash__ = object.__hash__

    def _new_var(self, dtype: int) -> "Variable":
        return self.block.create_var(self.block.program.unique_name("tmp"), dtype=dtype)

    def _constant(self, value: Any, full: bool = False) -> "Variable":
        """`value` in this variable's dtype: a [1] tensor that broadcasts as Y, or with `full`
        one of this variable's shape (its batch dimension taken at run time) to stand as X."""
        out = self._new_var(self.dtype)
        out.stop_gradient = True
        attrs = {"shape": [1], "dtype": self.dtype, "value": float(value)}
        if not full:
            self.block.append_op("fill_constant", outputs={"Out": out}, attrs=attrs)
        elif -1 in self.shape:
            attrs.update(shape=list(self.shape), input_dim_idx=0, output_dim_idx=0)
            self.block.append_op(
                "fill_constant_batch_size_like",
                inputs={"Input": self},
                outputs={"Out": out},
                attrs=attrs,
            )
        else:
            attrs["shape"] = list(self.shape)
            self.block.append_op("fill_constant", outputs={"Out": out}, attrs=attrs)
        return out

    def _scale(self, scale: float, bias: float) -> "Variable":
        out = self._new_var(self.dtype)
        self.block.append_op(
            "scale",
            inputs={"X": self},
            outputs={"Out": out},
            attrs={"scale": float(scale), "bias": float(bias), "bias_after_scale": True},
        )
        return out

    def _binary(self, other: Any, op_type: str, reverse: bool = False) -> "Variable":
        if isinstance(other, numbers.Number):
            other = self._constant(other, full=reverse)
        elif not isinstance(other, Variable):
            return NotImplemented
        x, y = (other, self) if reverse else (self, other)
        compare = op_type in _COMPARE_OPS
        out = self._new_var(BOOL if compare else x.dtype)
        self.block.append_op(
            op_type, inputs={"X": x, "Y": y}, outputs={"Out": out}, attrs={"axis": -1}
        )
        if compare:
            out.stop_gradient = True
        return out

    def _scalar_shortcut(self, other: Any) -> bool:
        return (
            isinstance(other, numbers.Number)
            and not isinstance(other, bool)
            and self.dtype == FLOAT32
        )

    def __add__(self, other: Any) -> "Variable":
        if self._scalar_shortcut(other):
            return self._scale(1.0, other)
        return self._binary(other, "elementwise_add")

    __radd__ = __add__

    def __sub__(self, other: Any) -> "Variable":
        if self._scalar_shortcut(other):
            return self._scale(1.0, -other)
        return self._binary(other, "elementwise_sub")

    def __rsub__(self, other: Any) -> "Variable":
        if self._scalar_shortcut(other):
            return self._scale(-1.0, other)
        return self._binary(other, "elementwise_sub", reverse=True)

    def __mul__(self, other: Any) -> "Variable":
        if self._scalar_shortcut(other):
            return self._scale(other, 0.0)
        return self._binary(other, "elementwise_mul")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> "Variable":
        if self._scalar_shortcut(other) and other != 0:
            return self._scale(1.0 / other, 0.0)
        return self._binary(other, "elementwise_div")

    def __rtruediv__(self, other: Any) -> "Variable":
        return self._binary(other, "elementwise_div", reverse=True)

    __div__, __rdiv__ = __truediv__, __rtruediv__

    def __neg__(self) -> "Variable":
        if self.dtype == FLOAT32:
            return self._scale(-1.0, 0.0)
        return self._binary(-1, "elementwise_mul")

    def __lt__(self, other: Any) -> "Variable":
        return self._binary(other, "less_than")

    def __le__(self, other: Any) -> "Variable":
        return self._binary(other, "less_equal")

    def __gt__(self, other: Any) -> "Variable":
        return self._binary(other, "greater_than")

    def __ge__(self, other: Any) -> "Variable":
        return self._binary(other, "greater_equal")

    def __eq__(self, other: Any) -> "Variable":  # type: ignore[override]
        return self._binary(other, "equal")

    def __ne__(self, other: Any) -> "Variable":  # type: ignore[override]
        return self._binary(other, "not_equal")

    def astype(self, dtype: Any) -> "Variable":
        """A cast of this variable to `dtype` (a name, NumPy dtype or Fleet dtype code)."""
        out_dtype = to_dtype(dtype)
        out = self._new_var(out_dtype)
        self.block.append_op(
            "cast",
            inputs={"X": self},
            outputs={"Out": out},
            attrs={"in_dtype": self.dtype, "out_dtype": out_dtype},
        )
        return out


_COMPARE_OPS = frozenset(
    ["less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"]
)


class Parameter(Variable):
    """A trainable persistable variable, initialised by an op in the startup program."""

    def __init__(
        self,
        block: "Block",
        name: str,
        shape: Sequence[int],
        dtype: Any = FLOAT32,
        trainable: bool = True,
        learning_rate: float = 1.0,
        regularizer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            block, name, shape, dtype, persistable=True, stop_gradient=not trainable, **kwargs
        )
        self.trainable = trainable
        self.learning_rate = learning_rate
        self.regularizer = regularizer  # fleet.regularizer; overrides the optimizer's

    @property
    def is_parameter(self) -> bool:
        return True


class Operator:
    def __init__(
        self,
        block: "Block",
        op_type: str,
        inputs: dict[str, list[str]],
        outputs: dict[str, list[str]],
        attrs: dict[str, Any],
    ) -> None:
        self.block = block
        self.type = op_type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs

    def input(self, slot: str) -> list[str]:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        return self.outputs.get(slot, [])

    @property
    def input_names(self) -> list[str]:
        return [n for names in self.inputs.values() for n in names]

    @property
    def output_names(self) -> list[str]:
        return [n for names in self.outputs.values() for n in names]

    def to_desc(self) -> pb.OpDesc:
        op = pb.OpDesc(type=self.type)
        for slot, names in self.inputs.items():
            op.inputs.add(parameter=slot, arguments=names)
        for slot, names in self.outputs.items():
            op.outputs.add(parameter=slot, arguments=names)
        for name in sorted(self.attrs):
            encode_attr(op.attrs.add(), name, self.attrs[name])
        return op

    @staticmethod
    def from_desc(block: "Block", desc: pb.OpDesc) -> "Operator":
        return Operator(
            block,
            desc.type,
            {v.parameter: list(v.arguments) for v in desc.inputs},
            {v.parameter: list(v.arguments) for v in desc.outputs},
            {a.name: decode_attr(a) for a in desc.attrs},
        )

    def __repr__(self) -> str:
        def slots(m: Mapping[str, list[str]]) -> str:
            return ", ".join(f"{k}={v}" for k, v in m.items())

        attrs = {k: v for k, v in self.attrs.items() if k not in (OP_ROLE_ATTR, OP_CALLSITE_ATTR)}
        where = self.attrs.get(OP_CALLSITE_ATTR, "")
        return (
            f"{{{slots(self.outputs)}}} = {self.type}({slots(self.inputs)})"
            f"{' ' + str(attrs) if attrs else ''}{'  # ' + where if where else ''}"
        )


def _to_names(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else [value]
    return [v.name if isinstance(v, Variable) else str(v) for v in items]


class Block:
    def __init__(self, program: "Program", idx: int, parent_idx: int = -1) -> None:
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        # Edits of either bump the program's version (fleet/_tracked.py), so that no prepared
        # program or cached desc goes stale; passes use _remove_op / _remove_var / _rename_var.
        self.vars: dict[str, Variable] = TrackedDict(program._bump)
        self.ops: list[Operator] = TrackedList(program._bump)

    def var(self, name: str) -> Variable:
        if name not in self.vars:
            raise NotFound(f"variable '{name}' is not in block {self.idx} of the program")
        return self.vars[name]

    def has_var(self, name: str) -> bool:
        return name in self.vars

    def create_var(self, name: str | None = None, **kwargs: Any) -> Variable:
        name = name or self.program.unique_name("tmp")
        if name in self.vars:
            return self.vars[name]
        var = Variable(self, name, **kwargs)
        self.vars[name] = var
        self.program._bump()
        return var

    def create_parameter(
        self, name: str, shape: Sequence[int], dtype: Any = FLOAT32, **kwargs: Any
    ) -> Parameter:
        if name in self.vars:
            existing = self.vars[name]
            if tuple(existing.shape) != tuple(shape):
                raise InvalidArgument(
                    f"parameter '{name}' exists with shape "
                    f"{list(existing.shape)}, cannot reuse it as {list(shape)}"
                )
            return existing  # type: ignore[return-value]
        param = Parameter(self, name, shape, dtype, **kwargs)
        self.vars[name] = param
        self.program._bump()
        return param

    def all_parameters(self) -> list[Parameter]:
        return [v for v in self.vars.values() if isinstance(v, Parameter)]

    def append_op(
        self,
        type: str,
        inputs: Mapping[str, Any] | None = None,
        outputs: Mapping[str, Any] | None = None,
        attrs: Mapping[str, Any] | None = None,
        infer_shape: bool = True,
    ) -> Operator:
        return self._insert_op(len(self.ops), type, inputs, outputs, attrs, infer_shape)

    def _prepend_op(self, type: str, **kwargs: Any) -> Operator:
        return self._insert_op(0, type, **kwargs)

    def _insert_op(
        self,
        index: int,
        type: str,
        inputs: Mapping[str, Any] | None = None,
        outputs: Mapping[str, Any] | None = None,
        attrs: Mapping[str, Any] | None = None,
        infer_shape: bool = True,
    ) -> Operator:
        registry = _core.op_registry
        if not registry.has_op(type):
            raise NotFound(
                f"unknown op type '{type}' (at {_user_callsite()}); registered ops: "
                f"see fleet.registered_ops()"
            )
        attrs = dict(attrs or {})
        attrs.setdefault(OP_ROLE_ATTR, self.program._op_role)
        attrs.setdefault(OP_CALLSITE_ATTR, _user_callsite())
        op = Operator(
            self,
            type,
            {k: _to_names(v) for k, v in (inputs or {}).items() if v is not None},
            {k: _to_names(v) for k, v in (outputs or {}).items() if v is not None},
            attrs,
        )
        for name in op.output_names:
            if name not in self.vars:
                self.create_var(name)
        if infer_shape and registry.has_infer_shape(type):
            self._infer_shape(op)
        self.ops.insert(index, op)
        self.program._bump()
        return op

    def _remove_op(self, index: int) -> Operator:
        """Removes and returns the op at `index` (its variables stay)."""
        return self.ops.pop(index)

    def _remove_var(self, name: str) -> Variable:
        """Removes variable `name`; NotFound when absent, InvalidArgument while an op uses it."""
        if name not in self.vars:
            raise NotFound(f"variable '{name}' is not in block {self.idx} of the program")
        users = [op.type for op in self.ops if name in op.input_names or name in op.output_names]
        if users:
            raise InvalidArgument(f"cannot remove variable '{name}': ops {users} still use it")
        return self.vars.pop(name)

    def _rename_var(self, old: str, new: str) -> Variable:
        """Renames variable `old` to `new` in the block and in every op that uses it."""
        if old not in self.vars:
            raise NotFound(f"variable '{old}' is not in block {self.idx} of the program")
        if new in self.vars:
            raise InvalidArgument(f"cannot rename '{old}' to '{new}': '{new}' exists")
        var = self.vars.pop(old)
        var.name = new
        self.vars[new] = var
        for op in self.ops:
            for slots in (op.inputs, op.outputs):
                for slot, names in slots.items():
                    slots[slot] = [new if n == old else n for n in names]
        self.program._bump()
        return var

    def _infer_shape(self, op: Operator) -> None:
        infos = {}
        for name in op.input_names:
            v = self._find_var_recursive(name)
            if v is not None:
                infos[name] = (list(v.shape), v.dtype, v.lod_level, v.kind)
        try:
            result = _core.op_registry.infer_shape(op.to_desc().SerializeToString(), infos)
        except Exception as exc:
            raise type(exc)(
                f"{exc} (op '{op.type}' created at {op.attrs.get(OP_CALLSITE_ATTR)})"
            ) from None
        for name, (shape, dtype, lod_level, kind) in result.items():
            var = self.vars[name]
            var.shape, var.dtype, var.lod_level, var.kind = tuple(shape), dtype, lod_level, kind

    def _find_var_recursive(self, name: str) -> Variable | None:
        block: Block | None = self
        while block is not None:
            if name in block.vars:
                return block.vars[name]
            block = self.program.blocks[block.parent_idx] if block.parent_idx >= 0 else None
        return None

    def to_desc(self) -> pb.BlockDesc:
        desc = pb.BlockDesc(idx=self.idx, parent_idx=self.parent_idx)
        desc.vars.extend(v.to_desc() for v in self.vars.values())
        desc.ops.extend(op.to_desc() for op in self.ops)
        return desc


class Program:
    """A list of blocks; block 0 is the global block. Mutations bump `version`, which keys the
    executor's cache of prepared programs."""

    def __init__(self) -> None:
        self.blocks = [Block(self, 0)]
        self.random_seed = 0
        self.version = 0
        self._op_role = OP_ROLE_FORWARD
        self._name_counts: dict[str, int] = {}
        self._desc_cache: tuple[int, pb.ProgramDesc] | None = None

    def _bump(self) -> None:
        self.version += 1

    def global_block(self) -> Block:
        return self.blocks[0]

    def current_block(self) -> Block:
        return self.blocks[0]

    def unique_name(self, prefix: str) -> str:
        n = self._name_counts.get(prefix, 0)
        self._name_counts[prefix] = n + 1
        return f"{prefix}_{n}"

    @contextlib.contextmanager
    def op_role_guard(self, role: int) -> Iterator[None]:
        saved, self._op_role = self._op_role, role
        try:
            yield
        finally:
            self._op_role = saved

    def all_parameters(self) -> list[Parameter]:
        return self.global_block().all_parameters()

    def list_vars(self) -> list[Variable]:
        return [v for b in self.blocks for v in b.vars.values()]

    def desc(self) -> pb.ProgramDesc:
        if self._desc_cache is None or self._desc_cache[0] != self.version:
            desc = pb.ProgramDesc(version=self.version)
            desc.blocks.extend(b.to_desc() for b in self.blocks)
            self._desc_cache = (self.version, desc)
        return self._desc_cache[1]

    @staticmethod
    def from_desc(desc: pb.ProgramDesc) -> "Program":
        """The program `desc()` describes (e.g. read back from an exported inference model).
        Parameters come back as Parameters; their regularizers and learning rates, which only
        training reads, are not part of a desc."""
        program = Program()
        for bdesc in desc.blocks:
            if bdesc.idx == 0:
                block = program.blocks[0]
            else:
                block = Block(program, bdesc.idx, bdesc.parent_idx)
                program.blocks.append(block)
            for v in bdesc.vars:
                common = dict(dtype=v.dtype, lod_level=v.lod_level, kind=v.type)
                if v.is_parameter:
                    var: Variable = Parameter(
                        block, v.name, list(v.shape), trainable=not v.stop_gradient, **common
                    )
                else:
                    var = Variable(
                        block,
                        v.name,
                        list(v.shape),
                        persistable=v.persistable,
                        stop_gradient=v.stop_gradient,
                        **common,
                    )
                block.vars[v.name] = var
            for op in bdesc.ops:
                block.ops.append(Operator.from_desc(block, op))
        program._bump()
        return program

    def clone(self, for_test: bool = False) -> "Program":
        """A deep copy. With for_test, backward and optimize ops are dropped and ops with an
        `is_test` attribute (dropout) switch to inference behaviour."""
        copy = Program()
        copy.random_seed = self.random_seed
        copy._name_counts = dict(self._name_counts)
        for block in self.blocks:
            nb = copy.blocks[0] if block.idx == 0 else Block(copy, block.idx, block.parent_idx)
            if block.idx > 0:
                copy.blocks.append(nb)
            for v in block.vars.values():
                clone = (
                    Parameter.__new__(Parameter)
                    if isinstance(v, Parameter)
                    else Variable.__new__(Variable)
                )
                clone.__dict__.update(v.__dict__)
                clone.block = nb
                nb.vars[v.name] = clone
            for op in block.ops:
                if for_test and op.attrs.get(OP_ROLE_ATTR, 0) in (
                    OP_ROLE_BACKWARD,
                    OP_ROLE_OPTIMIZE,
                ):
                    continue
                attrs = dict(op.attrs)
                if for_test and "is_test" in attrs:
                    attrs["is_test"] = True
                nb.ops.append(
                    Operator(
                        nb,
                        op.type,
                        {k: list(v) for k, v in op.inputs.items()},
                        {k: list(v) for k, v in op.outputs.items()},
                        attrs,
                    )
                )
        if for_test:
            used = {n for op in copy.global_block().ops for n in op.input_names + op.output_names}
            gb = copy.global_block()
            gb.vars = {k: v for k, v in gb.vars.items() if k in used or v.persistable}
        copy._bump()
        return copy

    def __str__(self) -> str:
        lines = []
        for block in self.blocks:
            lines.append(f"block {block.idx} (parent {block.parent_idx}):")
            lines.append("  vars:")
            lines.extend(f"    {v}" for v in block.vars.values())
            lines.append("  ops:")
            lines.extend(f"    {op}" for op in block.ops)
        return "\n".join(lines)

    __repr__ = __str__


class _Defaults:
    """The fluid API's default main and startup programs (switched by program_guard)."""

    main = Program()
    startup = Program()


def default_main_program() -> Program:
    return _Defaults.main


def default_startup_program() -> Program:
    return _Defaults.startup


@contextlib.contextmanager
def program_guard(main_program: Program, startup_program: Program | None = None) -> Iterator[None]:
    saved = (_Defaults.main, _Defaults.startup)
    _Defaults.main = main_program
    if startup_program is not None:
        _Defaults.startup = startup_program
    try:
        yield
    finally:
        _Defaults.main, _Defaults.startup = saved


def registered_ops() -> list[str]:
    return list(_core.op_registry.types())
