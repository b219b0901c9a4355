"""Reading a checkpoint directory written by ``PsClient.save``: its manifest (which saves, which
part files, their sizes and checksums). The format is described in ``csrc/ps/checkpoint.h``;
this module is for tools and tests that inspect a checkpoint, e.g. to find whether a directory
holds a complete save before restarting a job from it."""

from __future__ import annotations

import os
from typing import List

from google.protobuf import json_format

from fleet.errors import InvalidArgument, NotFound
from fleet.proto import ps_pb2

MANIFEST_NAME = "ps_manifest.json"


def read_manifest(dirname: str) -> ps_pb2.CheckpointManifest:
    """The committed manifest of ``dirname``; NotFound when no save into it completed."""
    path = os.path.join(os.fspath(dirname), MANIFEST_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise NotFound(f"no checkpoint in {dirname}: {MANIFEST_NAME} is missing") from None
    try:
        return json_format.Parse(text, ps_pb2.CheckpointManifest())
    except json_format.ParseError as e:
        raise InvalidArgument(f"{path} is not a checkpoint manifest: {e}") from None


def part_paths(dirname: str, table_id: int) -> List[str]:
    """Absolute paths of the part files of ``table_id`` in load order (base, then deltas)."""
    manifest = read_manifest(dirname)
    for table in manifest.tables:
        if table.table_id == table_id:
            return [
                os.path.join(os.fspath(dirname), f.path) for save in table.saves for f in save.files
            ]
    raise NotFound(f"no saved parts of table {table_id} in checkpoint {dirname}")


__all__ = ["MANIFEST_NAME", "part_paths", "read_manifest"]
