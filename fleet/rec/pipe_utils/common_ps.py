"""PaddleRec's `common_ps` helper (the parameter-server readers import this name): the same as
`common`."""

from common import YamlHelper, load_yaml  # noqa: F401 - this folder is on the reader's path
