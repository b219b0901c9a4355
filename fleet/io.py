"""`fluid.io` for ported scripts: saving and loading variables and inference models.

In one process and in a collective job (every rank holds every parameter) these read and write
the global scope's values (`executor` is accepted for Paddle's signatures; the values are the
scope's). A caller writes; in a collective job, call them from the first worker (or from every
worker: each writes the same values, and every file is replaced atomically).

In a parameter-server job the parameters live on the servers, so the whole-model calls go to the
facade: `save_persistables` / `save_params` are `fleet.save_persistables` (the servers' tables and
the worker's own persistables), `load_persistables` / `load_params` are `fleet.load_model`,
`save_inference_model` is `fleet.save_inference_model` (the sparse rows exported with the
program). `save_vars` / `load_vars` of named variables read and write the worker's scope and
refuse a variable that lives on the servers, naming it.

Formats: fleet/model_files.py (`fleet.load_inference_model` and `load_inference_model` here read
the same directories).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from fleet import fleet_api, model_files
from fleet._compat_names import missing_name_hook
from fleet.errors import InvalidArgument
from fleet.framework import Parameter, Program, Variable, default_main_program
from fleet.scope import global_scope


def _ps_job() -> bool:
    """Whether this process's parameters live on parameter servers (a PS job after minimize)."""
    return fleet_api.instance.parameters_on_servers()


def _server_params() -> set[str]:
    plan = fleet_api.instance.ps_plan
    if plan is None or not _ps_job():
        return set()
    return {s.param for s in plan.sparse}


def _selected(
    program: Optional[Program],
    vars: Optional[Sequence[Any]],
    predicate: Optional[Callable[[Variable], bool]],
    what: str,
) -> list[str]:
    program = program if program is not None else default_main_program()
    if vars is not None:
        names = [getattr(v, "name", v) for v in vars]
    else:
        keep = predicate if predicate is not None else model_files.saveable
        names = [v.name for v in program.list_vars() if model_files.saveable(v) and keep(v)]
    served = sorted(_server_params() & set(names))
    if served:
        raise InvalidArgument(
            f"fleet.io.{what}: {served} live on the parameter servers (sparse tables), not in "
            "this worker's scope: use fleet.save_persistables / fleet.load_model for them"
        )
    return sorted(dict.fromkeys(names))


def _is_parameter(var: Variable) -> bool:
    return isinstance(var, Parameter)


def save_vars(
    executor: Any,
    dirname: str,
    main_program: Optional[Program] = None,
    vars: Optional[Sequence[Any]] = None,
    predicate: Optional[Callable[[Variable], bool]] = None,
    filename: Optional[str] = None,
) -> None:
    """Saves `vars` (or the program's persistables that `predicate` keeps) into `dirname`: one
    file per variable, or all in `filename`."""
    dirname = model_files.check_directory(dirname, "fleet.io.save_vars")
    names = _selected(main_program, vars, predicate, "save_vars")
    arrays = model_files.values_of(global_scope(), names, "fleet.io.save_vars")
    model_files.save_arrays(dirname, arrays, filename)


def load_vars(
    executor: Any,
    dirname: str,
    main_program: Optional[Program] = None,
    vars: Optional[Sequence[Any]] = None,
    predicate: Optional[Callable[[Variable], bool]] = None,
    filename: Optional[str] = None,
) -> None:
    """Sets `vars` (or the program's persistables that `predicate` keeps) from `dirname`."""
    names = _selected(main_program, vars, predicate, "load_vars")
    arrays = model_files.load_arrays(dirname, names, filename)
    model_files.set_values(global_scope(), arrays, str(dirname))


def save_params(
    executor: Any,
    dirname: str,
    main_program: Optional[Program] = None,
    filename: Optional[str] = None,
) -> None:
    """Saves the program's parameters (in a PS job: fleet.save_persistables)."""
    if _ps_job():
        fleet_api.save_persistables(executor, dirname, main_program)
        return
    save_vars(executor, dirname, main_program, predicate=_is_parameter, filename=filename)


def load_params(
    executor: Any,
    dirname: str,
    main_program: Optional[Program] = None,
    filename: Optional[str] = None,
) -> None:
    """Loads what save_params saved (in a PS job: fleet.load_model, every worker)."""
    if _ps_job():
        fleet_api.load_model(dirname)
        return
    load_vars(executor, dirname, main_program, predicate=_is_parameter, filename=filename)


def save_persistables(
    executor: Any,
    dirname: str,
    main_program: Optional[Program] = None,
    filename: Optional[str] = None,
) -> None:
    """Saves every persistable variable of the program: parameters, optimizer state, metric
    accumulators (in a PS job: fleet.save_persistables)."""
    if _ps_job():
        fleet_api.save_persistables(executor, dirname, main_program)
        return
    save_vars(executor, dirname, main_program, filename=filename)


def load_persistables(
    executor: Any,
    dirname: str,
    main_program: Optional[Program] = None,
    filename: Optional[str] = None,
) -> None:
    """Loads what save_persistables saved (in a PS job: fleet.load_model, every worker)."""
    if _ps_job():
        fleet_api.load_model(dirname)
        return
    load_vars(executor, dirname, main_program, filename=filename)


def save_inference_model(
    dirname: str,
    feeded_var_names: Sequence[str],
    target_vars: Sequence[Any],
    executor: Any,
    main_program: Optional[Program] = None,
    model_filename: Optional[str] = None,
    params_filename: Optional[str] = None,
    export_for_deployment: bool = True,
    program_only: bool = False,
) -> list[str]:
    """Writes the program pruned to `target_vars` and the values it reads, for
    load_inference_model / fleet.load_inference_model. Returns the target names."""
    dirname = model_files.check_directory(dirname, "fleet.io.save_inference_model")
    if isinstance(feeded_var_names, str):
        feeded_var_names = [feeded_var_names]
    if not isinstance(target_vars, (list, tuple)):
        target_vars = [target_vars]
    targets = [getattr(v, "name", v) for v in target_vars]
    if not export_for_deployment:
        raise InvalidArgument(
            "fleet.io.save_inference_model: export_for_deployment=False (a program that keeps "
            "its feed and fetch ops) is not supported; the exported program takes feeds by name"
        )
    if _ps_job():
        fleet_api.save_inference_model(
            executor, dirname, list(feeded_var_names), targets, main_program
        )
        return targets
    program = main_program if main_program is not None else default_main_program()
    model_files.export_scope_model(
        dirname,
        program,
        list(feeded_var_names),
        targets,
        global_scope(),
        model_filename,
        params_filename,
        program_only,
    )
    return targets


def load_inference_model(
    dirname: str,
    executor: Any,
    model_filename: Optional[str] = None,
    params_filename: Optional[str] = None,
    pserver_endpoints: Optional[Sequence[str]] = None,
) -> list[Any]:
    """[program, fed names, target variables] of a model save_inference_model (here or
    fleet.save_inference_model) wrote, with its values set in the global scope."""
    if pserver_endpoints is not None:
        raise InvalidArgument(
            "fleet.io.load_inference_model: pserver_endpoints is not supported: an exported "
            "model holds its sparse rows and needs no server"
        )
    program, feeds, fetches = model_files.read_inference_model(
        dirname, global_scope(), model_filename, params_filename
    )
    return [program, feeds, fetches]


class IterableDataset:
    """paddle.io.IterableDataset, the base of PaddleRec's DataLoader readers (`class
    RecDataset(IterableDataset)`): a subclass yields samples from `__iter__`. Fleet's
    config-driven trainers (fleet.rec) batch them; nothing else is needed of the base."""

    def __iter__(self):  # noqa: ANN204
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


__getattr__ = missing_name_hook("fleet.io")

__all__ = [
    "IterableDataset",
    "load_inference_model",
    "load_params",
    "load_persistables",
    "load_vars",
    "save_inference_model",
    "save_params",
    "save_persistables",
    "save_vars",
]
