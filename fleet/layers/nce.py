"""nce: the noise-contrastive estimation loss of fluid.layers.nce (word2vec's loss), with its
uniform, log-uniform and custom noise distributions."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fleet import initializer as init
from fleet._dtypes import FLOAT32, INT64
from fleet.errors import InvalidArgument
from fleet.framework import Variable
from fleet.layers.helper import LayerHelper
from fleet.param_attr import ParamAttr

_SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}


def alias_tables(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias tables (Vose's construction) for drawing class c with probability
    probs[c] in constant time: pick a column uniformly, keep it with probability accept[column],
    else take alias[column]."""
    n = len(probs)
    scaled = np.asarray(probs, dtype=np.float64) * n
    alias = np.arange(n, dtype=np.int64)
    accept = np.ones(n, dtype=np.float32)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        accept[s], alias[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return alias, accept


def _startup_constant(helper: LayerHelper, suffix: str, array: np.ndarray) -> Variable:
    """A persistable variable holding `array`, written once by the startup program."""
    dtype = FLOAT32 if array.dtype.kind == "f" else INT64
    name = helper.main.unique_name(f"{helper.name}.{suffix}")
    var = helper.block.create_var(
        name, shape=list(array.shape), dtype=dtype, persistable=True, stop_gradient=True
    )
    startup = helper.startup.global_block()
    svar = startup.create_var(name, shape=list(array.shape), dtype=dtype, persistable=True)
    values = (
        {"fp32_values": [float(v) for v in array]}
        if dtype == FLOAT32
        else {"int64_values": [int(v) for v in array]}
    )
    startup.append_op(
        "assign_value",
        outputs={"Out": svar},
        attrs={"shape": list(array.shape), "dtype": dtype, **values},
    )
    return var


def _custom_dist_inputs(
    helper: LayerHelper, custom_dist: Sequence[float] | None, num_total_classes: int
) -> dict[str, Variable]:
    if custom_dist is None:
        raise InvalidArgument(
            "nce: sampler='custom_dist' needs custom_dist (one probability a class)"
        )
    probs = np.asarray(custom_dist, dtype=np.float64).reshape(-1)
    if probs.size != num_total_classes or (probs < 0).any() or abs(probs.sum() - 1.0) > 1e-3:
        raise InvalidArgument(
            f"nce: custom_dist must hold num_total_classes={num_total_classes} non-negative "
            f"probabilities adding up to 1, got {probs.size} adding up to {probs.sum():.6g}"
        )
    alias, accept = alias_tables(probs)
    return {
        "CustomDistProbs": _startup_constant(helper, "dist_probs", probs.astype(np.float32)),
        "CustomDistAlias": _startup_constant(helper, "dist_alias", alias),
        "CustomDistAliasProbs": _startup_constant(helper, "dist_alias_probs", accept),
    }


def nce(
    input: Variable,
    label: Variable,
    num_total_classes: int,
    sample_weight: Variable | None = None,
    param_attr: Any = None,
    bias_attr: Any = None,
    num_neg_samples: int | None = None,
    name: str | None = None,
    sampler: str = "uniform",
    custom_dist: Sequence[float] | None = None,
    seed: int = 0,
    is_sparse: bool = False,
) -> Variable:
    """The NCE cost of each sample ([batch, 1]) for int64 labels [batch, num_true] among
    num_total_classes, against num_neg_samples noise classes drawn per sample; divided by
    num_neg_samples + 1 as fluid does. is_sparse makes the weight's gradient sparse rows."""
    if sampler not in _SAMPLERS:
        raise InvalidArgument(f"nce: sampler '{sampler}' is unknown; use one of {list(_SAMPLERS)}")
    helper = LayerHelper("nce", name)
    dim = int(input.shape[-1])
    num_neg = 10 if num_neg_samples is None else int(num_neg_samples)
    inputs: dict[str, Any] = {"Input": input, "Label": label}
    inputs["Weight"] = helper.create_parameter(
        ParamAttr.of(param_attr), [num_total_classes, dim], input.dtype
    )
    bias = ParamAttr.of(bias_attr)
    if bias is not None:
        inputs["Bias"] = helper.create_parameter(
            bias,
            [num_total_classes, 1],
            input.dtype,
            default_initializer=init.ConstantInitializer(0.0),
            suffix="b",
        )
    if sample_weight is not None:
        inputs["SampleWeight"] = sample_weight
    if sampler == "custom_dist":
        inputs.update(_custom_dist_inputs(helper, custom_dist, num_total_classes))
    cost = helper.create_variable(input.dtype, suffix="cost")
    logits = helper.create_variable(input.dtype, suffix="sample_logits", stop_gradient=True)
    labels = helper.create_variable(INT64, suffix="sample_labels", stop_gradient=True)
    helper.append_op(
        "nce",
        inputs=inputs,
        outputs={"Cost": cost, "SampleLogits": logits, "SampleLabels": labels},
        attrs={
            "num_total_classes": int(num_total_classes),
            "num_neg_samples": num_neg,
            "sampler": _SAMPLERS[sampler],
            "seed": int(seed),
            "is_sparse": bool(is_sparse),
        },
    )
    return cost / float(num_neg + 1)
