"""Loads the Inspector's own Lua scripts (inspector/lua/<name>.lua, with their fragments) as asynqpy Scripts."""

from __future__ import annotations

from functools import cache

from asynqpy.rdb.scripts import Script, load_script


@cache
def script(name: str) -> Script:
    """The script inspector/lua/<name>.lua. Raises FileNotFoundError for an unknown name."""
    return load_script("inspector", name)
