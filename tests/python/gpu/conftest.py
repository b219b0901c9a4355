"""Fixtures of the GPU tests: `cuda_device` is device 0, or the test skips without one."""

from __future__ import annotations

import pytest

from fleet import _core


@pytest.fixture
def cuda_device() -> int:
    if _core.cuda_device_count() == 0:
        pytest.skip("no CUDA device visible (no GPU, no driver, or Fleet built without CUDA)")
    return 0
