"""Extension points: the `asynqpy` subcommands and `asynqpy dev` add-ons that packages register as entry points.

A package adds subcommands without editing the core: in its pyproject.toml,

    [project.entry-points."asynqpy.commands"]
    stats = "inspector.cli:register"
    task = "inspector.cli:register"

where `register(subparsers)` adds argparse subparsers whose defaults set `func(args) -> int` (the exit code).
Name each entry point after a command its registrar adds (one name per command; a registrar is called once
however many names it has): `asynqpy task ...` then imports only the registrar named `task`. A command no entry
point is named after still works, at the cost of importing every registrar to find it.
`asynqpy dev` add-ons (e.g. the dashboard) are objects named under "asynqpy.dev_addons" that follow `DevAddon`.
Entry points are read from the installed metadata: after adding one, reinstall (`pip install -e . --no-deps`).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

COMMANDS_GROUP = "asynqpy.commands"
DEV_ADDONS_GROUP = "asynqpy.dev_addons"

log = logging.getLogger("asynqpy")

Register = Callable[[Any], None]  # takes argparse's subparsers object


def _entries(group: str) -> list[EntryPoint]:
    from importlib.metadata import entry_points  # only a command that needs plug-ins pays for the scan

    return sorted(entry_points(group=group), key=lambda ep: ep.name)


def command_registrars(command: str | None = None) -> list[tuple[str, Register]]:
    """(name, register) of the installed subcommand providers, each once, in name order: only those of the
    entry points named `command` when there are any, else all of them.

    A provider whose module cannot be imported is skipped with a warning (a partial install must not take
    the whole command line down); the error names the entry point.
    """
    entries = _entries(COMMANDS_GROUP)
    entries = [ep for ep in entries if ep.name == command] or entries
    out: list[tuple[str, Register]] = []
    seen: set[str] = set()
    for ep in entries:
        if ep.value in seen:  # another command of a registrar already loaded
            continue
        seen.add(ep.value)
        try:
            out.append((ep.name, ep.load()))
        except ImportError as exc:
            log.warning("asynqpy: commands %r (%s) are unavailable: %s", ep.name, ep.value, exc)
    return out


@dataclass
class DevContext:
    """What `asynqpy dev` hands an add-on: where Redis is, where dev state lives, and the parsed arguments."""

    redis_url: str
    state_dir: Path
    args: argparse.Namespace


@dataclass
class RunningAddon:
    """A started add-on: lines for the dev banner, and how to stop it."""

    banner: list[str] = field(default_factory=list)
    stop: Callable[[], None] = lambda: None


class DevAddon(Protocol):
    """Something `asynqpy dev` starts beside the worker (the dashboard, the exporter)."""

    name: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add this add-on's options to `asynqpy dev`."""

    def start(self, ctx: DevContext) -> RunningAddon:
        """Start it; raise to report why it could not start (dev goes on without it)."""


def dev_addons() -> list[DevAddon]:
    """The installed `asynqpy dev` add-ons, in name order; one that cannot be imported is skipped with a warning."""
    out: list[DevAddon] = []
    for ep in _entries(DEV_ADDONS_GROUP):
        try:
            out.append(ep.load())
        except ImportError as exc:
            log.warning("asynqpy: dev add-on %r (%s) is unavailable: %s", ep.name, ep.value, exc)
    return out
