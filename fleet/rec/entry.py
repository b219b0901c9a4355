"""What the config-driven trainers share at start: the command line (`-m config.yaml`,
`-o key=value`), the loaded config with its notices printed, and the model's metrics dict."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Sequence

from fleet.errors import FleetError, InvalidArgument
from fleet.rec.config import Config, load_config
from fleet.rec.model_loader import check_supported


def parse_args(argv: Sequence[str] | None, description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-m", "--config_yaml", required=True, help="the model's config.yaml")
    parser.add_argument(
        "-o",
        "--opt",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override config keys, e.g. -o runner.epochs=1 runner.train_batch_size=64",
    )
    return parser.parse_args(argv)


def prepare(argv: Sequence[str] | None, description: str) -> Config:
    """Parses the command line and loads the config; prints each accepted-but-unused key once."""
    args = parse_args(argv, description)
    config = load_config(args.config_yaml, args.opt)
    check_supported(config)
    for notice in config.notices:
        print(f"notice: {notice}", flush=True)
    return config


def metrics_of(fetched: Any, config: Config, method: str) -> dict[str, Any]:
    """The metrics dict a model's net() / infer_net() returned, checked."""
    if not isinstance(fetched, dict) or not fetched:
        raise InvalidArgument(
            f"{config.folder}/static_model.py: {method}() must return a dict of metric name -> "
            f"variable, got {type(fetched).__name__}"
        )
    return dict(fetched)


def run_main(
    argv: Sequence[str] | None,
    description: str,
    run: Callable[[Config], Any],
    program: str,
    done: str,
) -> int:
    """A trainer's command: loads the config, runs it, prints `done` with the time taken; a
    FleetError is printed naming `program` and gives exit status 2."""
    start = time.perf_counter()
    try:
        run(prepare(argv, description))
    except FleetError as e:
        print(f"{program}: error: {e}", file=sys.stderr, flush=True)
        return 2
    print(f"{done} in {time.perf_counter() - start:.1f} s", flush=True)
    return 0
