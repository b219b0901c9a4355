"""Paddle's import path of the distributed strategies (`paddle.distributed.fleet.base.
distributed_strategy`); they live in fleet/distributed_strategy.py, beneath the engines that
read them."""

from fleet.distributed_strategy import (
    AsyncConfig,
    DistributedStrategy,
    DistributedStrategyFactory,
    PsMode,
)

__all__ = ["AsyncConfig", "DistributedStrategy", "DistributedStrategyFactory", "PsMode"]
