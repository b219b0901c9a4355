"""`fluid.core` for ported scripts: the tensor, scope and place classes, and the build queries.

`fleet._core` is the compiled module and stays private; this module names the part of it a
Paddle script reaches as `fluid.core.X` (`import fleet as fluid`). A Paddle name Fleet lacks
raises an AttributeError saying what to use instead (fleet/_compat_names.py).
"""

from __future__ import annotations

from fleet import _core
from fleet._compat_names import missing_name_hook
from fleet.executor import CPUPlace, CUDAPlace

LoDTensor = _core.LoDTensor
SelectedRows = _core.SelectedRows
Scope = _core.Scope


def is_compiled_with_cuda() -> bool:
    """Whether this build of Fleet has CUDA support (not whether a device is present)."""
    return bool(_core.compiled_with_cuda)


def get_cuda_device_count() -> int:
    """Visible CUDA devices; 0 in a build without CUDA."""
    count = getattr(_core, "cuda_device_count", None)
    return int(count()) if count is not None and is_compiled_with_cuda() else 0


__getattr__ = missing_name_hook("fleet.core")

__all__ = [
    "CPUPlace",
    "CUDAPlace",
    "LoDTensor",
    "Scope",
    "SelectedRows",
    "get_cuda_device_count",
    "is_compiled_with_cuda",
]
