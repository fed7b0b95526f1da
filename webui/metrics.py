"""The dashboard's /metrics: the queue-state exporter as a Flask blueprint (no login; an optional bearer token).

Register it with `app.register_blueprint(webui.metrics.bp)`. It reads from the app config:
ASYNQPY_INSPECTOR (an Inspector to use; default: the dashboard's, when mounted on it) or ASYNQPY_REDIS_URL
(default: asynqpy's default URL), METRICS_TOKEN or ASYNQPY_METRICS_TOKEN (require `Authorization: Bearer
<token>`; the dashboard config file's ``metrics_token`` arrives as the latter; default ASYNQPY_METRICS_TOKEN from
the environment) and METRICS_MAX_AGE (seconds a shared snapshot may be reused;
default the dashboard's ASYNQPY_POLL_SECONDS, so scrapes and pages share one snapshot per interval, else 2).
A scrape always answers 200, whatever Redis does (see exporter.collector).
"""

from __future__ import annotations

import os

from flask import Blueprint, Response, current_app, request

from asynqpy.embedded import default_redis_url
from asynqpy.metrics.http import authorized
from exporter.collector import QueueStateCollector
from exporter.exposition import CONTENT_TYPE
from inspector import Inspector

bp = Blueprint("metrics", __name__)

_EXT = "asynqpy_metrics"


def _collector() -> QueueStateCollector:
    col = current_app.extensions.get(_EXT)
    if col is None:
        cfg = current_app.config
        # The dashboard's own Inspector when mounted on it: scrapes and pages share one pool and one last snapshot.
        insp = (cfg.get("ASYNQPY_INSPECTOR") or current_app.extensions.get("asynqpy.inspector")
                or Inspector(cfg.get("ASYNQPY_REDIS_URL") or default_redis_url()))
        max_age = cfg.get("METRICS_MAX_AGE", cfg.get("ASYNQPY_POLL_SECONDS", 2.0))
        col = QueueStateCollector(insp, max_age=float(max_age))
        current_app.extensions[_EXT] = col
    return col


@bp.get("/metrics")
def metrics() -> Response:
    cfg = current_app.config
    # the config file's metrics_token is ASYNQPY_METRICS_TOKEN in app.config: reading only METRICS_TOKEN left
    # /metrics open to anyone while its owner believed it protected
    token = cfg.get("METRICS_TOKEN") or cfg.get("ASYNQPY_METRICS_TOKEN") or os.environ.get("ASYNQPY_METRICS_TOKEN")
    if not authorized(token, request.headers.get("Authorization")):
        return Response("a bearer token is required\n", 401, {"WWW-Authenticate": "Bearer"},
                        mimetype="text/plain")
    return Response(_collector().render(), 200, content_type=CONTENT_TYPE)
