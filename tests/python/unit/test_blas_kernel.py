"""fleet._blas_kernel: OpenBLAS's kernels named from the CPU's flags before fleet._core loads it
(a CPU model newer than the library otherwise gets its SSE3 kernels, 3x slower)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from fleet._blas_kernel import choose_openblas_kernels, cpu_flags, kernels_for_flags

AVX512 = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}


def test_kernels_follow_the_instruction_sets():
    assert kernels_for_flags(frozenset(AVX512 | {"avx2", "fma", "amx_tile"})) == "SkylakeX"
    assert kernels_for_flags(frozenset({"avx2", "fma", "sse4_2"})) == "Haswell"
    # AVX-512 without VL (Knights Landing) cannot run SkylakeX's kernels: AVX2's instead.
    assert kernels_for_flags(frozenset((AVX512 - {"avx512vl"}) | {"avx2", "fma"})) == "Haswell"
    assert kernels_for_flags(frozenset({"avx", "sse4_2"})) is None


def test_cpuinfo_flags_are_the_first_processors():
    text = "processor\t: 0\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert cpu_flags(text) == {"fpu", "avx2", "fma"}
    assert cpu_flags("processor : 0\n") == frozenset()


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64", reason="x86-64 Linux only"
)
def test_an_unset_variable_is_named_and_a_set_one_kept(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: " + " ".join(sorted(AVX512)) + "\n")
    env: dict[str, str] = {}
    assert choose_openblas_kernels(env, str(cpuinfo)) == "SkylakeX"
    assert env == {"OPENBLAS_CORETYPE": "SkylakeX"}
    env = {"OPENBLAS_CORETYPE": "Zen"}
    assert choose_openblas_kernels(env, str(cpuinfo)) == "Zen"
    assert env == {"OPENBLAS_CORETYPE": "Zen"}
    env = {}
    assert choose_openblas_kernels(env, str(tmp_path / "missing")) is None
    assert env == {}


def _loaded_kernels(env: dict[str, str]) -> tuple[str, str]:
    """In a fresh process: the variable after `import fleet` and the kernels OpenBLAS loaded."""
    code = (
        "import os, fleet\n"
        "from fleet._blas_kernel import loaded_kernels\n"
        "print(os.environ.get('OPENBLAS_CORETYPE'), loaded_kernels())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    variable, kernels = out.stdout.split()
    return variable, kernels


def _flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return cpu_flags(f.read())
    except OSError:
        return frozenset()


@pytest.mark.skipif(kernels_for_flags(_flags()) is None, reason="no AVX2 or AVX-512 here")
def test_the_core_loads_the_named_kernels():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    expected = kernels_for_flags(_flags())
    variable, kernels = _loaded_kernels(env)
    if kernels == "None":
        pytest.skip("fleet._core is not linked against OpenBLAS here")
    assert (variable, kernels) == (expected, expected)
    # The user's own choice wins.
    assert _loaded_kernels({**env, "OPENBLAS_CORETYPE": "Haswell"}) == ("Haswell", "Haswell")
