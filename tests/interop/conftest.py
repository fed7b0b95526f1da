"""Fixtures for the Go interop tests: a `go_peer` bound to the test's clean database.

Every test under tests/interop/ is marked `interop`; they skip, saying why, when Go is missing or
the peer does not build (set ASYNQPY_REQUIRE_GO=1 to make that a failure instead).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .goasynq import GoPeer, GoPeerUnavailable, build

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.interop)


@pytest.fixture(scope="session")
def go_binary() -> Path:
    """The goapp binary, built once per source hash; skips the test when it cannot be built."""
    try:
        return build()
    except GoPeerUnavailable as exc:
        if os.environ.get("ASYNQPY_REQUIRE_GO"):  # CI with Go: a broken peer must fail, not skip
            pytest.fail(f"Go interop peer unavailable: {exc}")
        pytest.skip(f"Go interop peer unavailable: {exc}")


@pytest.fixture
def go_peer(go_binary: Path, redis_url: str) -> GoPeer:
    return GoPeer(go_binary, redis_url)
