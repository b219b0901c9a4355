"""CPU time, not wall time, of this process and of others: the figures the per-call benchmarks
(ps_dense_cpu.py, ps_sparse_cpu.py) compare, since on a shared machine a neighbour's load moves
wall time far more than the CPU a call takes."""

from __future__ import annotations

import os
import resource


def process_cpu_s(pid: int) -> float:
    """utime + stime of every thread of `pid`, in seconds (clock-tick resolution)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> tuple[float, int]:
    """This process's CPU seconds and its voluntary context switches (its waits)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_nvcsw
