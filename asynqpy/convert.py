"""JSON forms of annotated types: encode() for producers, fit() to check and convert on the worker side.

The forms are the ones Go's encoding/json reads and writes, so a Go struct with matching `json` tags
round-trips them: datetime as RFC 3339 (`Z` for UTC, fraction without trailing zeros, as Go's time.Time),
date as YYYY-MM-DD, UUID as its string, Decimal as a string, bytes as standard base64 (Go's []byte), an enum
as its value, a dataclass or pydantic model as an object of its fields, lists, tuples and sets as arrays,
mappings with str keys as objects. pydantic is used only when it is importable.
"""

from __future__ import annotations

import base64
import binascii
import collections.abc as abc
import dataclasses
import enum
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin
from uuid import UUID


class Mismatch(Exception):
    """A value does not fit: path names where (e.g. `order.lines[2].qty`), the message says how."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@cache
def _pydantic_base() -> type | None:
    try:
        from pydantic import BaseModel
    except ImportError:
        return None
    return BaseModel


def _is_model(tp: Any) -> bool:
    base = _pydantic_base()
    return base is not None and isinstance(tp, type) and issubclass(tp, base)


def go_time(value: datetime) -> str:
    """RFC 3339 as Go's time.Time writes it: Z for UTC, the fraction without trailing zeros."""
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    off = value.utcoffset() or timedelta(0)
    if not off:
        return text + "Z"
    sign, off = ("-", -off) if off < timedelta(0) else ("+", off)
    minutes = int(off.total_seconds()) // 60
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def encode(value: Any, path: str) -> Any:
    """The JSON form of value (made of dict, list, str, int, float, bool, None). Raises Mismatch for a value
    that has none: a naive datetime, NaN or infinity, a mapping with non-str keys, an unknown type."""
    if value is None or (isinstance(value, (bool, str)) and not isinstance(value, enum.Enum)):
        return value
    if isinstance(value, enum.Enum):
        return encode(value.value, path)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Mismatch(path, f"{value} is not a finite number (JSON has no NaN or infinity)")
        return value
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise Mismatch(path, "a naive datetime has no JSON form a Go time.Time reads; give it a tzinfo")
        return go_time(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name), f"{path}.{f.name}") for f in dataclasses.fields(value)}
    if _is_model(type(value)):
        return value.model_dump(mode="json", by_alias=True)  # an alias is the name on the wire, as a json tag
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise Mismatch(path, f"mapping key {k!r} is not a str (JSON object keys are strings)")
            out[k] = encode(v, f"{path}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [encode(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        items = [encode(v, f"{path}[{i}]") for i, v in enumerate(value)]
        try:
            return sorted(items)
        except TypeError:
            return items
    raise Mismatch(path, f"a value of type {type(value).__name__} has no JSON form")


def json_kind(value: Any) -> str:
    """How JSON names the kind of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def type_name(tp: Any) -> str:
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    if isinstance(tp, typing.NewType):
        return tp.__name__
    return str(tp).replace("typing.", "")


def unresolved(tp: Any) -> str | None:
    """Why values of the annotation tp could never be converted because a type inside it (a dataclass,
    TypedDict or NamedTuple at any depth) has annotations that do not resolve, e.g. a name defined nowhere
    the class's module can see; None when every one resolves. Recursive types are walked once."""
    seen: set[int] = set()

    def walk(t: Any) -> str | None:
        if id(t) in seen:
            return None
        seen.add(id(t))
        origin = get_origin(t)
        if origin is Literal:  # its arguments are values, not types
            return None
        nested = list(get_args(t))
        if origin is not None:
            nested.append(origin)
        if isinstance(t, typing.NewType):
            nested.append(t.__supertype__)
        if isinstance(t, type) and (dataclasses.is_dataclass(t) or typing.is_typeddict(t)
                                    or (issubclass(t, tuple) and hasattr(t, "_fields"))):
            try:
                nested.extend(typing.get_type_hints(t, include_extras=True).values())
            except Exception as exc:
                return f"the annotations of {t.__qualname__} do not resolve: {exc}"
        for n in nested:
            why = walk(n)
            if why is not None:
                return why
        return None
    return walk(tp)


def fit(value: Any, tp: Any, path: str) -> Any:
    """value (decoded JSON) checked against the annotation tp and converted to it. Raises Mismatch naming the
    path. An absent annotation (inspect's empty, Any, object) takes any JSON value as it is."""
    if tp is Any or tp is object or tp is inspect.Parameter.empty:
        return value
    origin = get_origin(tp)
    if origin is not None:
        return _fit_generic(value, tp, origin, get_args(tp), path)
    if tp is None or tp is type(None):
        if value is not None:
            raise Mismatch(path, f"expected null, got {json_kind(value)}")
        return None
    simple = _SIMPLE.get(tp)
    if simple is not None:
        return simple(value, path)
    if tp in _BARE_CONTAINERS:  # list, dict, ... without item types: as list[Any], dict[Any, Any], ...
        return _fit_generic(value, tp, tp, (), path)
    if isinstance(tp, typing.NewType):  # UserId = NewType("UserId", int): its base type's form, the value as is
        return fit(value, tp.__supertype__, path)
    if typing.is_typeddict(tp):
        return _fit_typeddict(value, tp, path)
    if isinstance(tp, type):
        cls: Any = tp
        if issubclass(tp, enum.Enum):
            return _fit_enum(value, tp, path)
        if dataclasses.is_dataclass(tp):
            return _fit_dataclass(value, tp, path)
        if _is_model(tp):
            return _fit_model(value, tp, path)
        if issubclass(tp, tuple) and hasattr(tp, "_fields"):
            return _fit_namedtuple(value, tp, path)
        for base, conv in _SIMPLE.items():  # subclasses of the simple types (e.g. a str subclass)
            if issubclass(tp, base) and base is not bool:
                return cls(conv(value, path))
    try:
        if isinstance(value, tp if isinstance(tp, type) else ()):
            return value
    except TypeError:  # a type that refuses isinstance (a Protocol without runtime_checkable, ...)
        pass
    raise Mismatch(path, f"expected {type_name(tp)}, got {json_kind(value)}")


def _fit_generic(value: Any, tp: Any, origin: Any, args: tuple[Any, ...], path: str) -> Any:
    if origin is typing.Annotated:
        return fit(value, args[0], path)
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return fit(value, option, path)
            except Mismatch as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise Mismatch(path, f"expected {type_name(tp)}, got {json_kind(value)}")
    if origin is Literal:
        # each literal by its JSON form (an enum member by its value), of the same JSON kind: true is not 1
        for a in args:
            form = a.value if isinstance(a, enum.Enum) else a
            if form == value and type(form) is type(value):
                return a
        raise Mismatch(path, f"expected one of {', '.join(map(repr, args))}, got {value!r}")
    if origin in (list, set, frozenset, tuple) or origin in _SEQUENCE_ABCS:
        fixed = origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis)
        if value is None and not fixed:
            value = []  # Go's json.Marshal writes a nil slice as null; json.Unmarshal reads it back as empty
        if not isinstance(value, list):
            raise Mismatch(path, f"expected an array, got {json_kind(value)}")
        if fixed:
            if len(value) != len(args):
                raise Mismatch(path, f"expected an array of {len(args)} items, got {len(value)}")
            return tuple(fit(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
        item = args[0] if args else Any
        items = [fit(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        if origin in (set, frozenset, tuple):
            return origin(items)
        return items
    if origin in (dict, Mapping) or origin in _MAPPING_ABCS:
        if value is None:
            value = {}  # a nil map, as Go's json.Marshal writes it
        if not isinstance(value, dict):
            raise Mismatch(path, f"expected an object, got {json_kind(value)}")
        kt, vt = args if len(args) == 2 else (Any, Any)
        return {_fit_key(k, kt, path): fit(v, vt, f"{path}[{k!r}]") for k, v in value.items()}
    if isinstance(origin, type) and dataclasses.is_dataclass(origin):
        return _fit_dataclass(value, origin, path)
    return fit(value, origin, path)


def _fit_key(key: str, tp: Any, path: str) -> Any:
    if tp is int:  # Go writes map[int]T keys as decimal strings
        try:
            return int(key)
        except ValueError:
            raise Mismatch(f"{path}[{key!r}]", "expected an integer key") from None
    return fit(key, tp, f"{path}[{key!r}]")


def _fit_enum(value: Any, tp: type[enum.Enum], path: str) -> enum.Enum:
    try:
        return tp(value)
    except (ValueError, TypeError):
        valid = ", ".join(repr(m.value) for m in tp)
        raise Mismatch(path, f"{value!r} is not a {tp.__name__} (one of {valid})") from None


def _fit_dataclass(value: Any, tp: type, path: str) -> Any:
    if not isinstance(value, dict):
        raise Mismatch(path, f"expected an object ({tp.__name__}), got {json_kind(value)}")
    hints = typing.get_type_hints(tp, include_extras=True)
    kwargs = {}
    for f in dataclasses.fields(tp):
        if not f.init:
            continue
        where = f"{path}.{f.name}"
        if f.name in value:
            kwargs[f.name] = fit(value[f.name], hints.get(f.name, Any), where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise Mismatch(where, "is missing")
    try:
        return tp(**kwargs)
    except (TypeError, ValueError) as exc:  # the dataclass's own checks
        raise Mismatch(path, str(exc)) from None


def _fit_typeddict(value: Any, tp: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Mismatch(path, f"expected an object ({tp.__name__}), got {json_kind(value)}")
    out = {}
    for name, (hint, required) in _typeddict_keys(tp).items():
        where = f"{path}.{name}"
        if name in value:
            out[name] = fit(value[name], hint, where)
        elif required:
            raise Mismatch(where, "is missing")
    return out


def _typeddict_keys(tp: Any) -> dict[str, tuple[Any, bool]]:
    """Each key of a TypedDict: its annotation (Required/NotRequired taken off) and whether it is required.
    Required/NotRequired are read from the annotations themselves: under `from __future__ import annotations`
    Python 3.11's __required_keys__ does not see them."""
    out = {}
    for name, hint in typing.get_type_hints(tp, include_extras=True).items():
        required = name in tp.__required_keys__
        while True:
            origin = get_origin(hint)
            if origin is typing.Annotated:
                hint = get_args(hint)[0]
            elif origin is typing.Required or origin is typing.NotRequired:
                required = origin is typing.Required
                hint = get_args(hint)[0]
            else:
                break
        out[name] = (hint, required)
    return out


def _fit_namedtuple(value: Any, tp: Any, path: str) -> Any:
    if not isinstance(value, list):  # a tuple's form, as encode() writes it
        raise Mismatch(path, f"expected an array ({tp.__name__}), got {json_kind(value)}")
    fields: tuple[str, ...] = tp._fields
    required = len(fields) - len(tp._field_defaults)
    if not required <= len(value) <= len(fields):
        want = str(len(fields)) if required == len(fields) else f"{required} to {len(fields)}"
        raise Mismatch(path, f"expected an array of {want} items ({tp.__name__}), got {len(value)}")
    hints = typing.get_type_hints(tp)
    return tp(*(fit(v, hints.get(f, Any), f"{path}[{i}]") for i, (f, v) in enumerate(zip(fields, value,
                                                                                        strict=False))))


def _fit_model(value: Any, tp: Any, path: str) -> Any:
    from pydantic import ValidationError
    try:
        return tp.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = path + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.get("loc", ()))
        raise Mismatch(where, str(first.get("msg", "invalid"))) from None


def _fit_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise Mismatch(path, f"expected a string, got {json_kind(value)}")
    return value


def _fit_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise Mismatch(path, f"expected a boolean, got {json_kind(value)}")
    return value


def _fit_int(value: Any, path: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Mismatch(path, f"expected an integer, got {json_kind(value)}"
                       + (f" {value!r}" if isinstance(value, float) else ""))
    return value


def _fit_float(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Mismatch(path, f"expected a number, got {json_kind(value)}")
    return float(value)


def _parsed(conv: Callable[[str], Any], what: str) -> Callable[[Any, str], Any]:
    def parse(value: Any, path: str) -> Any:
        if not isinstance(value, str):
            raise Mismatch(path, f"expected {what} as a string, got {json_kind(value)}")
        try:
            return conv(value)
        except (ValueError, TypeError, binascii.Error):
            raise Mismatch(path, f"{value[:80]!r} is not {what}") from None
    return parse


def _fit_decimal(value: Any, path: str) -> Decimal:
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # a Go float64 or json.Number
        return Decimal(str(value))
    if not isinstance(value, str):
        raise Mismatch(path, f"expected a decimal as a string or number, got {json_kind(value)}")
    try:
        return Decimal(value)
    except InvalidOperation:
        raise Mismatch(path, f"{value[:80]!r} is not a decimal number") from None


def _date(text: str) -> date:
    return date.fromisoformat(text)


_SIMPLE: dict[Any, Callable[[Any, str], Any]] = {
    str: _fit_str, bool: _fit_bool, int: _fit_int, float: _fit_float, Decimal: _fit_decimal,
    datetime: _parsed(datetime.fromisoformat, "an RFC 3339 / ISO 8601 date and time"),
    date: _parsed(_date, "a date (YYYY-MM-DD)"),
    UUID: _parsed(UUID, "a UUID"),
    bytes: _parsed(lambda s: base64.b64decode(s, validate=True), "base64"),
}
_fit_base64 = _SIMPLE[bytes]


def _fit_bytes(value: Any, path: str) -> bytes:
    # Go's json.Marshal writes a nil []byte as null; json.Unmarshal reads it back as empty
    return b"" if value is None else _fit_base64(value, path)


_SIMPLE[bytes] = _fit_bytes


_BARE_CONTAINERS = (list, tuple, set, frozenset, dict)
_SEQUENCE_ABCS = (abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection, abc.Set, abc.MutableSet)
_MAPPING_ABCS = (abc.MutableMapping,)
