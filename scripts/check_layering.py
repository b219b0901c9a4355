"""Refuses an import that runs against the layering of docs/design.md, in C++ and in Python.

C++: each layer of csrc/ may #include only the layers beneath it (and the parameter-server roles
only theirs). Python: each module of fleet/ imports only modules of its own layer or lower ones
(program < run < engines < facade < tools), at the top of the file; a module without a layer
is an error that says where to add it. The build runs this (CMake target fleet_layering, part
of ALL) and so does the test suite (tests/python/unit/test_layering.py).

    python scripts/check_layering.py            # exit 1 with the offending files listed
    python scripts/check_layering.py --python   # only the Python package
    python scripts/check_layering.py --cpp      # only csrc/
"""

from __future__ import annotations

import ast
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


# -- Python ----------------------------------------------------------------------------------
# The layers of the fleet package, lowest first (docs/design.md): a module imports only modules
# of its own layer or lower ones, at the top of the file.
PY_LAYERS = ("program", "run", "engines", "facade", "tools")
# The layer of each top-level module or package of fleet/ (every module beneath a package is in
# its layer). A new top-level module is an error until it has a row here.
PY_LAYER_OF = {
    # program: building programs, and the leaves every layer uses
    "_attrs": "program",
    "_blas_kernel": "program",  # OpenBLAS's kernels, named before fleet._core loads it
    "_compat_names": "program",
    "_crash_report": "program",  # the native crash report, installed by `import fleet`
    "_core": "program",  # the compiled core
    "_dtypes": "program",
    "_endpoints": "program",
    "_fluid_api": "program",
    "_tracked": "program",
    "backward": "program",
    "compiler": "program",
    "errors": "program",
    "framework": "program",
    "initializer": "program",
    "layers": "program",
    "model_files": "program",
    "nn": "program",
    "optimizer": "program",
    "param_attr": "program",
    "proto": "program",
    "regularizer": "program",
    "tensor": "program",
    "version": "program",
    # run: running programs in this process, and what a process knows of its job
    "core": "run",  # fluid.core for ported scripts: tensors, scopes, places
    "data_generator": "run",
    "data_parallel": "run",
    "dataset": "run",
    "distributed_strategy": "run",
    "executor": "run",
    "parallel_executor": "run",
    "ps_strategy_configs": "run",
    "role_maker": "run",
    "cluster_env": "run",
    "paddlejob_env": "run",
    "scope": "run",
    "trainer": "run",
    # engines: the distributed runtimes and their program passes
    "collective": "engines",
    "monitoring": "engines",  # live metrics of the engines, started by the facade
    "ps": "engines",
    "transpiler": "engines",
    # facade: the fleet API (`__init__` is the package itself)
    "__init__": "facade",
    "base": "facade",
    "fleet_api": "facade",
    "io": "facade",  # fluid.io: saves through the facade in a PS job
    "static": "facade",  # paddle.static: the API surface a PaddleRec model calls
    # tools: built on the API
    "launch": "tools",
    "metrics": "tools",
    "rec": "tools",
    "run_check": "tools",
    "testing": "tools",
    "utils": "tools",
}
# Function-local imports of fleet modules (importer, imported) allowed, and why; any other is an
# error: an import hidden in a function to dodge a cycle is still a cycle. An entry here may also
# run up the layers (the reason says why that is no cycle).
PY_LOCAL_IMPORTS = {
    ("fleet", "fleet.metrics"): "fleet.metrics is a tool on the facade, offered as Paddle's "
    "fleet.metrics: loaded on first access so that importing the facade imports no tool",
    ("fleet", "fleet.utils"): "the same for fleet.utils (paddle.utils)",
}
PACKAGE = CSRC.parent / "fleet"
# Compiled modules of the package (no .py file to find).
PY_EXTENSIONS = {"fleet._core"}


def py_module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def py_layer(module: str) -> str | None:
    """The layer of a fleet module ("fleet.ps.runtime" is in the row of "ps"), None if its
    top-level name has no row."""
    parts = module.split(".")
    return PY_LAYER_OF.get(parts[1] if len(parts) > 1 else "__init__")


def _py_is_module(name: str) -> bool:
    if name in PY_EXTENSIONS:
        return True
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _py_imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The fleet modules an import statement names (`from fleet import x` names fleet.x when x
    is a module, else fleet itself)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "fleet"]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "fleet":
        return []
    return [
        f"{target}.{a.name}" if _py_is_module(f"{target}.{a.name}") else target for a in node.names
    ]


def py_imports(path: pathlib.Path) -> tuple[set[str], set[str]]:
    """(fleet modules imported at the top of `path`, fleet modules imported inside functions
    only). Imports under `if TYPE_CHECKING:` never run and are left out."""
    module = py_module_name(path)
    is_package = path.name == "__init__.py"
    top: set[str] = set()
    local: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            found = {n for n in _py_imported(child, module, is_package) if n != module}
            (local if in_function else top).update(found)
            function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, in_function or function)

    visit(ast.parse(path.read_text(), str(path)), False)
    return top, local - top


def py_import_graph() -> dict[str, tuple[set[str], set[str]]]:
    """module -> (top-level fleet imports, function-local fleet imports), every module."""
    return {py_module_name(p): py_imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def py_violations() -> list[str]:
    """One line per wrong-way import, unexplained function-local import or module without a
    layer, naming the file."""
    rank = {layer: i for i, layer in enumerate(PY_LAYERS)}
    wrong = []
    for module, (top, local) in py_import_graph().items():
        layer = py_layer(module)
        if layer is None:
            top_name = module.split(".")[1]
            wrong.append(
                f"{module}: fleet/{top_name} has no layer: add a row for '{top_name}' to "
                "PY_LAYER_OF in scripts/check_layering.py"
            )
            continue
        for imported in sorted(top | local):
            if (module, imported) in PY_LOCAL_IMPORTS:
                continue  # explained there
            target = py_layer(imported)
            if target is not None and rank[target] > rank[layer]:
                wrong.append(f"{module} ({layer}) imports {imported} ({target}), a higher layer")
        for imported in sorted(local):
            if (module, imported) not in PY_LOCAL_IMPORTS:
                wrong.append(
                    f"{module} imports {imported} inside a function: import it at the top, or "
                    "say why not in PY_LOCAL_IMPORTS (scripts/check_layering.py)"
                )
    return wrong


def py_cycles() -> list[list[str]]:
    """Cycles among the modules' top-level imports (each as the modules in order)."""
    graph = {m: sorted(top) for m, (top, _) in py_import_graph().items()}
    cycles, state, stack = [], {}, []

    def visit(module: str) -> None:
        state[module] = "open"
        stack.append(module)
        for imported in graph.get(module, []):
            if state.get(imported) == "open":
                cycles.append(stack[stack.index(imported) :] + [imported])
            elif imported not in state:
                visit(imported)
        stack.pop()
        state[module] = "done"

    for module in graph:
        if module not in state:
            visit(module)
    return cycles


def main(argv: list[str]) -> int:
    check_cpp, check_python = "--python" not in argv, "--cpp" not in argv
    failed = False
    if check_cpp:
        wrong, unknown = violations(), unknown_layers()
        for edge, files in wrong.items():
            print(
                f"layering: {edge} is not allowed (docs/design.md): {', '.join(files)}",
                file=sys.stderr,
            )
        if unknown:
            print(
                f"layering: folders of csrc/ missing from scripts/check_layering.py: "
                f"{sorted(unknown)}",
                file=sys.stderr,
            )
        failed = bool(wrong or unknown)
    if check_python:
        for line in py_violations():
            print(f"layering: {line}", file=sys.stderr)
        for cycle in py_cycles():
            print(f"layering: import cycle {' -> '.join(cycle)}", file=sys.stderr)
        failed = failed or bool(py_violations() or py_cycles())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
