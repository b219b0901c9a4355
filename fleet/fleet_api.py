"""The process-wide fleet facade and its functions, for `fleet/__init__.py` to re-export:

    from fleet.fleet_api import (barrier_worker, init, is_first_worker, is_server, is_worker,
                                 role_maker, server_endpoints, server_index, server_num, util,
                                 worker_endpoints, worker_index, worker_num)

`instance` is the Fleet object itself (for tools and tests that need the object: its
role_maker, util, collective_runtime). Its runtime resources are the process's default ones
(fleet.scope.default_resources()), which every fleet.Executor made without `resources=` sees.
"""

from __future__ import annotations

from fleet import role_maker
from fleet.base.fleet_base import Fleet
from fleet.ps.inference import load_inference_model
from fleet.scope import default_resources

instance = Fleet(default_resources())

init = instance.init
is_server = instance.is_server
is_worker = instance.is_worker
is_first_worker = instance.is_first_worker
worker_index = instance.worker_index
worker_num = instance.worker_num
server_index = instance.server_index
server_num = instance.server_num
server_endpoints = instance.server_endpoints
worker_endpoints = instance.worker_endpoints
barrier_worker = instance.barrier_worker
util = instance.util
distributed_optimizer = instance.distributed_optimizer
init_server = instance.init_server
run_server = instance.run_server
init_worker = instance.init_worker
flush_worker = instance.flush_worker
stop_worker = instance.stop_worker
save_persistables = instance.save_persistables
load_model = instance.load_model
save_inference_model = instance.save_inference_model
shrink = instance.shrink
restart_checkpoint = instance.restart_checkpoint

__all__ = [
    "Fleet",
    "barrier_worker",
    "distributed_optimizer",
    "flush_worker",
    "init_server",
    "init_worker",
    "run_server",
    "stop_worker",
    "init",
    "instance",
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
    "shrink",
    "restart_checkpoint",
]
