"""Optimizers: minimize(loss) = append_backward + one update op per parameter.

Each optimizer keeps its state (learning rate, moments, beta powers) in persistable variables
created in the main program and initialised by the startup program, so the state lives in the
scope beside the parameters and survives across runs.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from fleet._dtypes import FLOAT32
from fleet.backward import append_backward
from fleet.errors import InvalidArgument
from fleet.framework import (
    OP_ROLE_OPTIMIZE,
    Operator,
    Parameter,
    Program,
    Variable,
    default_startup_program,
)
from fleet.regularizer import L2Decay, WeightDecayRegularizer, check_regularizer


def _one_decay(owner: str, regularization: Any, weight_decay: Any) -> Any:
    """The regularizer of `regularization=` (1.x) or `weight_decay=` (2.x); a float weight decay
    is L2Decay(coefficient), as in paddle.optimizer."""
    if regularization is not None and weight_decay is not None:
        raise InvalidArgument(
            f"{owner}: regularization={regularization!r} and weight_decay={weight_decay!r} are "
            "the same setting (1.x and 2.x spelling); give one"
        )
    if isinstance(weight_decay, (int, float)) and not isinstance(weight_decay, bool):
        return L2Decay(float(weight_decay))
    return regularization if weight_decay is None else weight_decay


class Optimizer:
    op_type = ""

    def __init__(
        self,
        learning_rate: float | Variable,
        regularization: Any = None,
        name: str | None = None,
        parameters: Sequence[Any] | None = None,
        weight_decay: float | WeightDecayRegularizer | None = None,
    ) -> None:
        """`regularization` (1.x) and `weight_decay` (2.x: a float is an L2Decay coefficient, or
        a regularizer) are one setting, so at most one may be given. `parameters` (2.x, e.g.
        `model.parameters()`) are the parameters minimize() updates when it is not given a
        parameter_list of its own; None updates every trainable parameter."""
        if not isinstance(learning_rate, (float, int, Variable)):
            raise InvalidArgument(
                f"learning_rate must be a float or a Variable, got {type(learning_rate).__name__}"
            )
        self._learning_rate = learning_rate
        self._lr_var: Variable | None = None
        self.regularization = check_regularizer(
            _one_decay(type(self).__name__, regularization, weight_decay),
            f"{type(self).__name__} regularization",
        )
        self._parameters = None if parameters is None else list(parameters)
        self.name = name or type(self).__name__.lower()
        self._startup: Program | None = None

    @property
    def learning_rate(self) -> float | Variable:
        """The learning rate as constructed: a number, or the Variable of a schedule
        (layers.exponential_decay, ...). Engines read it to configure server-side rules."""
        return self._learning_rate

    # -- state ---------------------------------------------------------------------------------
    def _persistable(
        self, main: Program, name: str, shape: Sequence[int], value: float, dtype: int = FLOAT32
    ) -> Variable:
        block = main.global_block()
        if block.has_var(name):
            return block.var(name)
        var = block.create_var(
            name, shape=list(shape), dtype=dtype, persistable=True, stop_gradient=True
        )
        startup = (self._startup or default_startup_program()).global_block()
        svar = startup.create_var(name, shape=list(shape), dtype=dtype, persistable=True)
        startup.append_op(
            "fill_constant",
            outputs={"Out": svar},
            attrs={"shape": list(shape), "dtype": dtype, "value": float(value)},
        )
        return var

    def _learning_rate_var(self, main: Program) -> Variable:
        if isinstance(self._learning_rate, Variable):
            return self._learning_rate
        if self._lr_var is None or self._lr_var.block.program is not main:
            self._lr_var = self._persistable(
                main, main.unique_name("learning_rate"), [1], float(self._learning_rate)
            )
        return self._lr_var

    def _accumulator(
        self,
        main: Program,
        param: Parameter,
        kind: str,
        value: float = 0.0,
        shape: Sequence[int] | None = None,
    ) -> Variable:
        return self._persistable(
            main, f"{param.name}_{self.name}_{kind}", param.shape if shape is None else shape, value
        )

    def _param_lr(self, main: Program, param: Parameter) -> Variable:
        lr = self._learning_rate_var(main)
        if param.learning_rate == 1.0:
            return lr
        scaled = main.global_block().create_var(
            main.unique_name(f"{param.name}_lr"), shape=[1], dtype=FLOAT32, stop_gradient=True
        )
        main.global_block().append_op(
            "scale",
            inputs={"X": lr},
            outputs={"Out": scaled},
            attrs={"scale": float(param.learning_rate)},
        )
        return scaled

    # -- API -------------------------------------------------------------------------------
    def backward(
        self,
        loss: Variable,
        startup_program: Program | None = None,
        parameter_list: Sequence[Any] | None = None,
        no_grad_set: Iterable[Any] | None = None,
    ) -> list[tuple[Parameter, Variable]]:
        self._startup = startup_program
        if parameter_list is None:
            parameter_list = self._parameters
        return append_backward(loss, parameter_list, no_grad_set)

    def apply_gradients(self, params_grads: list[tuple[Parameter, Variable]]) -> list[Operator]:
        if not params_grads:
            return []
        main = params_grads[0][0].block.program
        ops = []
        with main.op_role_guard(OP_ROLE_OPTIMIZE):
            for param, grad in params_grads:
                regularizer = getattr(param, "regularizer", None) or self.regularization
                if regularizer is not None:
                    grad = regularizer.append(main.global_block(), param, grad)
                ops.append(self._append_update(main, param, grad))
        return ops

    def minimize(
        self,
        loss: Variable,
        startup_program: Program | None = None,
        parameter_list: Sequence[Any] | None = None,
        no_grad_set: Iterable[Any] | None = None,
    ):  # noqa: ANN201
        """Appends backward and update ops; returns (optimize_ops, params_grads)."""
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self.apply_gradients(params_grads), params_grads

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        raise NotImplementedError(f"{type(self).__name__} must implement _append_update")

    def _append_rule(
        self,
        main: Program,
        param: Parameter,
        grad: Variable,
        state: Mapping[str, Variable],
        attrs: Mapping[str, Any] | None = None,
        out_slots: Mapping[str, str] | None = None,
    ) -> Operator:
        """Appends this optimizer's op (`op_type`) updating `param` in place from `grad`. Each
        state slot S (an accumulator, updated in place) is input S and output S + "Out", as
        fluid's update ops name them, unless `out_slots` names its output otherwise."""
        renamed = out_slots or {}
        return main.global_block().append_op(
            self.op_type,
            inputs={
                "Param": param,
                "Grad": grad,
                "LearningRate": self._param_lr(main, param),
                **state,
            },
            outputs={
                "ParamOut": param,
                **{renamed.get(slot, f"{slot}Out"): var for slot, var in state.items()},
            },
            attrs=dict(attrs or {}),
        )


def apply_per_parameter(
    default: Optimizer,
    params_grads: list[tuple[Parameter, Variable]],
    own: Mapping[str, Optimizer],
    startup_program: Program | None = None,
) -> list[Operator]:
    """Update ops for `params_grads` (from one backward): a parameter named in `own` is updated
    by its own optimizer (its state initialised in `startup_program`), every other by
    `default`. The single-process form of DistributedStrategy.table_optimizers."""
    ops = default.apply_gradients([pg for pg in params_grads if pg[0].name not in own])
    for param, grad in params_grads:
        if param.name in own:
            own[param.name]._startup = startup_program or default._startup
            ops += own[param.name].apply_gradients([(param, grad)])
    return ops


class SGD(Optimizer):
    op_type = "sgd"

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        return self._append_rule(main, param, grad, {})


class Momentum(Optimizer):
    op_type = "momentum"

    def __init__(
        self,
        learning_rate: float | Variable,
        momentum: float = 0.9,
        use_nesterov: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.momentum, self.use_nesterov = momentum, use_nesterov

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        velocity = self._accumulator(main, param, "velocity")
        attrs = {"mu": float(self.momentum), "use_nesterov": self.use_nesterov}
        return self._append_rule(main, param, grad, {"Velocity": velocity}, attrs)


class Adagrad(Optimizer):
    op_type = "adagrad"

    def __init__(
        self,
        learning_rate: float | Variable,
        epsilon: float = 1e-6,
        initial_accumulator_value: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.epsilon, self.initial_accumulator_value = epsilon, initial_accumulator_value

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        moment = self._accumulator(main, param, "moment", self.initial_accumulator_value)
        return self._append_rule(
            main, param, grad, {"Moment": moment}, {"epsilon": float(self.epsilon)}
        )


class Adam(Optimizer):
    op_type = "adam"

    def __init__(
        self,
        learning_rate: float | Variable = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        lazy_mode: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon, self.lazy_mode = beta1, beta2, epsilon, lazy_mode

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        m1 = self._accumulator(main, param, "moment1")
        m2 = self._accumulator(main, param, "moment2")
        b1 = self._accumulator(main, param, "beta1_pow_acc", self.beta1, shape=[1])
        b2 = self._accumulator(main, param, "beta2_pow_acc", self.beta2, shape=[1])
        state = {"Moment1": m1, "Moment2": m2, "Beta1Pow": b1, "Beta2Pow": b2}
        attrs = {
            "beta1": float(self.beta1),
            "beta2": float(self.beta2),
            "epsilon": float(self.epsilon),
            "lazy_mode": self.lazy_mode,
        }
        return self._append_rule(main, param, grad, state, attrs)


class DecayedAdagrad(Optimizer):
    """Adagrad whose squared-gradient sum decays: m = decay * m + (1 - decay) * g^2."""

    op_type = "decayed_adagrad"

    def __init__(
        self,
        learning_rate: float | Variable,
        decay: float = 0.95,
        epsilon: float = 1e-6,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.decay, self.epsilon = decay, epsilon

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        moment = self._accumulator(main, param, "moment")
        attrs = {"decay": float(self.decay), "epsilon": float(self.epsilon)}
        return self._append_rule(main, param, grad, {"Moment": moment}, attrs)


class RMSProp(Optimizer):
    """RMSProp with optional momentum, centered (dividing by the gradient's variance estimate)
    when `centered`; fluid's defaults."""

    op_type = "rmsprop"

    def __init__(
        self,
        learning_rate: float | Variable,
        rho: float = 0.95,
        epsilon: float = 1e-6,
        momentum: float = 0.0,
        centered: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.rho, self.epsilon, self.momentum, self.centered = rho, epsilon, momentum, centered

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        state = {
            "MeanSquare": self._accumulator(main, param, "mean_square"),
            "Moment": self._accumulator(main, param, "momentum"),
        }
        if self.centered:
            state["MeanGrad"] = self._accumulator(main, param, "mean_grad")
        attrs = {
            "decay": float(self.rho),
            "epsilon": float(self.epsilon),
            "momentum": float(self.momentum),
            "centered": bool(self.centered),
        }
        return self._append_rule(main, param, grad, state, attrs)


class Ftrl(Optimizer):
    """FTRL-Proximal (McMahan et al., KDD 2013) with L1/L2 regularisation and a learning-rate
    power (-0.5: the paper's rule)."""

    op_type = "ftrl"

    def __init__(
        self,
        learning_rate: float | Variable,
        l1: float = 0.0,
        l2: float = 0.0,
        lr_power: float = -0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.l1, self.l2, self.lr_power = l1, l2, lr_power

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        state = {
            "SquaredAccumulator": self._accumulator(main, param, "squared"),
            "LinearAccumulator": self._accumulator(main, param, "linear"),
        }
        attrs = {"l1": float(self.l1), "l2": float(self.l2), "lr_power": float(self.lr_power)}
        # fluid's ftrl op shortens its outputs' names.
        out_slots = {"SquaredAccumulator": "SquaredAccumOut", "LinearAccumulator": "LinearAccumOut"}
        return self._append_rule(main, param, grad, state, attrs, out_slots)


class Adamax(Optimizer):
    """Adam with the infinity norm in place of the second moment (Kingma & Ba, section 7.1)."""

    op_type = "adamax"

    def __init__(
        self,
        learning_rate: float | Variable = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        moment = self._accumulator(main, param, "moment")
        inf_norm = self._accumulator(main, param, "inf_norm")
        b1 = self._accumulator(main, param, "beta1_pow_acc", self.beta1, shape=[1])
        state = {"Moment": moment, "InfNorm": inf_norm, "Beta1Pow": b1}
        attrs = {
            "beta1": float(self.beta1),
            "beta2": float(self.beta2),
            "epsilon": float(self.epsilon),
        }
        return self._append_rule(main, param, grad, state, attrs)


class Lamb(Optimizer):
    """LAMB (You et al., ICLR 2020): Adam's direction plus weight decay, scaled per parameter by
    the trust ratio ||param|| / ||direction||. exclude_from_weight_decay_fn(param) -> True
    turns the decay off for that parameter (biases, norms)."""

    op_type = "lamb"

    def __init__(
        self,
        learning_rate: float | Variable = 0.001,
        lamb_weight_decay: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay_fn: Callable[[Parameter], bool] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate, **kwargs)
        self.weight_decay, self.beta1, self.beta2 = lamb_weight_decay, beta1, beta2
        self.epsilon, self.exclude_fn = epsilon, exclude_from_weight_decay_fn

    def _append_update(self, main: Program, param: Parameter, grad: Variable) -> Operator:
        m1 = self._accumulator(main, param, "moment1")
        m2 = self._accumulator(main, param, "moment2")
        b1 = self._accumulator(main, param, "beta1_pow_acc", self.beta1, shape=[1])
        b2 = self._accumulator(main, param, "beta2_pow_acc", self.beta2, shape=[1])
        decay = 0.0 if self.exclude_fn is not None and self.exclude_fn(param) else self.weight_decay
        state = {"Moment1": m1, "Moment2": m2, "Beta1Pow": b1, "Beta2Pow": b2}
        attrs = {
            "beta1": float(self.beta1),
            "beta2": float(self.beta2),
            "epsilon": float(self.epsilon),
            "weight_decay": float(decay),
        }
        return self._append_rule(main, param, grad, state, attrs)


SGDOptimizer = SGD
MomentumOptimizer = Momentum
AdagradOptimizer = Adagrad
AdamOptimizer = Adam
DecayedAdagradOptimizer = DecayedAdagrad
RMSPropOptimizer = RMSProp
FtrlOptimizer = Ftrl
AdamaxOptimizer = Adamax
LambOptimizer = Lamb

__all__ = [
    "Optimizer",
    "SGD",
    "Momentum",
    "Adagrad",
    "Adam",
    "SGDOptimizer",
    "MomentumOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "DecayedAdagrad",
    "RMSProp",
    "Ftrl",
    "Adamax",
    "Lamb",
    "DecayedAdagradOptimizer",
    "RMSPropOptimizer",
    "FtrlOptimizer",
    "AdamaxOptimizer",
    "LambOptimizer",
    "apply_per_parameter",
]
