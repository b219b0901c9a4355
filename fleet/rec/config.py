"""A PaddleRec 2.x `config.yaml`, loaded, resolved and checked against `fleet.rec.schema`.

    config = load_config("models/rank/dnn/config.yaml")
    config.get("hyper_parameters.optimizer.learning_rate")   # PaddleRec's dotted keys

What loading does, in order:
1. parses the file with PyYAML, keeping each key's line (a syntax error names file and line);
2. applies `-o section.key=value` overrides from the command line;
3. replaces `${section.key}` references in string values by that key's value (a whole-string
   reference keeps the referenced value's type);
4. checks every key against the schema: an unknown key, a value of the wrong type or a missing
   required key raises `ConfigError` naming the key, the file and its line; a key Fleet accepts
   but does not act on is listed in `config.notices` (the trainers print each once);
5. makes the data and reader paths absolute against the config's folder, as PaddleRec's tools
   do (`model_save_path` and `model_init_path` stay relative to the working directory, as
   there).
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Any, Iterator, Mapping, Sequence

import yaml

from fleet.errors import InvalidArgument
from fleet.rec import schema

_REFERENCE = re.compile(r"\$\{([^}]+)\}")
_MAX_REFERENCE_DEPTH = 16


class ConfigError(InvalidArgument):
    """A config.yaml that cannot be used; the message starts with `file:line: key:`."""


class Config(Mapping[str, Any]):
    """The loaded config: a read-only mapping from PaddleRec's dotted keys to values.

    `get("runner.epochs")` returns a leaf; `get("hyper_parameters.optimizer")` the section as a
    dict. `config["config_abs_dir"]` and `config["yaml_path"]` are there as PaddleRec's trainers
    set them, for readers written against them.
    """

    def __init__(
        self, path: str, tree: dict[str, Any], lines: dict[str, int], notices: list[str]
    ) -> None:
        self.path = os.path.abspath(path)
        self.folder = os.path.dirname(self.path)
        self.tree = tree
        self.lines = lines
        self.notices = notices
        self._flat = dict(_flatten(tree))
        self._flat["config_abs_dir"] = self.folder
        self._flat["yaml_path"] = self.path

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._flat:
            return self._flat[key]
        node: Any = self.tree
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def __getitem__(self, key: str) -> Any:
        missing = object()
        value = self.get(key, missing)
        if value is missing:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._flat)

    def __len__(self) -> int:
        return len(self._flat)

    def where(self, key: str) -> str:
        """`file:line` of a key, for messages about its value."""
        return _where(self.path, self.lines, key)


def _where(path: str, lines: dict[str, int], key: str, default: Any = "?") -> str:
    """`file:line` of a key; a key set by a `-o` override says so (its line is 0)."""
    line = lines.get(key, default)
    return f"{path} (-o {key} on the command line)" if line == 0 else f"{path}:{line}"


def load_config(path: str, overrides: Sequence[str] = ()) -> Config:
    """Loads, resolves and checks `path` (see the module docstring); raises ConfigError."""
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: no such config file")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tree, lines = _parse(path, text)
    _apply_overrides(path, tree, lines, overrides)
    _resolve_references(path, tree, lines)
    notices = _check(path, tree, lines)
    _absolutise_paths(os.path.dirname(os.path.abspath(path)), tree)
    return Config(path, tree, lines, notices)


def _parse(path: str, text: str) -> tuple[dict[str, Any], dict[str, int]]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        tree = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None
    if tree is None:
        raise ConfigError(f"{path}:1: the file is empty; it needs runner: and hyper_parameters:")
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}:1: the top level must be a mapping of sections")
    lines: dict[str, int] = {}
    _collect_lines(path, node, "", lines)
    return tree, lines


def _collect_lines(path: str, node: yaml.Node, prefix: str, lines: dict[str, int]) -> None:
    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        key = f"{prefix}{key_node.value}"
        line = key_node.start_mark.line + 1
        if key in lines:
            raise ConfigError(
                f"{path}:{line}: {key}: duplicate key (first given on line {lines[key]})"
            )
        lines[key] = line
        _collect_lines(path, value_node, key + ".", lines)


def _flatten(tree: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _lookup(tree: dict[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _apply_overrides(
    path: str, tree: dict[str, Any], lines: dict[str, int], overrides: Sequence[str]
) -> None:
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"-o {item!r}: an override is section.key=value")
        value = yaml.safe_load(raw) if raw else ""
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"-o {item!r}: {part} is not a section of {path}")
        node[parts[-1]] = value
        lines[key] = 0  # line 0: given on the command line


def _resolve_references(path: str, tree: dict[str, Any], lines: dict[str, int]) -> None:
    def resolve(key: str, value: Any, depth: int) -> Any:
        if not isinstance(value, str) or "${" not in value:
            return value
        if depth > _MAX_REFERENCE_DEPTH:
            raise ConfigError(f"{_where(path, lines, key)}: {key}: references form a cycle")

        def target(name: str) -> Any:
            found, referenced = _lookup(tree, name)
            if not found or isinstance(referenced, dict):
                raise ConfigError(
                    f"{_where(path, lines, key)}: {key}: ${{{name}}} names no key of the config"
                )
            return resolve(name, referenced, depth + 1)

        whole = _REFERENCE.fullmatch(value)
        if whole:
            return target(whole.group(1).strip())
        return _REFERENCE.sub(lambda m: str(target(m.group(1).strip())), value)

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, value in node.items():
            key = f"{prefix}{name}"
            if isinstance(value, dict):
                walk(value, key + ".")
            elif isinstance(value, list):
                node[name] = [resolve(key, v, 0) for v in value]
            else:
                node[name] = resolve(key, value, 0)

    walk(tree, "")


def _check(path: str, tree: dict[str, Any], lines: dict[str, int]) -> list[str]:
    notices: list[str] = []
    _check_section(path, tree, "", schema.TOP_LEVEL, lines, notices)
    _check_section(path, tree["runner"], "runner.", schema.RUNNER, lines, notices)
    hyper = tree["hyper_parameters"]
    if "optimizer" not in hyper:
        raise ConfigError(
            f"{_where(path, lines, 'hyper_parameters')}: hyper_parameters.optimizer: "
            "missing required key (class, learning_rate)"
        )
    optimizer = hyper["optimizer"]
    key = "hyper_parameters.optimizer"
    if not isinstance(optimizer, dict):
        raise ConfigError(f"{_where(path, lines, key)}: {key}: must be a mapping of keys")
    _check_section(path, optimizer, key + ".", schema.OPTIMIZER, lines, notices)
    return notices


def _check_section(
    path: str,
    section: Any,
    prefix: str,
    specs: dict[str, schema.KeySpec],
    lines: dict[str, int],
    notices: list[str],
) -> None:
    section_key = prefix.rstrip(".")
    if not isinstance(section, dict):
        raise ConfigError(
            f"{_where(path, lines, section_key)}: {section_key}: must be a mapping of keys"
        )
    for name, value in section.items():
        key = f"{prefix}{name}"
        where = _where(path, lines, key)
        spec = specs.get(str(name))
        if spec is None:
            close = difflib.get_close_matches(str(name), list(specs), n=1)
            hint = (
                f" (did you mean {prefix}{close[0]}?)"
                if close
                else f"; the keys of {section_key or 'the top level'} are {', '.join(specs)}"
            )
            raise ConfigError(f"{where}: {key}: unknown key{hint}")
        if value is None and not spec.required:
            continue  # `key:` with nothing after it: PaddleRec treats it as unset
        if not schema.kind_matches(spec.kind, value):
            raise ConfigError(
                f"{where}: {key}: must be {schema.KIND_WORDS[spec.kind]}, got "
                f"{type(value).__name__} {value!r}"
            )
        if spec.choices and value not in spec.choices:
            raise ConfigError(f"{where}: {key}: {value!r} is not one of {', '.join(spec.choices)}")
        if not spec.acted:
            notices.append(f"{where}: {key} is accepted but not acted on: {spec.why}")
    for name, spec in specs.items():
        if spec.required and section.get(name) is None:
            where = _where(path, lines, section_key, 1)
            raise ConfigError(f"{where}: {prefix}{name}: missing required key")


def _absolutise_paths(folder: str, tree: dict[str, Any]) -> None:
    for section, specs in (("", schema.TOP_LEVEL), ("runner", schema.RUNNER)):
        node = tree if not section else tree[section]
        for name, spec in specs.items():
            value = node.get(name)
            if spec.config_relative and isinstance(value, str) and value:
                node[name] = os.path.normpath(os.path.join(folder, value))
