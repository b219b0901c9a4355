"""Prints which fleet modules each module of the Python package imports, read from the source
(nothing is imported), with each module's layer from scripts/check_layering.py. Each line is
`module [layer] -> imported fleet modules`; imports made inside a function (not at the top of
the file) follow `local:`.

    python scripts/import_graph.py            # every module
    python scripts/import_graph.py --local    # only modules with function-local fleet imports
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_layering  # noqa: E402  (a sibling script, not a package)


def main(argv: list[str]) -> int:
    only_local = "--local" in argv
    for module, (top, local) in check_layering.py_import_graph().items():
        if only_local and not local:
            continue
        layer = check_layering.py_layer(module) or "no layer"
        line = f"{module} [{layer}] -> {', '.join(sorted(top)) or '-'}"
        if local:
            line += f"   local: {', '.join(sorted(local))}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
