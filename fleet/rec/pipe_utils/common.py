"""PaddleRec's `common` helper for pipe_command readers: a reader script run by a QueueDataset
gets the config's path and this folder as its two arguments and does

    sys.path.append(sys.argv[2]); import common
    config = common.YamlHelper().load_yaml(sys.argv[1])

This module answers that with Fleet's config loader (fleet.rec.config)."""

from __future__ import annotations

from fleet.rec.config import Config, load_config


class YamlHelper:
    def load_yaml(self, yaml_file: str, other_part: object = None) -> Config:
        return load_config(yaml_file)


def load_yaml(yaml_file: str) -> Config:
    return load_config(yaml_file)
