"""Prints which fleet modules each module of the Python package imports, read from the source
(nothing is imported). Each line is `module -> imported fleet modules`; imports made inside a
function (not at the top of the file) are listed after `local:`.

    python scripts/import_graph.py            # every module
    python scripts/import_graph.py --local    # only modules with function-local fleet imports
"""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fleet"
# Compiled modules of the package (no .py file to find).
EXTENSIONS = {"fleet._core"}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The fleet modules an import statement names (`from fleet import x` names fleet.x when x
    is a module, else fleet)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "fleet"]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".")
        base = base if is_package else base[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "fleet":
        return []
    names = []
    for alias in node.names:
        candidate = f"{target}.{alias.name}"
        names.append(candidate if _is_module(candidate) else target)
    return names


def _is_module(name: str) -> bool:
    if name in EXTENSIONS:
        return True
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(path: pathlib.Path) -> tuple[set[str], set[str]]:
    """(fleet modules imported at module level, fleet modules imported inside functions).
    Imports under `if TYPE_CHECKING:` are left out: they never run."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    top: set[str] = set()
    local: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue
            nested = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            found = _imported(child, module, is_package)
            (local if in_function else top).update(n for n in found if n != module)
            visit(child, nested)

    visit(tree, False)
    return top, local - top


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def graph() -> dict[str, tuple[set[str], set[str]]]:
    """module -> (top-level fleet imports, function-local fleet imports), for every module."""
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def main(argv: list[str]) -> int:
    only_local = "--local" in argv
    for module, (top, local) in graph().items():
        if only_local and not local:
            continue
        line = f"{module} -> {', '.join(sorted(top)) or '-'}"
        if local:
            line += f"   local: {', '.join(sorted(local))}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
