"""The `asynqpy dev` add-on: the dashboard beside the demo worker, with an admin account whose password is printed
once (or taken from ASYNQPY_ADMIN_PASSWORD), on --web-port (default 8080)."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import threading
from dataclasses import dataclass

from asynqpy.plugins import DevContext, RunningAddon

ADMIN = "admin"
ENV_PASSWORD = "ASYNQPY_ADMIN_PASSWORD"


def ensure_admin(users_path: str, password: str | None) -> str | None:
    """Make sure the users file has the admin account. Returns the password to print (a new generated one), or
    None when the account already existed (its password is then unchanged, unless `password` was given)."""
    from webui.users import UsersFile, create_user

    users = UsersFile(users_path)
    if users.exists() and users.get(ADMIN) is not None:
        if password:
            users.set_password(ADMIN, password)
        return None
    fresh = password or secrets.token_urlsafe(12)
    create_user(users_path, ADMIN, "admin", fresh)
    return None if password else fresh


@dataclass
class DashboardAddon:
    """`asynqpy dev` add-on: a threaded werkzeug server for the dashboard (gunicorn is for `asynqpy web`)."""

    name: str = "dashboard"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--web-port", type=int, default=8080, help="dashboard port (default 8080; 0: none)")

    def start(self, ctx: DevContext) -> RunningAddon:
        port = int(getattr(ctx.args, "web_port", 8080))
        if port == 0:
            return RunningAddon()
        from werkzeug.serving import make_server

        from webui import create_app

        ctx.state_dir.mkdir(parents=True, exist_ok=True)
        users = str(os.environ.get("ASYNQPY_WEB_USERS") or ctx.state_dir / "users.toml")
        printed = ensure_admin(users, os.environ.get(ENV_PASSWORD))
        app = create_app({"ASYNQPY_REDIS_URL": ctx.redis_url, "ASYNQPY_USERS": users})
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per htmx poll in the dev console
        server = make_server("127.0.0.1", port, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, name="asynqpy-dev-dashboard", daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.server_port}/"
        if printed:
            login = f"log in as {ADMIN} / {printed}  (shown once; change it with `asynqpy user passwd {ADMIN} " \
                    f"--users {users}`)"
        elif os.environ.get(ENV_PASSWORD):
            login = f"log in as {ADMIN} with the password in {ENV_PASSWORD}"
        else:
            login = f"log in as {ADMIN} (password as first printed; reset: asynqpy user passwd {ADMIN} --users {users})"

        def stop() -> None:
            server.shutdown()
            thread.join(5)

        return RunningAddon(banner=[f"Dashboard: {url}", f"           {login}"], stop=stop)


addon = DashboardAddon()
