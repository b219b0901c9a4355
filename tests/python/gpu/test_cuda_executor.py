"""Executor(CUDAPlace): programs train on the device with the CPU's numbers. The startup program
runs the CPU initialisers (the same random values as on the CPU) and leaves the parameters on the
device; a few steps of the collective MLP and of CTR-DNN (sparse embedding gradients, lazy Adam,
an AUC op that has no CUDA kernel and runs on the host) then give the CPU's losses. Device tests
skip without a GPU; the others check what a machine without one sees."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fleet
from fleet import _core, layers
from fleet.errors import Unavailable
from fleet.executor import numpy_of


def _mlp(batch_width: int, optimizer: Any) -> tuple[Any, Any, Any]:
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 7
    with fleet.program_guard(main, startup):
        x = layers.data("x", [batch_width], dtype="float32")
        label = layers.data("label", [1], dtype="float32")
        h = x
        for _ in range(3):
            h = layers.fc(h, 64, act="relu")
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(layers.fc(h, 1), label))
        optimizer.minimize(loss)
    return main, startup, loss


def _ctr() -> tuple[Any, Any, Any, Any]:
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 11
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        dense = layers.data("dense", [5], dtype="float32")
        label = layers.data("label", [1], dtype="int64")
        emb = layers.embedding(ids, [1000, 8], is_sparse=True)
        x = layers.concat([layers.sequence_pool(emb, "sum"), dense], axis=1)
        x = layers.fc(x, 32, act="relu")
        logits = layers.fc(x, 2)
        predict = layers.softmax(logits)
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, label))
        auc, _, _ = layers.auc(predict, label)
        fleet.optimizer.Adam(0.01, lazy_mode=True).minimize(loss)
    return main, startup, loss, auc


def _train(place: Any, program: tuple, feeds: list[dict], fetch: list) -> list[list[float]]:
    main, startup = program[0], program[1]
    exe = fleet.Executor(place)
    scope = _core.Scope()
    exe.run(startup, scope=scope)
    out = []
    for feed in feeds:
        values = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
        out.append([float(np.asarray(v).reshape(-1)[0]) for v in values])
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam"])
def test_mlp_trains_on_the_device_as_on_the_cpu(cuda_device: int, opt: str) -> None:
    make = {
        "sgd": lambda: fleet.optimizer.SGD(0.1),
        "momentum": lambda: fleet.optimizer.Momentum(0.05, momentum=0.9),
        "adam": lambda: fleet.optimizer.Adam(0.01),
    }[opt]
    rng = np.random.default_rng(0)
    feeds = [
        {
            "x": rng.standard_normal((32, 16)).astype(np.float32),
            "label": (rng.random((32, 1)) > 0.5).astype(np.float32),
        }
        for _ in range(5)
    ]
    cpu_prog = _mlp(16, make())
    gpu_prog = _mlp(16, make())
    cpu = _train(fleet.CPUPlace(), cpu_prog, feeds, [cpu_prog[2]])
    gpu = _train(fleet.CUDAPlace(cuda_device), gpu_prog, feeds, [gpu_prog[2]])
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-5)
    assert gpu[-1][0] < gpu[0][0] or opt == "momentum"


@pytest.mark.gpu
def test_ctr_dnn_with_sparse_rows_and_a_host_auc_matches_the_cpu(cuda_device: int) -> None:
    rng = np.random.default_rng(1)
    feeds = []
    for _ in range(4):
        lengths = rng.integers(1, 4, size=24)
        ids = rng.integers(0, 50, size=(int(lengths.sum()), 1)).astype(np.int64)
        feeds.append(
            {
                "ids": fleet.LoDTensor(ids, lengths=[lengths.tolist()]),
                "dense": rng.random((24, 5)).astype(np.float32),
                "label": (rng.random((24, 1)) > 0.5).astype(np.int64),
            }
        )
    cpu_prog, gpu_prog = _ctr(), _ctr()
    cpu = _train(fleet.CPUPlace(), cpu_prog, feeds, [cpu_prog[2], cpu_prog[3]])
    gpu = _train(fleet.CUDAPlace(cuda_device), gpu_prog, feeds, [gpu_prog[2], gpu_prog[3]])
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_parameters_live_on_the_device_and_read_back(cuda_device: int) -> None:
    main, startup, loss = _mlp(8, fleet.optimizer.SGD(0.1))
    exe = fleet.Executor(fleet.CUDAPlace(cuda_device))
    scope = _core.Scope()
    exe.run(startup, scope=scope)
    name = main.global_block().all_parameters()[0].name
    before = numpy_of(scope.find_var(name))  # a host copy of device memory
    feed = {"x": np.ones((4, 8), np.float32), "label": np.ones((4, 1), np.float32)}
    exe.run(main, feed=feed, scope=scope)
    after = numpy_of(scope.find_var(name))
    assert before.shape == after.shape and not np.allclose(before, after)


def test_cuda_places_follow_flags_selected_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    if not _core.compiled_with_cuda:
        with pytest.raises(Unavailable, match="without CUDA"):
            fleet.cuda_places()
        return
    monkeypatch.setenv("FLAGS_selected_gpus", "3,1")
    assert [p.device_id for p in fleet.cuda_places()] == [3, 1]
    assert [p.device_id for p in fleet.cuda_places([0])] == [0]
    monkeypatch.delenv("FLAGS_selected_gpus")
    assert len(fleet.cuda_places()) == _core.cuda_device_count()
    assert fleet.core.is_compiled_with_cuda()


def test_without_a_device_a_cuda_executor_is_refused_by_name() -> None:
    if _core.compiled_with_cuda and _core.cuda_device_count() > 0:
        pytest.skip("a CUDA device is visible; this test is about machines without one")
    with pytest.raises(Unavailable, match=r"CUDAPlace\(0\)"):
        fleet.Executor(fleet.CUDAPlace(0))


@pytest.mark.gpu
def test_train_from_dataset_on_the_device_is_refused_by_name(cuda_device: int) -> None:
    main, startup, _ = _mlp(8, fleet.optimizer.SGD(0.1))
    exe = fleet.Executor(fleet.CUDAPlace(cuda_device))
    with pytest.raises(Unavailable, match=r"train_from_dataset on CUDAPlace\(0\)"):
        exe.train_from_dataset(main, dataset=None)
