"""Paddle names Fleet does not have, and what to use instead: one table for every module a
ported script reaches through (`import fleet as fluid` makes `fluid.X` a lookup in `fleet`).

A module that takes part defines ``__getattr__ = missing_name_hook("fleet.layers")``; a name of
the table then raises an AttributeError saying what to use or why Fleet has no such thing, and
any other unknown name the usual AttributeError. docs/porting.md lists the same table.
"""

from __future__ import annotations

from typing import Callable, NoReturn

_STATIC_ONLY = "Fleet builds static programs only (fluid's graph mode)"
_NO_CONV = (
    "Fleet implements the ops of recommendation and CTR models (embeddings, fc, sequence "
    "pooling, losses, metrics); it has no image or recurrent layers"
)
_FEED = (
    "feed NumPy arrays with Executor.run(program, feed={name: array}) or read files with "
    "fleet.DatasetFactory().create_dataset(...) and Executor.train_from_dataset"
)

# Name -> what to use instead (or why there is none); keyed by the module the name is read from.
_TOP_LEVEL = {
    "contrib": (
        "fluid.contrib (mixed precision, slim, quantization, the contrib layers) is not part of "
        "Fleet"
    ),
    "dygraph": f"{_STATIC_ONLY}: there is no dygraph mode",
    "DataFeeder": f"Fleet has no DataFeeder: {_FEED}",
    "DataFeedDesc": "use fleet.DatasetFactory().create_dataset(...) and its set_use_var()",
    "PyReader": f"Fleet has no PyReader: {_FEED}",
    "DataLoader": f"Fleet has no DataLoader: {_FEED}",
    "nets": f"fluid.nets (image and sequence convolution blocks) is not in Fleet: {_NO_CONV}",
    "incubate": (
        "Fleet is the fleet package itself: replace `from paddle.fluid.incubate.fleet... import "
        "fleet` by `import fleet` (see docs/porting.md)"
    ),
    "CUDAPinnedPlace": "Fleet has CPUPlace and CUDAPlace only; there is no pinned-memory place",
    "XPUPlace": "Fleet has CPUPlace and CUDAPlace only",
    "clip": (
        "gradient clipping (fluid.clip.GradientClipByNorm, ...) is not supported; scale the "
        "loss or lower the learning rate"
    ),
    "profiler": (
        "use Executor.enable_profiling() and Executor.profile() (time per op type) instead of "
        "fluid.profiler"
    ),
    "recordio_writer": f"Fleet does not read RecordIO: {_FEED}",
    "WeightNormParamAttr": "weight normalisation is not supported; use fleet.ParamAttr",
    "name_scope": "name scopes are not supported; variable names come from the layers",
    "unique_name": (
        "fluid.unique_name is not in Fleet: each Program names its variables uniquely "
        "(Program.unique_name(prefix))"
    ),
    "install_check": "use `python -m fleet.run_check` to check an installation",
}

_LAYERS = {
    "py_reader": f"fluid.layers.py_reader is not in Fleet: {_FEED}",
    "create_py_reader_by_data": f"fluid.layers.create_py_reader_by_data is not in Fleet: {_FEED}",
    "double_buffer": f"readers are not in Fleet: {_FEED}",
    "read_file": f"readers are not in Fleet: {_FEED}",
    "open_files": f"readers are not in Fleet: {_FEED}",
    "batch": f"readers are not in Fleet: {_FEED}",
    "conv2d": _NO_CONV,
    "conv3d": _NO_CONV,
    "conv2d_transpose": _NO_CONV,
    "pool2d": _NO_CONV,
    "pool3d": _NO_CONV,
    "batch_norm": f"{_NO_CONV} (no batch_norm: normalise the dense features when reading them)",
    "layer_norm": _NO_CONV,
    "image_resize": _NO_CONV,
    "lstm": _NO_CONV,
    "dynamic_lstm": _NO_CONV,
    "dynamic_lstmp": _NO_CONV,
    "gru_unit": _NO_CONV,
    "dynamic_gru": _NO_CONV,
    "sequence_conv": f"{_NO_CONV}; pool sequences with fleet.layers.sequence_pool",
    "sequence_softmax": f"{_NO_CONV}; pool sequences with fleet.layers.sequence_pool",
    "While": f"{_STATIC_ONLY} without control-flow blocks (While, IfElse, Switch, cond)",
    "IfElse": f"{_STATIC_ONLY} without control-flow blocks (While, IfElse, Switch, cond)",
    "Switch": f"{_STATIC_ONLY} without control-flow blocks (While, IfElse, Switch, cond)",
    "cond": f"{_STATIC_ONLY} without control-flow blocks (While, IfElse, Switch, cond)",
    "Print": "fetch the variable with Executor.run(..., fetch_list=[var]) and print it",
    "square_error_cost": (
        "write it as d = input - label; layers.elementwise_mul(d, d) (or "
        "layers.elementwise_sub and elementwise_mul)"
    ),
    "cos_sim": "not supported: compute it with l2_normalize, elementwise_mul and reduce_sum",
    "reduce_max": "not supported; reduce_sum and reduce_mean are",
    "reduce_min": "not supported; reduce_sum and reduce_mean are",
    "reduce_prod": "not supported; reduce_sum and reduce_mean are",
    "elementwise_max": "not supported; the elementwise ops are add, sub, mul and div",
    "elementwise_min": "not supported; the elementwise ops are add, sub, mul and div",
    "elementwise_pow": "not supported; the elementwise ops are add, sub, mul and div",
    "sequence_expand": f"{_NO_CONV}; pool sequences with fleet.layers.sequence_pool",
    "sequence_reshape": f"{_NO_CONV}; pool sequences with fleet.layers.sequence_pool",
    "lod_reset": "not supported: feed the sequences with the lengths they need (fleet.LoDTensor)",
    "py_func": "not supported: Fleet's ops run in C++; compute in NumPy between runs",
}

_CORE = {
    "CUDAPinnedPlace": _TOP_LEVEL["CUDAPinnedPlace"],
    "XPUPlace": _TOP_LEVEL["XPUPlace"],
    "AnalysisConfig": (
        "Paddle Inference is not in Fleet: serve an exported model with "
        "fleet.load_inference_model and Executor.run"
    ),
    "create_paddle_predictor": (
        "Paddle Inference is not in Fleet: serve an exported model with "
        "fleet.load_inference_model and Executor.run"
    ),
}

_IO = {
    "PyReader": _TOP_LEVEL["PyReader"],
    "DataLoader": _TOP_LEVEL["DataLoader"],
    "save": (
        "fluid.io.save (the 2.0 .pdparams files) is not in Fleet: use fleet.io.save_persistables "
        "(or save_params) and load_persistables"
    ),
    "load": (
        "fluid.io.load (the 2.0 .pdparams files) is not in Fleet: use fleet.io.save_persistables "
        "(or save_params) and load_persistables"
    ),
    "get_program_parameter": "use program.all_parameters()",
    "get_program_persistable_vars": "use [v for v in program.list_vars() if v.persistable]",
}

TABLES: dict[str, dict[str, str]] = {
    "fleet": _TOP_LEVEL,
    "fleet.layers": _LAYERS,
    "fleet.core": _CORE,
    "fleet.io": _IO,
}


def missing(module: str, name: str) -> NoReturn:
    """Raises the AttributeError for `module.name`: with the table's advice when it has one."""
    advice = TABLES.get(module, {}).get(name)
    if advice is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    raise AttributeError(f"module {module!r} has no attribute {name!r}: {advice}")


def missing_name_hook(module: str) -> Callable[[str], NoReturn]:
    """A module ``__getattr__`` that raises `missing(module, name)` for every name."""

    def __getattr__(name: str) -> NoReturn:  # noqa: N807 (the module hook's own name)
        missing(module, name)

    return __getattr__


__all__ = ["TABLES", "missing", "missing_name_hook"]
