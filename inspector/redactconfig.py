"""Reading redaction rules (the format is in inspector.redact's docstring): from the dashboard config's
[redaction] table, a TOML file of their own, or a setting naming either; every bad setting is an
InvalidArgumentError that names it."""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from asynqpy.errors import InvalidArgumentError
from inspector.redact import DEFAULT_KEYS, PARTS, ROLES, Hook, Policy, Rule, norm_key


def _check_role(value: Any, where: str) -> str:
    if value not in ROLES:
        raise InvalidArgumentError(f"{where}: reveal_to must be one of {', '.join(ROLES)}, got {value!r}",
                                   argument="reveal_to")
    return str(value)


def _load_hook(spec: Any, where: str) -> Hook:
    """The function named "module:function". Raises InvalidArgumentError naming what is wrong."""
    if not isinstance(spec, str) or ":" not in spec:
        raise InvalidArgumentError(f"{where}: hook must be 'module:function', got {spec!r}", argument="hook")
    mod, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgumentError(f"{where}: cannot load hook {spec!r}: {exc}", argument="hook") from None
    if not callable(fn):
        raise InvalidArgumentError(f"{where}: hook {spec!r} is not callable", argument="hook")
    return fn  # type: ignore[no-any-return]


def _rule(pattern: str, data: Any, reveal_to: str) -> Rule:
    where = f"redaction rule {pattern!r}"
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"{where} must be a table", argument="types")
    unknown = set(data) - {"fields", "headers", "reveal_to", "hook"}
    if unknown:
        raise InvalidArgumentError(f"{where}: unknown setting(s) {', '.join(sorted(unknown))}", argument="types")
    fields = []
    for path in _strings(data.get("fields", ()), f"{where}: fields"):
        segs = tuple(path.split("."))
        if segs[0] not in PARTS:
            segs = ("payload", *segs)
        if len(segs) < 2 or not all(segs):
            raise InvalidArgumentError(f"{where}: field path {path!r} is empty or has an empty part",
                                       argument="fields")
        fields.append((segs[0], segs[1:]))
    headers = frozenset(h.lower() for h in _strings(data.get("headers", ()), f"{where}: headers"))
    hook = _load_hook(data["hook"], where) if data.get("hook") else None
    return Rule(pattern, _check_role(data.get("reveal_to", reveal_to), where), tuple(fields), headers, hook)


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
            isinstance(v, str) and v for v in value):
        raise InvalidArgumentError(f"{where} must be a list of non-empty strings", argument="redaction")
    return list(value)


def from_mapping(data: Mapping[str, Any] | None) -> Policy:
    """A Policy from the [redaction] table's contents (None or {}: the default). Raises
    InvalidArgumentError naming the bad setting."""
    data = dict(data or {})
    unknown = set(data) - {"reveal_to", "default", "keys", "non_json", "hook", "types"}
    if unknown:
        raise InvalidArgumentError(f"redaction: unknown setting(s) {', '.join(sorted(unknown))}",
                                   argument="redaction")
    reveal_to = _check_role(data.get("reveal_to", "admin"), "redaction")
    if not isinstance(data.get("default", True), bool):
        raise InvalidArgumentError("redaction: default must be true or false", argument="default")
    keys = (DEFAULT_KEYS if data.get("default", True) else ()) + tuple(
        norm_key(k) for k in _strings(data.get("keys", []) or [], "redaction: keys") if norm_key(k))
    non_json = data.get("non_json", "show")
    if non_json not in ("show", "hide"):
        raise InvalidArgumentError(f"redaction: non_json must be show or hide, got {non_json!r}",
                                   argument="non_json")
    types = data.get("types", {})
    if not isinstance(types, Mapping):
        raise InvalidArgumentError("redaction: types must be a table of task types", argument="types")
    rules = tuple(_rule(str(p), r, reveal_to) for p, r in types.items())
    hook = _load_hook(data["hook"], "redaction") if data.get("hook") else None
    return Policy(rules, keys, reveal_to, non_json, hook)

def from_file(path: str | Path) -> Policy:
    """A Policy from a TOML file: its [redaction] table, or the whole file when it has none. Raises
    InvalidArgumentError for a file that cannot be read or a bad setting."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArgumentError(f"cannot read the redaction rules {path}: {exc}", argument="redaction") \
            from None
    return from_mapping(data.get("redaction", data))

def from_setting(value: Any) -> Policy:
    """From a dashboard setting: a mapping (a config file's table), a path to a TOML file, or None."""
    if value is None or value == "":
        return Policy()
    if isinstance(value, Mapping):
        return from_mapping(value)
    if isinstance(value, (str, Path)):
        return from_file(value)
    raise InvalidArgumentError(f"redaction must be a table or a file path, not {type(value).__name__}",
                               argument="redaction")
