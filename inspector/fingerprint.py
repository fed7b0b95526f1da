"""An error message's fingerprint: its text with the parts that vary from task to task (quoted values, e-mail
addresses, UUIDs, URLs, IP addresses, hex, durations, numbers) replaced by placeholders, so that "SMTP server
busy while sending to user405@example.com" and "... to bob@example.org" are one group of failures."""

from __future__ import annotations

import re

# Order matters: a quoted value or an address is replaced whole before the numbers inside it are seen.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r'"(?:[^"\\\n]|\\.){0,200}"'), '"<str>"'),
    (re.compile(r"(?<![A-Za-z])'(?:[^'\\\n]|\\.){0,200}'"), "'<str>'"),
    (re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "<email>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>]+"), "<url>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|d)(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))*\b"), "<duration>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
)
LIMIT = 300  # errors that differ only after this many characters group together


def fingerprint(message: str) -> str:
    """The message with its varying parts replaced by placeholders (<n>, <email>, "<str>", <duration>...)."""
    out = message[:LIMIT]
    for pattern, placeholder in _RULES:
        out = pattern.sub(placeholder, out)
    return out
