"""The C++ layers and the Python layers depend only on the layers beneath them (docs/design.md):
the check the build and the test suite run (scripts/check_layering.py) finds nothing in the
tree, and would find a wrong include, a wrong-way or unexplained function-local import, a
module without a layer and an import cycle."""

from __future__ import annotations

import importlib.util
import pathlib
import textwrap

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


# -- Python --------------------------------------------------------------------------------------


def test_every_fleet_module_imports_only_its_layer_and_lower_ones_at_the_top():
    assert check_layering.py_violations() == []
    assert check_layering.py_cycles() == []


def _package(tmp_path, monkeypatch, files):
    """A fake fleet package under tmp_path with `files` ({relative path: source})."""
    package = tmp_path / "fleet"
    for name, source in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    monkeypatch.setattr(check_layering, "PACKAGE", package)


def test_a_wrong_way_import_is_found(tmp_path, monkeypatch):
    _package(
        tmp_path,
        monkeypatch,
        {
            "executor.py": "from fleet import fleet_api\n",
            "fleet_api.py": "from fleet.executor import Executor\n",
            "ps/__init__.py": "",
            "ps/runtime.py": "from fleet.base import fleet_base\n",
            "base/__init__.py": "",
            "base/fleet_base.py": "from ..ps import runtime\n",
        },
    )
    assert check_layering.py_violations() == [
        "fleet.executor (run) imports fleet.fleet_api (facade), a higher layer",
        "fleet.ps.runtime (engines) imports fleet.base.fleet_base (facade), a higher layer",
    ]


def test_a_function_local_import_needs_a_reason(tmp_path, monkeypatch):
    _package(
        tmp_path,
        monkeypatch,
        {
            "__init__.py": """
                def __getattr__(name):
                    import fleet.metrics
                    return fleet.metrics
            """,
            "metrics.py": "",
            "trainer.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from fleet.executor import Executor
                def run():
                    from fleet import executor
                    return executor
            """,
            "executor.py": "",
        },
    )
    # fleet -> fleet.metrics is in PY_LOCAL_IMPORTS; a TYPE_CHECKING import never runs.
    assert check_layering.py_violations() == [
        "fleet.trainer imports fleet.executor inside a function: import it at the top, or say "
        "why not in PY_LOCAL_IMPORTS (scripts/check_layering.py)"
    ]


def test_a_module_without_a_layer_says_where_to_add_it(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, {"transpiler/__init__.py": "", "transpiler/x.py": ""})
    monkeypatch.delitem(check_layering.PY_LAYER_OF, "transpiler")
    assert check_layering.py_violations() == [
        "fleet.transpiler: fleet/transpiler has no layer: add a row for 'transpiler' to "
        "PY_LAYER_OF in scripts/check_layering.py",
        "fleet.transpiler.x: fleet/transpiler has no layer: add a row for 'transpiler' to "
        "PY_LAYER_OF in scripts/check_layering.py",
    ]


def test_an_import_cycle_within_a_layer_is_found(tmp_path, monkeypatch):
    _package(
        tmp_path,
        monkeypatch,
        {"executor.py": "import fleet.trainer\n", "trainer.py": "from fleet import executor\n"},
    )
    assert check_layering.py_violations() == []
    assert check_layering.py_cycles() == [["fleet.executor", "fleet.trainer", "fleet.executor"]]


def test_the_command_fails_on_a_wrong_way_import(tmp_path, monkeypatch, capsys):
    _package(tmp_path, monkeypatch, {"framework.py": "from fleet import executor\n"})
    (tmp_path / "fleet" / "executor.py").write_text("")
    assert check_layering.main(["--python"]) == 1
    assert "fleet.framework (program) imports fleet.executor (run)" in capsys.readouterr().err
