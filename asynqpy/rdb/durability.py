"""Durability: how many replicas must confirm a write (Redis WAIT) before asynqpy calls it done."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asynqpy.errors import InvalidArgumentError, NotDurableError


@dataclass(frozen=True)
class Durability:
    """Wait, after a write, until `replicas` replicas confirm it (Redis WAIT), at most `timeout` seconds."""

    replicas: int = 1
    timeout: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int) or self.replicas < 1:
            raise InvalidArgumentError(f"durable replicas must be a positive int, got {self.replicas!r}",
                                       argument="replicas")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not self.timeout > 0:
            raise InvalidArgumentError(f"durable timeout must be positive seconds, got {self.timeout!r}",
                                       argument="timeout")

    @property
    def wait_command(self) -> tuple[str, int, int]:
        return ("WAIT", self.replicas, max(1, round(self.timeout * 1000)))

    def check(self, acked: Any, what: str) -> None:
        """Raises NotDurableError unless WAIT's reply shows enough replicas (or WAIT itself failed)."""
        if isinstance(acked, Exception):
            raise NotDurableError(f"{what}: written on the primary, but WAIT failed: {acked}") from acked
        if int(acked) < self.replicas:
            raise NotDurableError(
                f"{what}: written on the primary, but confirmed by {int(acked)} of {self.replicas} replica(s) "
                f"within {self.timeout:g}s; it may be lost if the primary fails now")
