"""Helpers that PaddleRec's pipe_command readers import by name (`common`, `common_ps`): the
trainers put this folder on a reader's command line, as PaddleRec puts its tools/utils there."""
