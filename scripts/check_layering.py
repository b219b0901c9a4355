"""Refuses an #include that runs against the layering of docs/design.md: each C++ layer may
include only the layers beneath it. The build runs this (CMake target fleet_layering, part of
ALL) and so does the test suite (tests/python/unit/test_layering.py).

    python scripts/check_layering.py   # exit 1 with the offending files listed
"""

from __future__ import annotations

import pathlib
import re
import sys

CSRC = pathlib.Path(__file__).resolve().parents[1] / "csrc"
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
UNCHECKED = {"python"}  # the bindings use every layer
# Roles inside the parameter server (csrc/ps/<role>/; the protocol, sharding and endpoints at its
# root are "ps"): the server is built on the tables, and a client includes no server or table
# code, so that a worker links neither.
PS_ROLES = {
    "ps": {"ps"},
    "ps/table": {"ps", "ps/table"},
    "ps/server": {"ps", "ps/table", "ps/server"},
    "ps/client": {"ps", "ps/client"},
}
# Generated headers ("fleet/<area>/x.pb.h") belong to their area; "fleet/build_config.h" to core.
INCLUDE = re.compile(r'^#include "([a-z_]+)/([a-z_]+/)?', re.M)
PS_INCLUDE = re.compile(r'^#include "(ps/[a-z_/]+\.h)"', re.M)


def violations() -> dict[str, list[str]]:
    """`"<layer> -> <area>": [files]` for every include of a layer it may not use."""
    wrong: dict[str, list[str]] = {}
    for layer, allowed in ALLOWED.items():
        for path in sorted((CSRC / layer).rglob("*")):
            if path.suffix not in (".h", ".cc", ".cu"):
                continue
            for top, sub in INCLUDE.findall(path.read_text()):
                area = sub.rstrip("/") if top == "fleet" else top
                if area in ALLOWED and area not in allowed:
                    wrong.setdefault(f"{layer} -> {area}", []).append(str(path.relative_to(CSRC)))
    for edge, files in ps_role_violations().items():
        wrong.setdefault(edge, []).extend(files)
    return wrong


def ps_role(path: str) -> str:
    """The role ("ps/client", ...) of a path under csrc/ ("ps/client/client.h"), "ps" for the
    root of the parameter-server area and for an unknown folder there."""
    parts = path.split("/")
    role = "/".join(parts[:2])
    return role if len(parts) > 2 and role in PS_ROLES else "ps"


def ps_role_violations() -> dict[str, list[str]]:
    """`"<role> -> <role>": [files]` for every include of a parameter-server role that a file
    of another role may not use."""
    wrong: dict[str, list[str]] = {}
    for path in sorted((CSRC / "ps").rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu"):
            continue
        relative = str(path.relative_to(CSRC))
        role = ps_role(relative)
        for included in PS_INCLUDE.findall(path.read_text()):
            target = ps_role(included)
            if target not in PS_ROLES[role]:
                wrong.setdefault(f"{role} -> {target}", []).append(relative)
    return wrong


def unknown_layers() -> set[str]:
    folders = {p.name for p in CSRC.iterdir() if p.is_dir()}
    return folders - set(ALLOWED) - UNCHECKED


def main() -> int:
    wrong, unknown = violations(), unknown_layers()
    for edge, files in wrong.items():
        print(
            f"layering: {edge} is not allowed (docs/design.md): {', '.join(files)}", file=sys.stderr
        )
    if unknown:
        print(
            f"layering: folders of csrc/ missing from scripts/check_layering.py: {sorted(unknown)}",
            file=sys.stderr,
        )
    return 1 if wrong or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
