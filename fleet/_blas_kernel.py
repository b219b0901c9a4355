"""Which OpenBLAS kernels the compiled core uses, chosen before it loads.

OpenBLAS built for every x86 target (Debian's, which `fleet._core` links) picks its kernels once,
when the library loads, from the CPU's family and model numbers. A model newer than the library
falls back to its oldest kernels ("Prescott", SSE3): on a 5th-generation Xeon (family 6, model
207, as a cloud VM reports it) Debian 12's OpenBLAS 0.3.21 did that, and CTR-DNN trained at 8.3k
samples/s instead of 25.7k with the AVX-512 kernels forced (benchmarks/ctr_dnn_train.py --quick,
docs/benchmarks.md). The instruction sets the CPU reports are what the kernels need, so when
OPENBLAS_CORETYPE is unset this names the kernels they allow: "SkylakeX" with AVX-512
(F, CD, BW, DQ, VL), "Haswell" with AVX2 and FMA. For float32 those are the kernels' sources
OpenBLAS uses itself on every CPU it knows of that class (its Cooperlake and Sapphire Rapids
targets add bfloat16 kernels, its Zen targets reuse the Haswell ones), but each target is built
on its own, so results can differ in the last bits from those of the target OpenBLAS would have
picked (on an AMD EPYC it picks Cooperlake: CTR-DNN's test AUC 0.7778 there, 0.7781 with
SkylakeX, at the same speed or better). A value the user set is kept, and nothing is set off
x86-64 Linux. Processes started from this one (fleetrun's servers and workers) inherit the
choice.
"""

from __future__ import annotations

import os
import platform
from typing import MutableMapping

_AVX512 = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})
_AVX2 = frozenset({"avx2", "fma"})


def kernels_for_flags(flags: frozenset[str] | set[str]) -> str | None:
    """The OPENBLAS_CORETYPE that a CPU with these /proc/cpuinfo flags runs best, or None when
    OpenBLAS's own choice is as good as any we could name."""
    if _AVX512 <= flags:
        return "SkylakeX"
    if _AVX2 <= flags:
        return "Haswell"
    return None


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The flags of the first processor in a /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def choose_openblas_kernels(
    environ: MutableMapping[str, str] = os.environ, cpuinfo_path: str = "/proc/cpuinfo"
) -> str | None:
    """Sets OPENBLAS_CORETYPE in `environ` when it is unset and the CPU's flags name kernels;
    returns the value now in effect (None: OpenBLAS chooses)."""
    if "OPENBLAS_CORETYPE" in environ:
        return environ["OPENBLAS_CORETYPE"]
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            flags = cpu_flags(f.read())
    except OSError:
        return None  # no /proc (a sandbox): OpenBLAS's own choice
    kernels = kernels_for_flags(flags)
    if kernels is not None:
        environ["OPENBLAS_CORETYPE"] = kernels
    return kernels


def loaded_kernels() -> str | None:
    """The kernels that the loaded OpenBLAS reports (openblas_get_corename), or None when no
    OpenBLAS is loaded by that name. For tests and diagnostics."""
    import ctypes

    try:
        lib = ctypes.CDLL("libopenblas.so.0")  # the core's copy when it is loaded: same soname
    except OSError:
        return None
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()


# On import: `import fleet` imports this module before anything that loads fleet._core.
choose_openblas_kernels()

__all__ = ["choose_openblas_kernels", "cpu_flags", "kernels_for_flags", "loaded_kernels"]
