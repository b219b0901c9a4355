"""Collective (data-parallel) training: every rank holds all parameters and gradients are averaged
by allreduce ops in the program.

* `program_pass.rewrite` turns a program minimized by the user's optimizer into a data-parallel
  one (parameter broadcast in startup; gradient allreduce, fused or not; gradient merge).
* `runtime.CollectiveRuntime` owns the process's collective group and hands it to the executors
  through the facade's RuntimeResources.
"""

from fleet.collective.runtime import CollectiveRuntime

__all__ = ["CollectiveRuntime"]
