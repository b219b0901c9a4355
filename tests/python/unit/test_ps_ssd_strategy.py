"""strategy.sparse_table_configs' SSD-tier settings (storage, memory_budget_mb, ssd_path): kept
when valid, refused naming the key and the value otherwise."""

from __future__ import annotations

import pytest

import fleet
from fleet.errors import InvalidArgument


def test_ssd_settings_are_kept_beside_the_count_filter(tmp_path):
    strategy = fleet.DistributedStrategy()
    assert strategy.sparse_table_configs["storage"] == "memory"
    strategy.sparse_table_configs = {"count_filter": 2}
    strategy.sparse_table_configs = {
        "storage": "ssd",
        "memory_budget_mb": 512,
        "ssd_path": tmp_path,
    }
    assert strategy.sparse_table_configs == {
        "count_filter": 2,
        "storage": "ssd",
        "memory_budget_mb": 512.0,
        "ssd_path": str(tmp_path),
    }


@pytest.mark.parametrize(
    "key, value",
    [("storage", "disk"), ("memory_budget_mb", 0), ("memory_budget_mb", True), ("ssd_path", "")],
)
def test_bad_ssd_settings_are_refused_naming_them(key, value):
    strategy = fleet.DistributedStrategy()
    with pytest.raises(InvalidArgument, match=rf"\['{key}'\].*{value!r}"):
        strategy.sparse_table_configs = {key: value}


def test_an_unknown_key_lists_the_valid_ones():
    strategy = fleet.DistributedStrategy()
    with pytest.raises(InvalidArgument, match="memory_budget_mb, ssd_path"):
        strategy.sparse_table_configs = {"ssd_dir": "/tmp"}
