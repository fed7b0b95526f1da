"""The dashboard: a Flask app (factory in webui.app) and its command-line tools (webui.cli, webui.usercli).

Importing the package loads no Flask: the `asynqpy` command imports webui.usercli, webui.cli and webui.dev to
register their subcommands, and every other command (`asynqpy stats`, `asynqpy task ls`) would pay for the web
stack otherwise. `from webui import create_app` (and the factory's other names) loads webui.app on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webui.app import (
        DEFAULTS,
        ERROR_STATUS,
        EXTENSION,
        PACKAGE_DIR,
        create_app,
        health_inspector,
        inspector,
        settings,
        status_for,
        trace_link,
    )

__all__ = ["DEFAULTS", "ERROR_STATUS", "EXTENSION", "PACKAGE_DIR", "create_app", "health_inspector", "inspector",
           "settings", "status_for", "trace_link"]
_FACTORY = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name not in _FACTORY:
        raise AttributeError(f"module 'webui' has no attribute {name!r}")
    from webui import app

    return getattr(app, name)
