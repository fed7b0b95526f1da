"""The dashboard's app factory: wires the Inspector, the blueprints, auth, CSRF, headers and errors.

Settings come, each later source winning, from DEFAULTS, a TOML config file (CONFIG_FILE, or the
ASYNQPY_WEB_CONFIG variable), ASYNQPY_* environment variables (ASYNQPY_REDIS_URL, ASYNQPY_WEB_<SETTING>)
and the mapping given to create_app (tests). The Inspector lives in app.extensions behind `inspector()`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask, abort, current_app, request
from werkzeug.exceptions import HTTPException

from asynqpy.errors import (
    AsynqError,
    FailedPreconditionError,
    InvalidArgumentError,
    MalformedTaskError,
    QueueAlreadyPausedError,
    QueueNotEmptyError,
    QueueNotFoundError,
    QueueNotPausedError,
    RedisCommandError,
    RedisUnavailableError,
    TaskAlreadyArchivedError,
    TaskNotFoundError,
)
from asynqpy.rdb.failures import is_redis_error, translate
from inspector.api import Inspector
from inspector.jobs import JobNotFoundError

EXTENSION = "asynqpy.inspector"
HEALTH = "asynqpy.health"  # /healthz's own Inspector, with the shorter timeout
PACKAGE_DIR = Path(__file__).resolve().parent

DEFAULTS: dict[str, Any] = {
    "ASYNQPY_REDIS_URL": None,         # None: ASYNQPY_REDIS_URL, REDIS_URL, the `asynqpy dev` server, localhost
    "ASYNQPY_POLL_SECONDS": 5,         # live refresh of the overview and queue pages
    "ASYNQPY_PAGE_SIZE": 30,           # rows per task page (the ?size= default); "all" actions above it run as jobs
    "ASYNQPY_MAX_PAGE_SIZE": 200,      # the largest ?size= accepted
    "ASYNQPY_SAMPLE_SECONDS": 10,      # queue-size chart: one sample per interval across all app processes (0: off)
    "ASYNQPY_SAMPLE_KEEP": 360,        # samples kept (360 x 10 s = the last hour)
    "ASYNQPY_FAILURES_LIMIT": 100,     # /errors reads at most this many retry and archived tasks per queue
    "ASYNQPY_JOB_CHUNK": 250,          # tasks per script call in background jobs
    "ASYNQPY_REDACTION": None,         # payload redaction: the config's [redaction] table or a TOML file's path
                                       # (None: the default, keys named like secrets masked below admin)
    "ASYNQPY_TRACE_URL": "",           # a task's trace in Jaeger, Tempo, ...: a URL with {trace_id} ("": no link)
    "ASYNQPY_REDIS_TIMEOUT": 3.0,      # seconds a page's Redis reply (or connect) may take before its 503
    "ASYNQPY_HEALTH_TIMEOUT": 0.8,     # the same for /healthz: under a probe's usual 1 s, so it sees the 503
}

# One table from error types to HTTP status codes; the first matching class wins. Redis trouble that passes
# (unreachable, BUSY, OOM, READONLY, ...) is 503 with the Redis-down banner; a command Redis refused for good
# (a script error, WRONGTYPE) is 502 with its message: the dashboard itself did not fail.
ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (RedisUnavailableError, 503),
    (RedisCommandError, 502),
    (QueueNotFoundError, 404),
    (TaskNotFoundError, 404),
    (JobNotFoundError, 404),
    (QueueNotEmptyError, 409),
    (QueueAlreadyPausedError, 409),
    (QueueNotPausedError, 409),
    (TaskAlreadyArchivedError, 409),
    (FailedPreconditionError, 409),
    (MalformedTaskError, 422),
    (InvalidArgumentError, 400),
    (ValueError, 400),
    (TypeError, 400),
    (AsynqError, 400),
)


def status_for(exc: Exception) -> int:
    """The HTTP status an error maps to (500 for anything unexpected)."""
    for cls, code in ERROR_STATUS:
        if isinstance(exc, cls):
            return code
    return 500


def _known_settings() -> dict[str, Any]:
    from webui import oidc, security

    return {**security.DEFAULTS, **oidc.DEFAULTS, **DEFAULTS}


def _env_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """ASYNQPY_<SETTING> variables for every known setting (auth's included), parsed like its default."""
    out: dict[str, Any] = {}
    for key, default in _known_settings().items():
        raw = environ.get(key)
        if raw is not None and not callable(default):
            out[key] = _coerce(key, raw, default)
    return out


def _coerce(key: str, raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise InvalidArgumentError(f"{key} must be a number, got {raw!r}", argument=key) from None
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise InvalidArgumentError(f"{key} must be a whole number, got {raw!r}",
                                       argument=key) from None
    if isinstance(default, tuple):
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    return raw


def _file_settings(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArgumentError(f"cannot read the dashboard config {path}: {exc}", argument="config") from None
    out = {}
    for k, v in data.items():
        key = k.upper() if k.upper().startswith("ASYNQPY_") else "ASYNQPY_" + k.upper()
        out[key] = tuple(v) if isinstance(v, list) else v
    return out


def settings(config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The merged settings: defaults, config file, environment, then `config`."""
    env = os.environ if environ is None else environ
    given = dict(config or {})
    out = dict(DEFAULTS)
    out.update(_file_settings(given.get("ASYNQPY_CONFIG_FILE") or env.get("ASYNQPY_WEB_CONFIG")))
    out.update(_env_settings(env))
    out.update(given)
    return out


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The dashboard app. config: settings that win over every other source (see DEFAULTS here and in
    webui.security). Raises InvalidArgumentError for a bad setting."""
    app = Flask(__name__, template_folder=str(_asset_dir("templates")), static_folder=str(_asset_dir("static")))
    app.config.update(settings(config))
    _check_trace_url(app.config["ASYNQPY_TRACE_URL"])
    app.jinja_env.autoescape = True
    url = _redis_url(app.config["ASYNQPY_REDIS_URL"])
    app.extensions[EXTENSION] = Inspector(url, chunk=app.config["ASYNQPY_JOB_CHUNK"],
                                          timeout=float(app.config["ASYNQPY_REDIS_TIMEOUT"]))
    app.extensions[HEALTH] = Inspector(url, timeout=float(app.config["ASYNQPY_HEALTH_TIMEOUT"]))
    _register(app)
    return app


def _check_trace_url(url: str) -> None:
    if url and (not url.startswith(("http://", "https://")) or "{trace_id}" not in url):
        raise InvalidArgumentError(f"ASYNQPY_TRACE_URL must be an http(s) URL with {{trace_id}} in it, not {url!r} "
                                   "(e.g. http://jaeger:16686/trace/{trace_id})", argument="ASYNQPY_TRACE_URL")


def trace_link(trace_id: str | None) -> str | None:
    """The ASYNQPY_TRACE_URL link of a trace id (hex digits only), or None when either is unset."""
    url = current_app.config["ASYNQPY_TRACE_URL"]
    return url.replace("{trace_id}", trace_id) if url and trace_id else None


def _redis_url(url: str | None) -> str:
    from asynqpy.embedded import default_redis_url

    return url or default_redis_url()


def _asset_dir(name: str) -> Path:
    """templates/ and static/: inside the package when installed from a wheel, else at the repository top."""
    packaged = PACKAGE_DIR / name
    return packaged if packaged.is_dir() else PACKAGE_DIR.parent / name


def inspector() -> Inspector:
    """The app's Inspector (one per process, shared by its threads: redis-py's pool is thread-safe)."""
    insp: Inspector = current_app.extensions[EXTENSION]
    return insp


def health_inspector() -> Inspector:
    """The Inspector /healthz asks: its own connections, with ASYNQPY_HEALTH_TIMEOUT."""
    insp: Inspector = current_app.extensions[HEALTH]
    return insp


# In a WSGI environ: (status, reason) of a request the server refused before the app saw it (webui.gunicornworker
# sets it on a short request of its own, asking for our error page); a client cannot set it (only HTTP_* keys).
REFUSED = "asynqpy.refused"


def _refused_by_the_server() -> None:
    """Before everything else (no session, no login redirect): the error page of a request the server refused."""
    refused = request.environ.get(REFUSED)
    if refused:
        status, reason = refused
        abort(status, description=reason)


def _register(app: Flask) -> None:
    from webui import (
        access,
        actions,
        auth,
        cronviews,
        findviews,
        jobs,
        limits,
        oidc,
        pages,
        queuenames,
        queues,
        render,
        sampler,
        types,
    )

    app.before_request(_refused_by_the_server)  # first: nothing else runs for such a request
    access.init_app(app)
    auth.init_app(app, inspector)  # headers, sessions, CSRF, the user loader, /login, /logout, /audit
    oidc.init_app(app)  # /login/oidc when ASYNQPY_OIDC_ISSUER is set
    for bp in (pages.bp, queues.bp, actions.bp, jobs.bp, findviews.bp, types.bp, cronviews.bp, limits.bp):
        app.register_blueprint(bp)
    try:
        from webui import metrics  # type: ignore[attr-defined]

        app.register_blueprint(metrics.bp)
    except ImportError:
        pass
    render.init_app(app)
    sampler.init_app(app)

    @app.errorhandler(AsynqError)
    @app.errorhandler(ValueError)
    @app.errorhandler(TypeError)
    def known_error(exc: Exception) -> Any:
        if request.endpoint == "pages.healthz":  # e.g. the session lookup failed before the view ran
            return {"status": "unavailable", "reason": str(exc)}, status_for(exc)
        return render.error_page(exc, status_for(exc))

    @app.errorhandler(404)
    @app.errorhandler(405)
    @app.errorhandler(414)
    def not_found(exc: HTTPException) -> Any:
        if exc.code == 404 and (moved := queuenames.slash_redirect()) is not None:
            return moved  # typed with %2F where the dashboard writes ~2F
        return render.error_page(exc, exc.code or 404)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Any:
        if isinstance(exc, HTTPException):
            return exc
        if is_redis_error(exc):  # from a part that has no door to Redis yet: still our page, never a 500
            app.logger.warning("untranslated Redis error in %s %s: %r", request.method, request.path, exc)
            return known_error(translate(exc, inspector().url))
        app.logger.exception("unexpected error in %s %s", request.method, request.path)
        return render.error_page(exc, 500)
