"""The 1.x parameter-server strategy's config objects, for `DistributedStrategy`'s 1.x accessors
(`get_program_config()` / `set_program_config()`, `get_trainer_runtime_config()`,
`get_server_runtime_config()`), so that a 1.x script's tuning lines run unchanged.

What each setting does in Fleet:

* ProgramConfig (Paddle's DistributeTranspilerConfig): ``min_block_size`` is the dense table's
  block size (elements per block; block b lives on server b % servers); ``slice_var_up=False``
  keeps the dense table in one block (on server 0), as Paddle keeps each variable whole;
  ``split_method`` "RoundRobin" is how Fleet places the blocks already, "HashName" is accepted
  and places them round robin too (sparse rows are always placed by a hash of their key). The
  other transpiler settings are accepted; those Fleet does not act on say so once.
* TrainerRuntimeConfig: the ``communicator_*`` flags are the strategy's a_sync_configs under
  Paddle's flag names (``communicator_send_queue_size`` is ``send_queue_size``, ...).
* ServerRuntimeConfig: Paddle's RPC thread counts; Fleet's servers size their own thread pools,
  so these are accepted with a notice.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Mapping

from fleet.errors import InvalidArgument

logger = logging.getLogger("fleet")
_said: set[str] = set()  # the one-time notices this process has logged


def notice_once(key: str, message: str) -> None:
    """Logs `message` (a setting accepted without effect) the first time `key` is seen."""
    if key not in _said:
        _said.add(key)
        logger.warning("%s", message)


_SPLIT_METHODS = ("RoundRobin", "HashName")
# DistributeTranspilerConfig settings a 1.x script may set that Fleet accepts without acting on
# them (the mode comes from the strategy itself, the rest concern the transpiler's own rewrite).
_TRANSPILER_ONLY = {
    "sync_mode": True,
    "runtime_split_send_recv": False,
    "geo_sgd_mode": False,
    "geo_sgd_need_push_nums": 100,
    "wait_port": True,
    "print_log": False,
    "mode": "pserver",
    "enable_dc_asgd": False,
    "completely_not_async": False,
    "half_async": False,
    "collective_mode": None,
    "nccl_comm_num": 1,
    "use_hierarchical_allreduce": False,
    "hierarchical_allreduce_inter_nranks": 0,
}


class ProgramConfig:
    """Paddle's DistributeTranspilerConfig as a 1.x strategy hands it out (see the module
    docstring for what each setting does)."""

    def __init__(self) -> None:
        object.__setattr__(self, "slice_var_up", True)
        object.__setattr__(self, "split_method", "RoundRobin")
        object.__setattr__(self, "min_block_size", 8192)
        for key, value in _TRANSPILER_ONLY.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, name: str, value: Any) -> None:
        where = f"program config {name!r}"
        if name == "slice_var_up":
            if not isinstance(value, bool):
                raise InvalidArgument(f"{where} must be a bool, got {value!r}")
        elif name == "min_block_size":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{where} must be an integer >= 1, got {value!r}")
        elif name == "split_method":
            value = getattr(value, "__name__", value)  # Paddle passes the class itself
            if value not in _SPLIT_METHODS:
                raise InvalidArgument(f"{where} must be one of {_SPLIT_METHODS}, got {value!r}")
            if value == "HashName":
                notice_once(
                    "split_method",
                    "program config split_method=HashName: Fleet places dense blocks round "
                    "robin over the servers (and sparse rows by a hash of their key) either way",
                )
        elif name in _TRANSPILER_ONLY:
            notice_once(
                f"program_config.{name}",
                f"program config {name!r} is accepted and has no effect in Fleet (the mode "
                "comes from the strategy; Fleet's program pass is not the transpiler)",
            )
        else:
            valid = ["slice_var_up", "split_method", "min_block_size", *_TRANSPILER_ONLY]
            raise InvalidArgument(
                f"program config has no setting {name!r}; valid settings: {', '.join(valid)}"
            )
        object.__setattr__(self, name, value)

    def dense_block_size(self, dense_elements: int) -> int:
        """The dense table's block size these settings ask for."""
        if not self.slice_var_up:
            return max(int(dense_elements), 1)
        return self.min_block_size

    def update(self, values: Any) -> None:
        """Takes another ProgramConfig or a dict (as set_program_config does)."""
        if isinstance(values, ProgramConfig):
            values = vars(values)
        if not isinstance(values, Mapping):
            raise InvalidArgument(
                f"set_program_config takes a dict or a program config, got {type(values).__name__}"
            )
        for key, value in values.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"ProgramConfig({vars(self)})"


# Paddle's communicator flag names -> the a_sync_configs keys they are.
COMMUNICATOR_FLAGS = {
    "communicator_send_queue_size": "send_queue_size",
    "communicator_max_merge_var_num": "max_merge_var_num",
    "communicator_send_wait_times": "send_wait_times",
    "communicator_thread_pool_size": "thread_pool_size",
    "communicator_independent_recv_thread": "independent_recv_thread",
    "communicator_min_send_grad_num_before_recv": "min_send_grad_num_before_recv",
    "communicator_is_sgd_optimizer": None,  # Fleet merges by the rule itself
    "communicator_fake_rpc": None,
    "communicator_merge_sparse_grad": None,
    "communicator_max_merge_var_num_geo": None,
}


class TrainerRuntimeConfig:
    """The communicator flags of a 1.x strategy, read from and written to its a_sync_configs
    (`get` and `set` are the strategy's)."""

    def __init__(
        self,
        mode: str,
        get: Callable[[], dict[str, Any]],
        set: Callable[[dict[str, Any]], None],
    ) -> None:
        self.mode = mode
        self._get, self._set = get, set

    @property
    def runtime_configs(self) -> dict[str, str]:
        current = self._get()
        return {
            flag: str(current[key])
            for flag, key in COMMUNICATOR_FLAGS.items()
            if key is not None and key in current
        }

    def get_communicator_flags(self) -> dict[str, str]:
        return self.runtime_configs

    def update(self, values: Any) -> None:
        if isinstance(values, TrainerRuntimeConfig):
            values = values.runtime_configs
        if not isinstance(values, Mapping):
            raise InvalidArgument(
                "set_trainer_runtime_config takes a dict of communicator flags, got "
                f"{type(values).__name__}"
            )
        updates = {}
        for flag, value in values.items():
            if flag not in COMMUNICATOR_FLAGS:
                raise InvalidArgument(
                    f"trainer runtime config has no flag {flag!r}; valid flags: "
                    f"{', '.join(COMMUNICATOR_FLAGS)}"
                )
            key = COMMUNICATOR_FLAGS[flag]
            if key is None:
                notice_once(flag, f"trainer runtime flag {flag!r} has no effect in Fleet")
                continue
            updates[key] = _flag_value(value)
        self._set(updates)

    def __repr__(self) -> str:
        return f"TrainerRuntimeConfig(mode={self.mode}, runtime_configs={self.runtime_configs})"


def _flag_value(value: Any) -> Any:
    """Paddle keeps flags as strings ("16", "True"); the a_sync_configs want ints and bools."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        try:
            return int(lowered)
        except ValueError:
            return value
    return value


@dataclasses.dataclass
class ServerRuntimeConfig:
    """Paddle's server RPC thread counts: accepted; Fleet's servers size their own pools."""

    _rpc_send_thread_num: int = 12
    _rpc_get_thread_num: int = 12
    _rpc_prefetch_thread_num: int = 12

    def update(self, values: Any) -> None:
        if isinstance(values, ServerRuntimeConfig):
            values = dataclasses.asdict(values)
        if not isinstance(values, Mapping):
            raise InvalidArgument(
                f"set_server_runtime_config takes a dict, got {type(values).__name__}"
            )
        for key, value in values.items():
            if key not in {f.name for f in dataclasses.fields(self)}:
                raise InvalidArgument(f"server runtime config has no setting {key!r}")
            setattr(self, key, value)
        notice_once(
            "server_runtime_config",
            "server runtime config (RPC thread counts) has no effect in Fleet: its servers "
            "size their own thread pools",
        )


__all__ = [
    "COMMUNICATOR_FLAGS",
    "ProgramConfig",
    "ServerRuntimeConfig",
    "TrainerRuntimeConfig",
    "notice_once",
]
