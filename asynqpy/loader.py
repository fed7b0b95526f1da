"""Turns command-line text into what a worker runs: "app.tasks:mux" into a ServeMux, "a=6,b" into queue weights."""

from __future__ import annotations

import importlib
import sys

from asynqpy.errors import UsageError
from asynqpy.mux import ServeMux


def load_mux(spec: str) -> ServeMux:
    """Import "package.module:attribute" and return the ServeMux there (calling a factory function if needed).

    Raises UsageError when the spec is malformed, the module itself is not found, the attribute is missing
    or not a ServeMux, or the mux has no handler at all (a worker would fail every task, burning its retries).
    An exception raised by the module's own code while it imports (including an import of something it needs
    that is not installed) propagates unchanged: it is the user's bug and needs its traceback.
    """
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise UsageError(f"expected module:attribute (e.g. app.tasks:mux), got {spec!r}")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        if not _is_the_module_itself(exc, mod_name):
            raise
        raise UsageError(f"cannot import {mod_name!r}: {exc} (run from the directory that holds it, "
                         "or add that directory to PYTHONPATH)") from exc
    obj = getattr(mod, attr, None)
    if obj is None:
        raise UsageError(f"module {mod_name!r} has no attribute {attr!r}")
    if callable(obj) and not isinstance(obj, ServeMux):
        obj = obj()
    if not isinstance(obj, ServeMux):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a ServeMux")
    if not obj.serves_anything():
        raise UsageError(f"{spec} has no handlers: a worker would fail every task with \"handler not found\" "
                         "(register some with @mux.task(...) or mux.handle(pattern, fn))")
    return obj


def _is_the_module_itself(exc: ModuleNotFoundError, mod_name: str) -> bool:
    """True when the missing module is mod_name or one of its parent packages (not something it imports)."""
    parts = mod_name.split(".")
    return exc.name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def parse_queues(text: str) -> dict[str, int]:
    """"critical=6,default=3,low" -> {"critical": 6, "default": 3, "low": 1}. Raises UsageError."""
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, prio = part.strip().partition("=")
        if not name:
            raise UsageError(f"empty queue name in --queues {text!r}")
        try:
            out[name] = int(prio) if prio else 1
        except ValueError as exc:
            raise UsageError(f"priority of queue {name!r} must be a whole number, got {prio!r}") from exc
        if out[name] < 1:
            raise UsageError(f"priority of queue {name!r} must be at least 1, got {prio!r}")
    return out
