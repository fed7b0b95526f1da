"""Loads the Inspector's own Lua scripts (inspector/lua/<name>.lua) as asynqpy Script objects."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

from asynqpy.rdb.scripts import Script


@cache
def script(name: str) -> Script:
    """The script inspector/lua/<name>.lua. Raises FileNotFoundError for an unknown name."""
    text = resources.files("inspector").joinpath("lua", f"{name}.lua").read_text()
    return Script(name, text, hashlib.sha1(text.encode()).hexdigest())
