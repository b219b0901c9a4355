"""The collective knobs of DistributedStrategy refuse bad values naming the knob and the rule."""

from __future__ import annotations

import pytest

import fleet
from fleet.errors import InvalidArgument


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_nccl_comm_num_must_be_a_positive_integer(value):
    strategy = fleet.DistributedStrategy()
    with pytest.raises(InvalidArgument, match=r"nccl_comm_num must be an integer >= 1"):
        strategy.nccl_comm_num = value


def test_nccl_comm_num_keeps_a_good_value():
    strategy = fleet.DistributedStrategy()
    assert strategy.nccl_comm_num == 1
    strategy.nccl_comm_num = 3
    assert strategy.nccl_comm_num == 3


def test_an_unknown_setting_lists_the_valid_ones():
    strategy = fleet.DistributedStrategy()
    with pytest.raises(InvalidArgument, match="nccl_comm_num.*sparse_table_configs"):
        strategy.nccl_comm_nums = 2
