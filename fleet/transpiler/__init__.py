"""fluid.DistributeTranspiler on Fleet's parameter-server and collective passes."""

from fleet.transpiler.config import DistributeTranspilerConfig, HashName, PSDispatcher, RoundRobin
from fleet.transpiler.distribute_transpiler import DistributeTranspiler, PserverProgram

__all__ = [
    "DistributeTranspiler",
    "DistributeTranspilerConfig",
    "HashName",
    "PSDispatcher",
    "PserverProgram",
    "RoundRobin",
]
