"""Fleet: distributed training for deep-learning models, in the style of PaddlePaddle Fleet.

Build a static program with `fleet.layers`, pick an optimizer from `fleet.optimizer`, run it with
`fleet.Executor`. The compiled core is `fleet._core` (private); this module re-exports an
explicit list.
"""

import os

# Among these, Paddle's names for ported scripts (`import fleet as fluid`): fleet.io, fleet.core,
# fleet.data, fleet.embedding, the deprecated no-ops, the role makers; every other Paddle name
# Fleet lacks is explained by fleet/_compat_names.py (__getattr__ below).
from fleet import (
    _blas_kernel,  # noqa: F401  (first: names OpenBLAS's kernels before fleet._core loads it)
    _crash_report,
    compiler,
    core,
    data_generator,
    errors,
    fleet_api,
    initializer,
    io,
    layers,
    nn,
    optimizer,
    regularizer,
    static,
    tensor,
    transpiler,
)
from fleet._compat_names import missing
from fleet._fluid_api import data, embedding, memory_optimize, release_memory
from fleet.backward import append_backward, gradients
from fleet.compiler import BuildStrategy, CompiledProgram, ExecutionStrategy
from fleet.data_generator import MultiSlotDataGenerator
from fleet.dataset import DatasetFactory, InMemoryDataset, QueueDataset
from fleet.distributed_strategy import DistributedStrategy, DistributedStrategyFactory
from fleet.executor import (
    CPUPlace,
    CUDAPlace,
    Executor,
    LoDTensor,
    create_lod_tensor,
    cuda_places,
    global_scope,
    scope_guard,
)
from fleet.fleet_api import (
    barrier_worker,
    distributed_optimizer,
    flush_worker,
    init,
    init_server,
    init_worker,
    is_first_worker,
    is_server,
    is_worker,
    load_inference_model,
    load_model,
    restart_checkpoint,
    role_maker,
    run_server,
    save_inference_model,
    save_persistables,
    server_endpoints,
    server_index,
    server_num,
    shrink,
    stop_worker,
    util,
    worker_endpoints,
    worker_index,
    worker_num,
)
from fleet.framework import (
    Parameter,
    Program,
    Variable,
    default_main_program,
    default_startup_program,
    program_guard,
    registered_ops,
)
from fleet.parallel_executor import ParallelExecutor, cpu_places
from fleet.param_attr import ParamAttr
from fleet.role_maker import PaddleCloudRoleMaker, Role, UserDefinedRoleMaker

# Paddle 2.x's tensor functions (paddle.concat, paddle.reshape, ...), for model code written
# against `import paddle` and run under `import fleet as paddle`.
from fleet.tensor import (
    add,
    bmm,
    cast,
    concat,
    divide,
    flatten,
    full,
    full_like,
    matmul,
    mean,
    multiply,
    ones,
    reshape,
    scale,
    split,
    square,
    squeeze,
    subtract,
    sum,
    unsqueeze,
    zeros,
)
from fleet.transpiler import DistributeTranspiler, DistributeTranspilerConfig
from fleet.version import __version__

# The native crash report, when FLEET_NATIVE_BACKTRACE=1 (fleet/_crash_report.py).
_crash_report.install_if_requested(os.environ)

__all__ = [
    "DistributeTranspiler",
    "DistributeTranspilerConfig",
    "transpiler",
    "BuildStrategy",
    "CompiledProgram",
    "ExecutionStrategy",
    "ParallelExecutor",
    "compiler",
    "cpu_places",
    "PaddleCloudRoleMaker",
    "Role",
    "UserDefinedRoleMaker",
    "core",
    "data",
    "embedding",
    "io",
    "memory_optimize",
    "release_memory",
    "__version__",
    "DistributedStrategy",
    "DistributedStrategyFactory",
    "distributed_optimizer",
    "flush_worker",
    "init_server",
    "init_worker",
    "run_server",
    "stop_worker",
    "main_program",
    "startup_program",
    "barrier_worker",
    "init",
    "is_first_worker",
    "is_server",
    "is_worker",
    "role_maker",
    "server_endpoints",
    "server_index",
    "server_num",
    "util",
    "worker_endpoints",
    "worker_index",
    "worker_num",
    "save_persistables",
    "load_model",
    "save_inference_model",
    "load_inference_model",
    "metrics",
    "shrink",
    "restart_checkpoint",
    "CPUPlace",
    "CUDAPlace",
    "cuda_places",
    "DatasetFactory",
    "Executor",
    "InMemoryDataset",
    "QueueDataset",
    "data_generator",
    "LoDTensor",
    "ParamAttr",
    "Parameter",
    "Program",
    "Variable",
    "append_backward",
    "create_lod_tensor",
    "default_main_program",
    "default_startup_program",
    "errors",
    "global_scope",
    "gradients",
    "initializer",
    "layers",
    "optimizer",
    "program_guard",
    "registered_ops",
    "regularizer",
    "scope_guard",
    "utils",
    # Paddle 2.x static API (issue 27): paddle.nn, paddle.static and the tensor functions.
    "MultiSlotDataGenerator",
    "nn",
    "static",
    "tensor",
    "add",
    "bmm",
    "cast",
    "concat",
    "divide",
    "flatten",
    "full",
    "full_like",
    "matmul",
    "mean",
    "multiply",
    "ones",
    "reshape",
    "scale",
    "split",
    "square",
    "squeeze",
    "subtract",
    "sum",
    "unsqueeze",
    "zeros",
]


def __getattr__(name: str):  # noqa: ANN202
    # fleet.main_program / fleet.startup_program: the programs distributed_optimizer rewrote.
    if name in ("main_program", "startup_program"):
        return getattr(fleet_api.instance, name)
    # fleet.metrics and fleet.utils are tools built on this facade (scripts/check_layering.py):
    # loaded on first use, so that importing the facade never imports a tool.
    if name == "metrics":
        import fleet.metrics

        return fleet.metrics
    if name == "utils":
        import fleet.utils

        return fleet.utils
    missing("fleet", name)
