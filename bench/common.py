"""What the bench scripts share: the Redis a script measures on (the URL it was given, else a private embedded
Valkey started for the run), and the order of a round's runs (alternated, so that the machine's drift hits every
configuration alike)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def bench_redis(url: str | None) -> Iterator[str]:
    """url when given; else the URL of a private embedded server, stopped when the block ends."""
    if url:
        yield url
        return
    from asynqpy.embedded import EmbeddedServer

    with EmbeddedServer() as server:
        yield server.url


def alternated(runs: Sequence[T], round_index: int) -> list[T]:
    """The runs of round round_index (from 0): in order in even rounds, reversed in odd ones."""
    return list(runs) if round_index % 2 == 0 else list(reversed(runs))
