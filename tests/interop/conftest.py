"""Fixtures for the Go interop tests: a `go_peer` bound to the test's clean database.

Every test under tests/interop/ is marked `interop`; they skip, saying why, when Go is missing or
the peer does not build (set ASYNQPY_REQUIRE_GO=1 to make that a failure instead).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .goasynq import LATEST, GoPeer, build, built_or_skip, matrix_versions

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.interop)


def _built(version: str) -> Path:
    return built_or_skip(lambda: build(version=version), f"Go interop peer (asynq {version})")


@pytest.fixture(scope="session")
def go_binary() -> Path:
    """The goapp binary on the latest asynq release, built once per source hash; skips when it cannot be built."""
    return _built(LATEST)


@pytest.fixture(scope="session", params=matrix_versions())
def go_release(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(asynq release, goapp binary built against it), for each release of the version matrix."""
    return request.param, _built(request.param)


@pytest.fixture
def go_any(go_release: tuple[str, Path], redis_url: str) -> GoPeer:
    """A Go peer on each asynq release of the matrix in turn, bound to the test's clean database."""
    return GoPeer(go_release[1], redis_url)


@pytest.fixture
def go_peer(go_binary: Path, redis_url: str) -> GoPeer:
    return GoPeer(go_binary, redis_url)
