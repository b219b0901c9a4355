"""config.yaml loading: PaddleRec's dotted keys, references, paths, overrides, and the errors
that name the key, the file and its line."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from fleet.rec.config import ConfigError, load_config
from fleet.rec.static_ps_trainer import strategy_of

GOOD = """\
runner:
  train_data_dir: "data/train"
  train_reader_path: "reader"
  train_batch_size: 2
  epochs: 3
  model_save_path: "${runner.model_name}_out"
  model_name: "dnn"
  use_visual: False
hyper_parameters:
  optimizer:
    class: Adam
    learning_rate: 0.001
  fc_sizes: [512, 256]
  sparse_feature_dim: 9
  width: ${hyper_parameters.sparse_feature_dim}
"""


def write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_dotted_keys_sections_and_paddlerec_extras(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert config.get("hyper_parameters.optimizer.learning_rate") == 0.001
    assert config.get("hyper_parameters.optimizer") == {"class": "Adam", "learning_rate": 0.001}
    assert config.get("hyper_parameters.fc_sizes") == [512, 256]
    assert config.get("runner.missing", 7) == 7
    assert config["config_abs_dir"] == str(tmp_path)
    assert config["yaml_path"] == str(tmp_path / "config.yaml")
    with pytest.raises(KeyError):
        config["runner.missing"]


def test_references_keep_types_and_paths_resolve_against_the_folder(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert config.get("hyper_parameters.width") == 9  # a whole-string reference keeps its type
    assert config.get("runner.model_save_path") == "dnn_out"
    assert config.get("runner.train_data_dir") == str(tmp_path / "data" / "train")
    assert config.get("runner.train_reader_path") == str(tmp_path / "reader")


def test_overrides_are_checked_like_the_file(tmp_path):
    path = write(tmp_path, GOOD)
    config = load_config(path, ["runner.epochs=1", "hyper_parameters.fc_sizes=[8]"])
    assert config.get("runner.epochs") == 1
    assert config.get("hyper_parameters.fc_sizes") == [8]
    with pytest.raises(ConfigError, match=r"runner\.epochs: must be an integer, got str 'x'"):
        load_config(path, ["runner.epochs=x"])


def test_accepted_but_unused_keys_are_listed_once(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert len(config.notices) == 2
    assert (
        f"{tmp_path / 'config.yaml'}:8: runner.use_visual is accepted but not acted on"
        in (config.notices[1])
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (
            GOOD.replace("  epochs: 3", "  epoch: 3"),
            r"config\.yaml:5: runner\.epoch: unknown key \(did you mean runner\.epochs\?\)",
        ),
        (
            GOOD.replace("  train_batch_size: 2", "  train_batch_size: two"),
            r"config\.yaml:4: runner\.train_batch_size: must be an integer, got str 'two'",
        ),
        (
            GOOD.replace("  train_batch_size: 2\n", ""),
            r"config\.yaml:1: runner\.train_batch_size: missing required key",
        ),
        (
            GOOD.replace("    learning_rate: 0.001\n", ""),
            r"config\.yaml:10: hyper_parameters\.optimizer\.learning_rate: missing required key",
        ),
        (
            GOOD.replace("  use_visual: False", "  use_visual: 3"),
            r"config\.yaml:8: runner\.use_visual: must be True or False, got int 3",
        ),
        (
            GOOD + "  sparse_feature_dim: 10\n",
            r"config\.yaml:16: hyper_parameters\.sparse_feature_dim: duplicate key "
            r"\(first given on line 14\)",
        ),
        (
            GOOD.replace('"${runner.model_name}_out"', '"${runner.nope}"'),
            r"config\.yaml:6: runner\.model_save_path: \$\{runner\.nope\} names no key",
        ),
        (GOOD.replace("epochs: 3", "epochs: [3"), r"config\.yaml:\d+: not valid YAML"),
        (GOOD + "dataset:\n  x: 1\n", r"config\.yaml:16: dataset: unknown key"),
        (
            GOOD.replace("  epochs: 3", "  epochs: 3\n  sync_mode: fast"),
            r"config\.yaml:6: runner\.sync_mode: 'fast' is not one of async, sync, geo",
        ),
    ],
    ids=[
        "unknown",
        "type",
        "missing",
        "missing-nested",
        "bool",
        "duplicate",
        "reference",
        "syntax",
        "section",
        "choice",
    ],
)
def test_bad_configs_name_the_key_file_and_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: no such config file"):
        load_config(str(tmp_path / "nope.yaml"))


@pytest.mark.parametrize("name", ["dnn", "wide_deep", "deepfm", "dlrm"])
def test_the_shipped_configs_load(name):
    root = pathlib.Path(__file__).resolve().parents[3] / "models" / "rank" / name
    for file in ("config.yaml", "config_bigdata.yaml"):
        config = load_config(str(root / file))
        assert config.get("runner.epochs") >= 1


def test_a_sync_configs_reach_the_strategy_and_a_bad_one_names_its_line(tmp_path):
    text = GOOD.replace("  use_visual: False\n", "  a_sync_configs:\n    max_sparse_staleness: 0\n")
    strategy = strategy_of(load_config(write(tmp_path, text)))
    assert strategy.async_config.max_sparse_staleness == 0
    bad = load_config(write(tmp_path, text.replace("staleness: 0", "staleness: -5")))
    with pytest.raises(
        ConfigError,
        match=r"config\.yaml:9: runner\.a_sync_configs\['max_sparse_staleness'\] must be",
    ):
        strategy_of(bad)
