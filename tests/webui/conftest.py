"""Fixtures of the dashboard tests (defined in authkit and webkit), available to every module here."""

from tests.webui.authkit import app, client, users_path
from tests.webui.browserkit import browser
from tests.webui.webkit import as_role, state

__all__ = ["app", "as_role", "browser", "client", "state", "users_path"]
