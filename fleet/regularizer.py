"""Weight decay: L2Decay and L1Decay add a penalty's gradient to a parameter's gradient.

Set one for every parameter with ``optimizer.SGD(..., regularization=L2Decay(1e-4))`` or for
one parameter with ``ParamAttr(regularizer=...)``, which takes precedence, as in fluid. The ops
(``scale``, ``sign``, ``sum``) are appended after backward, before the update op, so that the
gradient the optimizer sees is ``grad + coeff * param`` (L2) or ``grad + coeff * sign(param)``
(L1).

An embedding with ``is_sparse=True`` has a SelectedRows gradient: one ``sparse_weight_decay`` op
adds the penalty's gradient to the rows the batch read (each once, however often it was read)
and leaves the other rows alone, as fluid 1.x's regularizer did for SelectedRows gradients, so
the gradient stays sparse. (Paddle 2.x's static graph sums the dense penalty into a dense
gradient instead, decaying every row of the table every step.)
"""

from __future__ import annotations

from fleet.errors import InvalidArgument
from fleet.framework import SELECTED_ROWS, Block, Parameter, Variable


class WeightDecayRegularizer:
    """Base class: append(block, param, grad) returns the regularised gradient variable."""

    def __init__(self, regularization_coeff: float = 0.0) -> None:
        coeff = float(regularization_coeff)
        if not coeff >= 0.0:  # also rejects NaN
            raise InvalidArgument(
                f"{type(self).__name__}: regularization_coeff must be >= 0, "
                f"got {regularization_coeff!r}"
            )
        self.coeff = coeff

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.coeff})"

    def _penalty_grad(self, block: Block, param: Parameter, out: Variable) -> None:
        raise NotImplementedError

    def append(self, block: Block, param: Parameter, grad: Variable) -> Variable:
        if self.coeff == 0.0:
            return grad
        program = block.program
        if has_sparse_grad(block, param):
            rows = block.create_var(
                program.unique_name(f"{grad.name}_regularized"),
                shape=param.shape,
                dtype=param.dtype,
                stop_gradient=True,
                kind=SELECTED_ROWS,
            )
            block.append_op(
                "sparse_weight_decay",
                inputs={"Grad": grad, "Param": param},
                outputs={"Out": rows},
                attrs={"coeff": self.coeff, "kind": self.kind},
            )
            return rows
        penalty = block.create_var(
            program.unique_name(f"{param.name}_{self.kind}_decay"),
            shape=param.shape,
            dtype=param.dtype,
            stop_gradient=True,
        )
        self._penalty_grad(block, param, penalty)
        total = block.create_var(
            program.unique_name(f"{grad.name}_regularized"),
            shape=param.shape,
            dtype=param.dtype,
            stop_gradient=True,
        )
        block.append_op("sum", inputs={"X": [grad, penalty]}, outputs={"Out": total})
        return total


class L2Decay(WeightDecayRegularizer):
    """Penalty coeff / 2 * sum(param ** 2): adds coeff * param to the gradient."""

    kind = "l2"

    def _penalty_grad(self, block: Block, param: Parameter, out: Variable) -> None:
        block.append_op(
            "scale",
            inputs={"X": param},
            outputs={"Out": out},
            attrs={"scale": self.coeff, "bias": 0.0},
        )


class L1Decay(WeightDecayRegularizer):
    """Penalty coeff * sum(|param|): adds coeff * sign(param) to the gradient."""

    kind = "l1"

    def _penalty_grad(self, block: Block, param: Parameter, out: Variable) -> None:
        sign = block.create_var(
            block.program.unique_name(f"{param.name}_sign"),
            shape=param.shape,
            dtype=param.dtype,
            stop_gradient=True,
        )
        block.append_op("sign", inputs={"X": param}, outputs={"Out": sign})
        block.append_op(
            "scale",
            inputs={"X": sign},
            outputs={"Out": out},
            attrs={"scale": self.coeff, "bias": 0.0},
        )


# fluid's names.
L2DecayRegularizer = L2Decay
L1DecayRegularizer = L1Decay


def has_sparse_grad(block: Block, param: Parameter) -> bool:
    """True when an is_sparse lookup_table reads `param`, so its gradient is SelectedRows."""
    return any(
        op.type == "lookup_table"
        and param.name in op.input("W")
        and op.attrs.get("is_sparse", False)
        for op in block.ops
    )


def check_regularizer(value: object, where: str) -> WeightDecayRegularizer | None:
    """`value` if it is None or a regularizer; TypeError naming `where` otherwise."""
    if value is None or isinstance(value, WeightDecayRegularizer):
        return value
    raise InvalidArgument(
        f"{where} must be None or a fleet.regularizer.L2Decay/L1Decay, got {type(value).__name__}"
    )
