"""`asynqpy web`: the dashboard under gunicorn (bind, workers, sub-path, trusted proxies)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from asynqpy import cliargs
from asynqpy.errors import UsageError
from asynqpy.terminal import say


def register(subparsers: Any) -> None:
    """Add `web` to asynqpy's subcommands."""
    p = subparsers.add_parser("web", help="serve the dashboard under gunicorn",
                              description="Serve the dashboard under gunicorn. Settings also come from ASYNQPY_* "
                                          "environment variables and --config.")
    p.add_argument("--bind", default=os.environ.get("ASYNQPY_WEB_BIND", "127.0.0.1:8080"),
                   help="address:port to listen on (default 127.0.0.1:8080)")
    p.add_argument("--workers", type=cliargs.positive, default=2, help="gunicorn worker processes (default 2)")
    p.add_argument("--threads", type=cliargs.positive, default=4, help="threads per worker (default 4)")
    p.add_argument("--url-prefix", default=os.environ.get("SCRIPT_NAME", ""),
                   help="serve under this sub-path behind a reverse proxy, e.g. /asynq (default: SCRIPT_NAME)")
    p.add_argument("--trusted-proxy", action="append", type=cliargs.network, default=[], metavar="ADDR",
                   help="honour X-Forwarded-* (and --auth-header) only from this address or network; repeatable")
    p.add_argument("--auth-header", help="single sign-on: the user name header a trusted proxy sets, "
                                         "e.g. X-Forwarded-User")
    p.add_argument("--users", help="users file (default: ASYNQPY_WEB_USERS, else ./asynqpy-users.toml)")
    p.add_argument("--read-only", action="store_true", help="refuse every change, whatever the role")
    p.add_argument("--config", help="a TOML file of dashboard settings")
    p.add_argument("--redaction", metavar="FILE", help="payload redaction rules, a TOML file (default: the "
                                                       "config's [redaction] table, or ASYNQPY_REDACTION)")
    p.add_argument("--redis-url", default=argparse.SUPPRESS,
                   help="default: ASYNQPY_REDIS_URL, REDIS_URL, the `asynqpy dev` server, then localhost")
    p.set_defaults(func=run_web)



def app_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The create_app settings the command line gives (the rest comes from the environment)."""
    cfg: dict[str, Any] = {}
    if getattr(args, "redis_url", None):
        cfg["ASYNQPY_REDIS_URL"] = args.redis_url
    if args.trusted_proxy:
        cfg["ASYNQPY_TRUSTED_PROXIES"] = tuple(args.trusted_proxy)
    if args.auth_header:
        cfg["ASYNQPY_AUTH_HEADER"] = args.auth_header
    if args.users:
        cfg["ASYNQPY_USERS"] = args.users
    if args.read_only:
        cfg["ASYNQPY_READ_ONLY"] = True
    if args.config:
        cfg["ASYNQPY_CONFIG_FILE"] = args.config
    if args.redaction:
        cfg["ASYNQPY_REDACTION"] = args.redaction
    return cfg


def _http(listener: str) -> str:
    """A gunicorn listener as a URL: TCP listeners print as http://host:port already, unix sockets as a path."""
    return listener if "://" in listener else f"http://{listener}"


def _warn_without_users(config: Any) -> None:
    """Nobody can log in without a users file (unless a trusted proxy names the user): say how to add one."""
    users = config.get("ASYNQPY_USERS")
    users = os.path.abspath(users) if users else users
    if users and not os.path.exists(users) and not config.get("ASYNQPY_AUTH_HEADER"):
        say(f"asynqpy web: warning: there is no users file at {users}, so nobody can log in; add a user with: "
              f"asynqpy user add NAME --role admin --users {users}", file=sys.stderr, flush=True)


def run_web(args: argparse.Namespace) -> int:
    """Run gunicorn in this process until SIGINT/SIGTERM. Returns the exit code."""
    prefix = args.url_prefix.rstrip("/")
    if prefix and not prefix.startswith("/"):
        raise UsageError(f"--url-prefix must start with '/', got {args.url_prefix!r}")
    try:
        from gunicorn.app.base import BaseApplication
    except ImportError:
        raise UsageError("the dashboard needs the web extra: pip install 'asynqpy[web]'") from None
    from webui import create_app, sampler
    from webui.gunicornworker import MAX_REQUEST_LINE, Worker
    from webui.proxy import wrap

    cfg = app_settings(args)
    try:
        app = create_app(cfg)  # checks the settings (and Redis URL form) before gunicorn forks
    except ValueError as exc:  # a bad setting from the environment or the config file (the flags are checked)
        raise UsageError(f"dashboard settings: {exc}") from None
    _warn_without_users(app.config)
    wsgi = wrap(app, prefix=prefix, trusted=cfg.get("ASYNQPY_TRUSTED_PROXIES", ()))
    options = {"bind": args.bind, "workers": args.workers, "threads": args.threads, "worker_class": Worker,
               # the longest request line gunicorn reads (its maximum, still a bound); a longer one gets the
               # dashboard's own 414 page from the worker (webui.gunicornworker), not gunicorn's plain one
               "limit_request_line": MAX_REQUEST_LINE,
               "accesslog": "-", "errorlog": "-", "graceful_timeout": 10, "timeout": 60,
               # gunicorn believes no forwarded header from anyone (its default trusts 127.0.0.1): the scheme,
               # host and prefix of a trusted proxy are webui.proxy's one job, the client address webui.security's
               "forwarded_allow_ips": "", "secure_scheme_headers": {}, "forwarder_headers": ""}

    class Server(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for k, v in options.items():
                self.cfg.set(k, v)
            if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 25: one shared path would collide
                self.cfg.set("control_socket_disable", True)

        def load(self) -> Any:
            return wsgi

    def when_ready(arbiter: Any) -> None:  # said once gunicorn listens (and handles SIGINT/SIGTERM itself)
        where = ", ".join(f"{_http(str(s))}{prefix}/" for s in getattr(arbiter, "LISTENERS", ())) or args.bind
        say(f"asynqpy web: serving the dashboard on {where}", file=sys.stderr, flush=True)

    def post_worker_init(worker: Any) -> None:  # the app was made before the fork: its threads start here
        sampler.start(app)

    options["when_ready"] = when_ready
    options["post_worker_init"] = post_worker_init
    Server().run()
    return 0
