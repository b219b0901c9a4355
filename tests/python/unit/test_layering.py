"""The C++ layers depend only on the layers beneath them (docs/design.md, CMakeLists.txt): every
`#include "<layer>/..."` of a layer's files names an allowed layer."""

from __future__ import annotations

import pathlib
import re

CSRC = pathlib.Path(__file__).resolve().parents[3] / "csrc"
ALLOWED = {
    "core": {"core"},
    "framework": {"core", "framework"},
    "operators": {"core", "framework", "operators"},
    "data": {"core", "data"},
    "trainer": {"core", "framework", "operators", "data", "trainer"},
    "ps": {"core", "ps"},
    "collective": {"core", "collective"},
    "distributed": {"core", "framework", "operators", "ps", "collective", "distributed"},
}
# Generated protobuf headers ("fleet/<area>/x.pb.h") belong to their area.
INCLUDE = re.compile(r'^#include "([a-z_]+)/([a-z_]+/)?', re.M)


def _dependencies(layer: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (CSRC / layer).rglob("*"):
        if path.suffix not in (".h", ".cc", ".cu"):
            continue
        for top, sub in INCLUDE.findall(path.read_text()):
            area = sub.rstrip("/") if top == "fleet" else top
            if area in ALLOWED:
                found.setdefault(area, set()).add(str(path.relative_to(CSRC)))
    return found


def test_every_layer_includes_only_the_layers_beneath_it():
    wrong = {}
    for layer, allowed in ALLOWED.items():
        for area, files in _dependencies(layer).items():
            if area not in allowed:
                wrong[f"{layer} -> {area}"] = sorted(files)
    assert not wrong, f"layering violations: {wrong}"


def test_every_layer_is_checked():
    folders = {p.name for p in CSRC.iterdir() if p.is_dir()} - {"python", "bench"}
    assert folders <= set(ALLOWED), f"layers not in the table: {folders - set(ALLOWED)}"
