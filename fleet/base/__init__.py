"""The fleet facade and its parts: endpoints, the worker utilities (UtilBase) and Fleet."""
