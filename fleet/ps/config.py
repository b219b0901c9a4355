"""Typed configuration of parameter servers: ``ServerConfig`` and ``TableConfig`` messages of
``csrc/ps/ps.proto``, built from protobuf messages or from structured dicts of the same shape.

A table as a dict::

    {"table_id": 1, "name": "emb", "type": "SPARSE", "dim": 8,
     "optimizer": {"learning_rate": 0.05, "adam": {"beta1": 0.9}},
     "initializer": {"seed": 7, "uniform": {"low": -0.1, "high": 0.1}},
     "count_filter": {"min_count": 2}}
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence, Union

from google.protobuf import json_format
from google.protobuf.message import DecodeError

from fleet.errors import InvalidArgument, NotFound
from fleet.proto import ps_pb2

TableLike = Union[ps_pb2.TableConfig, Mapping[str, Any]]


def table_config(table: TableLike) -> ps_pb2.TableConfig:
    """A TableConfig from a message (copied) or a dict; unknown fields raise InvalidArgument."""
    if isinstance(table, ps_pb2.TableConfig):
        out = ps_pb2.TableConfig()
        out.CopyFrom(table)
        return out
    try:
        return json_format.ParseDict(dict(table), ps_pb2.TableConfig())
    except json_format.ParseError as e:
        raise InvalidArgument(f"table config {dict(table)!r}: {e}") from None


def server_config(
    server_index: int, num_servers: int, tables: Sequence[TableLike]
) -> ps_pb2.ServerConfig:
    """The config of server ``server_index`` of ``num_servers`` holding ``tables``."""
    if not 0 <= server_index < num_servers:
        raise InvalidArgument(f"server_index {server_index} is not in [0, {num_servers})")
    config = ps_pb2.ServerConfig(server_index=server_index, num_servers=num_servers)
    for table in tables:
        config.tables.append(table_config(table))
    return config


def write_server_config(config: ps_pb2.ServerConfig, path: str) -> None:
    """Writes ``config`` as JSON (for ``python -m fleet.ps.server --config``), atomically."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json_format.MessageToJson(config))
    os.replace(tmp, path)


def read_server_config(path: str) -> ps_pb2.ServerConfig:
    """Reads a config written as JSON (``.json``) or as a binary message (anything else).
    NotFound or InvalidArgument naming the file when it is missing or holds no ServerConfig."""
    try:
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                config = json_format.Parse(f.read(), ps_pb2.ServerConfig())
        else:
            with open(path, "rb") as f:
                data = f.read()
            config = ps_pb2.ServerConfig.FromString(data)
            # Random bytes often parse as unknown fields; a real config has none.
            known = ps_pb2.ServerConfig()
            known.CopyFrom(config)
            known.DiscardUnknownFields()
            if known.ByteSize() != config.ByteSize():
                raise InvalidArgument("holds bytes that are no ServerConfig fields")
    except FileNotFoundError:
        raise NotFound(f"server config {path} does not exist") from None
    except (json_format.ParseError, DecodeError, ValueError) as e:
        raise InvalidArgument(f"server config {path} is not a ServerConfig: {e}") from None
    if config.num_servers == 0 or not config.tables:
        raise InvalidArgument(
            f"server config {path} is not a ServerConfig: no num_servers or no tables"
        )
    return config


__all__ = ["server_config", "table_config", "write_server_config", "read_server_config"]
