"""Reads README.md for the tests that run what it shows: its sections, code blocks and `asynqpy` commands."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def section(title: str, text: str | None = None) -> str:
    """The text of one `## title` section."""
    text = README.read_text() if text is None else text
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert m, f"README has no section {title!r}"
    return m.group(1)


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def shell_lines(body: str) -> list[str]:
    """The commands of a shell block: comments dropped, `a ; b` split."""
    out = []
    for line in body.splitlines():
        line = _drop_comment(line)
        out += [part.strip() for part in line.split(" ; ") if part.strip()]
    return out


def _drop_comment(line: str) -> str:
    """Everything before a `#` that starts a shell comment (outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def asynqpy_commands(text: str) -> list[str]:
    """Every `asynqpy ...` command in text: lines of its shell blocks, inline `code` spans, and the lines of
    example lists: an "examples:" paragraph (--help epilogs) or a "Try:" paragraph (the dev banner)."""
    found: list[str] = []
    for lang, body in blocks(text):
        if lang in ("sh", "bash", ""):
            found += [c for c in shell_lines(body) if c.startswith("asynqpy ")]
    found += re.findall(r"`(asynqpy [^`]+)`", text)
    for para in re.findall(r"(?:^examples:|Try:)(.*?)(?:\n[ \t]*\n|\Z)", text, flags=re.S | re.M):
        found += [c for c in (_drop_comment(line).strip() for line in para.splitlines()) if c.startswith("asynqpy ")]
    return list(dict.fromkeys(re.sub(r"\s+", " ", c.strip()) for c in found))
