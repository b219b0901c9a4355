"""The C++ layers depend only on the layers beneath them (docs/design.md): the check the build
runs (scripts/check_layering.py) finds nothing, and would find a wrong include."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "check_layering", ROOT / "scripts" / "check_layering.py"
)
check_layering = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layering)


def test_every_layer_includes_only_the_layers_beneath_it():
    assert check_layering.violations() == {}
    assert check_layering.unknown_layers() == set()


def test_a_wrong_include_is_found(tmp_path, monkeypatch):
    for layer in check_layering.ALLOWED:
        (tmp_path / layer).mkdir()
    (tmp_path / "core" / "bad.h").write_text('#include "framework/executor.h"\n')
    (tmp_path / "ps" / "gen.cc").write_text('#include "fleet/framework/framework.pb.h"\n')
    monkeypatch.setattr(check_layering, "CSRC", tmp_path)
    assert check_layering.violations() == {
        "core -> framework": ["core/bad.h"],
        "ps -> framework": ["ps/gen.cc"],
    }
