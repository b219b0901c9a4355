"""DLRM's hyper_parameters.dense_learning_rate: the MLPs' weights and biases get
ParamAttr(learning_rate=dense_learning_rate / learning_rate), which one process, the GEO
workers and the servers (TableConfig.rate_scales) apply; the embedding keeps the optimizer's
rate. In process: the model's program is built, nothing is trained."""

from __future__ import annotations

import sys

import pytest

import fleet
from fleet.rec.config import load_config
from fleet.rec.model_loader import load_model
from tests.python.rec import rec_jobs

CONFIG = rec_jobs.MODELS / "rank" / "dlrm" / "config.yaml"


def _rates(*overrides: str) -> dict:
    """Each parameter's learning_rate in the model's program, built under `overrides`."""
    sys.modules.pop("net", None)  # each model folder has its own net.py
    model = load_model(load_config(str(CONFIG), overrides))
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        model.net(model.create_feeds())
    return {p.name: p.learning_rate for p in main.all_parameters()}


def test_the_mlps_train_at_the_dense_rate_and_the_embedding_at_the_optimizers():
    rates = _rates("hyper_parameters.dense_learning_rate=0.00025")
    assert rates.pop("SparseFeatFactors") == 1.0
    # bottom MLP [13, 32, 16, 10] and top MLP [27 * 27 + 10, 64, 32, 1]: 6 layers, w and b each
    assert len(rates) == 12
    assert list(rates.values()) == pytest.approx([0.25] * 12)


def test_without_the_key_every_parameter_trains_at_the_optimizers_rate():
    assert set(_rates().values()) == {1.0}
