"""Display forms of payloads: pretty JSON, text, hex, cut at a bound with the full size shown."""

from __future__ import annotations

import pytest

from inspector.display import preview, view

pytestmark = pytest.mark.cluster_too


def test_json_is_pretty() -> None:
    v = view(b'{"a":[1,2],"b":"\xc3\xa9"}')
    assert v.kind == "json" and v.text == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": "\u00e9"\n}'
    assert v.size == 20 and not v.truncated


def test_text_and_numbers() -> None:
    assert view(b"hello world").kind == "text"
    assert view(b"42").kind == "text"
    assert view(b"line1\nline2").text == "line1\nline2"
    assert preview(b"line1\n  line2").text == "line1 line2"


def test_binary_and_invalid_utf8_are_hex() -> None:
    assert view(b"\x00\x01abc").kind == "hex"
    v = view(b"ok \xc3\x28")
    assert v.kind == "hex" and v.text == "6f 6b 20 c3 28"


def test_empty() -> None:
    assert view(b"").kind == "empty" and view(None).size == 0


def test_cut_at_the_bound() -> None:
    v = view(b"x" * 1000, limit=100)
    assert v.truncated and len(v.text) == 100 and v.size == 1000
    h = view(bytes(range(256)) * 4, limit=30)
    assert h.kind == "hex" and h.truncated and h.text.count(" ") == 9 and h.size == 1024
    assert preview(b'{"k": "' + b"v" * 500 + b'"}').truncated
    with pytest.raises(ValueError):
        view(b"x", limit=0)
