"""Payload redaction: which values of a task (payload, headers, result) a role below a chosen one must not see,
and the masked copies of TaskRecords, pages, search results, running workers and scheduler entries.

A Policy comes from a mapping (the dashboard config's [redaction] table) or a TOML file::

    [redaction]
    reveal_to = "admin"        # roles at or above it see what the default masks (default "admin")
    default = true             # mask keys named like password, token, secret, authorization, ... (default true)
    keys = ["ssn", "iban"]     # more key names masked like the default ones
    non_json = "show"          # a payload that is not JSON, of a type with no payload rule: show | hide
    hook = "mypkg.redact:mask" # optional: called for every type (see below)

    [redaction.types."payment:*"]        # a task type, or a glob pattern of types
    fields = ["payload.card.number", "payload.card.cvc", "result.receipt.card"]
    headers = ["X-Card-Token"]
    reveal_to = "operator"
    hook = "mypkg.redact:payment"

Default keys match by name at any depth of a JSON payload or result, and header names, case-insensitively
and ignoring - _ . and spaces ("db_password", "X-Auth-Token", "clientSecret"). Field paths walk JSON objects;
a list on the way is walked element by element (`payload.items.card` masks the card of every item), `*` is
any key, and a number indexes a list. A masked value becomes the string "[redacted]".

What cannot be masked field by field is hidden whole, never shown by accident: a payload (result) that is
not a JSON value, of a type whose rules name payload (result) fields, is shown as kind "redacted" to roles
below the rule's reveal_to; so is anything a hook failed on. Text (non-JSON UTF-8) of a type without rules
gets the default's `password=...` / `token: ...` pairs masked; binary payloads of such types are shown, unless
non_json = "hide".

A hook is ``fn(task_type: str, part: str, value: Any) -> Any``: part is "payload", "result" or "headers";
value is the decoded JSON value (payload, result), a dict (headers) or bytes (a part that is not JSON); it
returns the masked value of the same kind. It runs after the field rules, for roles below its reveal_to.

Roles (weakest first) are those of the dashboard: viewer, operator, admin. This module imports no Flask.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from inspector import display
from inspector.models import ActiveWorker, PayloadView, SchedulerEntry, SearchResult, TaskPage, TaskRecord

log = logging.getLogger("asynqpy.redact")
ROLES = ("viewer", "operator", "admin")  # the dashboard's roles (webui.users.ROLES), weakest first
MASK = "[redacted]"
DEFAULT_KEYS = ("password", "passwd", "passphrase", "secret", "token", "authorization", "apikey", "privatekey",
                "credential")
PARTS = ("payload", "result")
Hook = Callable[[str, str, Any], Any]
_SEP = re.compile(r"[-_. ]")


def norm_key(key: str) -> str:
    return _SEP.sub("", key).lower()


def _rank(role: str) -> int:
    """A role's place, weakest first; an unknown role ranks below viewer (it sees the least)."""
    return ROLES.index(role) if role in ROLES else -1


@dataclass(frozen=True)
class Rule:
    """What to mask in tasks whose type matches pattern, for roles below reveal_to. fields: paths inside the
    payload or the result, as (part, segments); headers: lower-case header names."""

    pattern: str
    reveal_to: str
    fields: tuple[tuple[str, tuple[str, ...]], ...] = ()
    headers: frozenset[str] = frozenset()
    hook: Hook | None = None

    def matches(self, task_type: str) -> bool:
        return fnmatch.fnmatchcase(task_type, self.pattern)

    def paths(self, part: str) -> list[tuple[str, ...]]:
        return [segs for p, segs in self.fields if p == part]


@dataclass
class Masking:
    """One part being masked: the paths masked so far (for the page's note) and whether it must be hidden."""

    found: list[str] = field(default_factory=list)
    hide: str = ""  # why the whole part is hidden ("" = it is not)


@dataclass(frozen=True)
class Policy:
    """Redaction rules for the roles that must not see some values. Policy() is the default: mask keys named
    like secrets for roles below admin. Build one with from_mapping or from_file; apply it with task(),
    page(), search(), worker() and entry(); each returns its input unchanged for a role that sees everything."""

    rules: tuple[Rule, ...] = ()
    keys: tuple[str, ...] = DEFAULT_KEYS
    reveal_to: str = "admin"
    non_json: Literal["show", "hide"] = "show"
    hook: Hook | None = None

    # -- building ------------------------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Policy:
        """A Policy from the [redaction] table's contents (None or {}: the default). Raises
        InvalidArgumentError naming the bad setting."""
        from inspector.redactconfig import from_mapping

        return from_mapping(data)

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        """A Policy from a TOML file: its [redaction] table, or the whole file when it has none. Raises
        InvalidArgumentError for a file that cannot be read or a bad setting."""
        from inspector.redactconfig import from_file

        return from_file(path)

    @classmethod
    def from_setting(cls, value: Any) -> Policy:
        """From a dashboard setting: a mapping (a config file's table), a path to a TOML file, or None.
        Raises InvalidArgumentError."""
        from inspector.redactconfig import from_setting

        return from_setting(value)

    # -- deciding ------------------------------------------------------------------------------------------

    def masks_for(self, role: str) -> bool:
        """Whether anything at all may be masked for role (False: every value is shown as stored)."""
        top = [self.reveal_to] if self.keys or self.hook else []
        return any(_rank(role) < _rank(r) for r in top + [r.reveal_to for r in self.rules])

    def _rules(self, task_type: str, role: str) -> list[Rule]:
        return [r for r in self.rules if r.matches(task_type) and _rank(role) < _rank(r.reveal_to)]

    def _defaults(self, role: str) -> bool:
        return bool(self.keys) and _rank(role) < _rank(self.reveal_to)

    def _secret_key(self, key: str) -> bool:
        k = norm_key(key)
        return any(s in k for s in self.keys)

    # -- masking -------------------------------------------------------------------------------------------

    def mask_bytes(self, task_type: str, part: str, data: bytes | None, role: str) -> tuple[bytes | None, Masking]:
        """The masked bytes of a payload or result (b"" with .hide set when it must be hidden whole)."""
        m = Masking()
        if not data:
            return data, m
        rules = self._rules(task_type, role)
        defaults = self._defaults(role)
        hooks = [r.hook for r in rules if r.hook] + ([self.hook] if self.hook and defaults else [])
        if not rules and not defaults and not hooks:
            return data, m
        paths = [p for r in rules for p in r.paths(part)]
        try:
            value: Any = json.loads(data)
        except (ValueError, RecursionError):
            return self._opaque(task_type, part, data, role, m, paths, hooks, defaults)
        for segs in paths:
            value = _mask_path(value, segs, part, m)
        if defaults:
            value = self._mask_keys(value, part, m)
        for hook in hooks:
            before = value
            value = self._run_hook(hook, task_type, part, value, m)
            if m.hide:
                return b"", m
            if value != before:
                m.found.append(f"{part} (hook)")
        if not m.found:
            return data, m
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(), m

    def _opaque(self, task_type: str, part: str, data: bytes, role: str, m: Masking,
                paths: list[tuple[str, ...]], hooks: list[Hook], defaults: bool) -> tuple[bytes | None, Masking]:
        """A part that is not JSON: fields cannot be found in it, so it is hidden whole when a rule names
        fields of it (or non_json = "hide"); text gets the default's key=value pairs masked."""
        if paths:
            m.hide = f"not JSON, so its {part} fields cannot be masked one by one"
            return b"", m
        out: Any = data
        for hook in hooks:
            out = self._run_hook(hook, task_type, part, out, m)
            if m.hide:
                return b"", m
            if not isinstance(out, (bytes, bytearray)):
                m.hide = "the redaction hook did not return bytes"
                return b"", m
        if bytes(out) != data:
            m.found.append(f"{part} (hook)")
        if defaults:
            try:
                text = bytes(out).decode("utf-8")
            except UnicodeDecodeError:
                if self.non_json == "hide":
                    m.hide = "binary, so nothing in it can be masked"
                    return b"", m
                return bytes(out), m
            masked, n = self._text_pattern().subn(lambda mo: mo.group(1) + MASK, text)
            if n:
                m.found.append(f"{part} ({n} key=value pair{'s' if n > 1 else ''})")
                return masked.encode(), m
            if self.non_json == "hide":
                m.hide = "not JSON, so nothing in it can be masked one by one"
                return b"", m
        return bytes(out), m

    def _text_pattern(self) -> re.Pattern[str]:
        names = "|".join(re.escape(k) for k in self.keys)
        return re.compile(r"(?i)(\b[\w.-]*(?:" + names + r")[\w.-]*\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s&,;]+)")

    def _mask_keys(self, value: Any, part: str, m: Masking, path: str = "") -> Any:
        where = path or part
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if self._secret_key(str(k)) and v != MASK:
                    out[k] = MASK
                    m.found.append(f"{where}.{k}")
                else:
                    out[k] = self._mask_keys(v, part, m, f"{where}.{k}")
            return out
        if isinstance(value, list):
            return [self._mask_keys(v, part, m, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def _run_hook(self, hook: Hook, task_type: str, part: str, value: Any, m: Masking) -> Any:
        try:
            return hook(task_type, part, value)
        except Exception:  # a broken hook must not show what it was meant to hide
            log.exception("redaction hook %r failed on a %s of %r: hidden", hook, part, task_type)
            m.hide = "the redaction hook failed"
            return value

    def headers(self, task_type: str, headers: Mapping[str, str], role: str) -> tuple[Mapping[str, str], list[str]]:
        """The masked headers and the names masked."""
        rules = self._rules(task_type, role)
        defaults = self._defaults(role)
        if not headers or (not rules and not defaults):
            return headers, []
        names = set().union(*(r.headers for r in rules)) if rules else set()
        out, found = {}, []
        for k, v in headers.items():
            if k.lower() in names or (defaults and self._secret_key(k)):
                out[k] = MASK
                found.append(f"headers.{k}")
            else:
                out[k] = v
        hooks = [r.hook for r in rules if r.hook] + ([self.hook] if self.hook and defaults else [])
        for hook in hooks:
            m = Masking()
            got = self._run_hook(hook, task_type, "headers", dict(out), m)
            if m.hide or not isinstance(got, Mapping):
                return {k: MASK for k in headers}, [f"headers.{k}" for k in headers]
            if dict(got) != out:
                found.append("headers (hook)")
            out = {str(k): str(v) for k, v in got.items()}
        return MappingProxyType(out), found

    def reveal_role(self, task_type: str) -> str:
        """The weakest role that sees every value of tasks of this type."""
        needed = [r.reveal_to for r in self.rules if r.matches(task_type)]
        if self.keys or self.hook:
            needed.append(self.reveal_to)
        return max(needed, key=_rank, default=ROLES[0])

    # -- whole records ------------------------------------------------------------------------------------

    def task(self, rec: TaskRecord, role: str, *, full: bool = True) -> TaskRecord:
        """rec as role may see it: payload, result and headers masked (in the display forms and in info),
        redacted naming what was masked. full: the task page's display forms rather than a table cell's."""
        if not self.masks_for(role) or (rec.problem and not rec.info.type):
            return self._unreadable(rec, role)
        info = rec.info
        payload, pm = self.mask_bytes(info.type, "payload", info.payload, role)
        result, rm = self.mask_bytes(info.type, "result", info.result, role)
        headers, hm = self.headers(info.type, info.headers, role)
        found = pm.found + rm.found + hm
        if not found and not pm.hide and not rm.hide:
            return rec
        show = display.view if full else display.preview
        new_info = dataclasses.replace(info, payload=payload or b"", result=result, headers=headers)
        pview = self._hidden(pm.hide, info.payload, info.type, "payload") if pm.hide else (
            show(payload, task_type=info.type) if pm.found else rec.payload)
        rview = rec.result
        if rm.hide:
            rview = self._hidden(rm.hide, info.result or b"", info.type, "result")
        elif rm.found:
            rview = show(result)
        hidden = [f"{p} (hidden: {m.hide})" for p, m in (("payload", pm), ("result", rm)) if m.hide]
        return dataclasses.replace(rec, info=new_info, payload=pview, result=rview, redacted=tuple(found + hidden))

    def _unreadable(self, rec: TaskRecord, role: str) -> TaskRecord:
        """A task whose message cannot be decoded shows its raw bytes: hidden from a role anything is masked for
        (its type, and so its rules, are unknown)."""
        if not rec.problem or rec.info.type or not self.masks_for(role) or rec.payload.kind == "empty":
            return rec
        hidden = PayloadView("redacted", f"[redacted: {rec.payload.size} bytes, the task cannot be decoded; shown "
                                         f"to {self.reveal_role('')} and above]", rec.payload.size, False)
        return dataclasses.replace(rec, payload=hidden, redacted=("payload (hidden: the task cannot be decoded)",))

    def _hidden(self, why: str, data: bytes, task_type: str, part: str) -> PayloadView:
        who = next(r for r in ROLES if not self.mask_bytes(task_type, part, data, r)[1].hide)  # admin: never
        return PayloadView("redacted", f"[redacted: {len(data)} bytes, {why}; shown to {who} and above]", len(data),
                           False)

    def page(self, tp: TaskPage, role: str) -> TaskPage:
        """A page of tasks as role may see them (table-cell display forms)."""
        if not self.masks_for(role):
            return tp
        return dataclasses.replace(tp, tasks=tuple(self.task(t, role, full=False) for t in tp.tasks))

    def search(self, res: SearchResult, role: str, text: str | None = None) -> SearchResult:
        """Search matches as role may see them. A task found by text that no longer contains it once masked is
        dropped: a search must not tell whether a hidden value holds some text."""
        if not self.masks_for(role):
            return res
        kept = []
        for t in res.tasks:
            shown = self.task(t, role, full=False)
            if text and shown.redacted and not _contains(shown, text):
                continue
            kept.append(shown)
        return dataclasses.replace(res, tasks=tuple(kept))

    def worker(self, w: ActiveWorker, role: str) -> ActiveWorker:
        """A running task of a server's, its payload masked for role."""
        data, m = self.mask_bytes(w.task_type, "payload", w.task_payload, role)
        if m.hide:
            return dataclasses.replace(w, task_payload=MASK.encode())
        return w if not m.found else dataclasses.replace(w, task_payload=data or b"")

    def entry(self, e: SchedulerEntry, role: str) -> SchedulerEntry:
        """A scheduler entry, the payload it enqueues masked for role."""
        data, m = self.mask_bytes(e.task_type, "payload", e.task_payload, role)
        if m.hide:
            return dataclasses.replace(e, task_payload=MASK.encode())
        return e if not m.found else dataclasses.replace(e, task_payload=data or b"")


def _contains(rec: TaskRecord, text: str) -> bool:
    """Whether the masked payload still holds text (ASCII case-insensitive, as the search script compares)."""
    needle = text.lower()
    raw = rec.info.payload.decode("utf-8", "replace").lower()
    return needle in raw or needle in rec.payload.text.lower()


def _mask_path(value: Any, segs: tuple[str, ...], where: str, m: Masking) -> Any:
    """value with the value at path segs replaced by MASK (lists walked element by element)."""
    if isinstance(value, list):
        if segs[0].isdecimal():
            i = int(segs[0])
            if i >= len(value):
                return value
            items = list(value)
            items[i] = MASK if len(segs) == 1 else _mask_path(value[i], segs[1:], f"{where}[{i}]", m)
            if len(segs) == 1:
                m.found.append(f"{where}[{i}]")
            return items
        return [_mask_path(v, segs, f"{where}[{i}]", m) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    head, rest = segs[0], segs[1:]
    out = dict(value)
    for k in _keys(value, head):
        if not rest:
            if out[k] != MASK:
                out[k] = MASK
                m.found.append(f"{where}.{k}")
        else:
            out[k] = _mask_path(value[k], rest, f"{where}.{k}", m)
    return out


def _keys(obj: dict[str, Any], head: str) -> Iterable[str]:
    return list(obj) if head == "*" else [head] if head in obj else []

