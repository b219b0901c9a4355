"""Running out of memory is its own error, fleet.errors.OutOfMemory, a MemoryError (docs/errors.md):
from a kernel whose output cannot be allocated, and from a parameter server refusing a table too
large for the machine (ResourceExhausted through core/status.h's one conversion)."""

from __future__ import annotations

import pytest

import fleet
from fleet import errors, layers
from fleet.ps import server_config, start_server
from fleet.testing.ps_reference import OPTIMIZERS


def test_out_of_memory_is_a_fleet_error_and_a_memory_error():
    assert issubclass(errors.OutOfMemory, errors.FleetError)
    assert issubclass(errors.OutOfMemory, MemoryError)
    assert not issubclass(errors.OutOfMemory, errors.InvalidArgument)
    assert "OutOfMemory" in errors.__all__


def test_an_op_whose_output_cannot_be_allocated_raises_out_of_memory():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        # 2^50 floats: 4 PiB, more than any machine has, so the allocation itself fails.
        layers.fill_constant(shape=[2**25, 2**25], dtype="float32", value=1.0)
    exe = fleet.Executor(fleet.CPUPlace())
    with pytest.raises(errors.OutOfMemory, match=r"op fill_constant.*out of memory") as info:
        exe.run(main, scope=fleet._core.Scope())
    assert isinstance(info.value, MemoryError)


def test_a_table_too_large_for_the_server_raises_out_of_memory():
    huge = {
        "table_id": 1,
        "name": "huge",
        "type": "DENSE",
        "dim": 2**42,
        "optimizer": OPTIMIZERS["sgd"],
    }
    with pytest.raises(MemoryError, match=r"dense table 1 'huge'.*GiB needed") as info:
        start_server(server_config(0, 1, [huge]))
    assert isinstance(info.value, errors.OutOfMemory)
