"""A ServeMux for the worker-metrics tests: `asynqpy worker tests.metrics.apps:mux`.

"ok" sleeps the payload's seconds (default 0.01); "fail" raises; "skip" raises SkipRetry; "revoke" revokes.
"""

from __future__ import annotations

import asyncio

from asynqpy import RevokeTask, ServeMux, SkipRetry

mux = ServeMux()


@mux.handler("ok")
async def ok(t):  # type: ignore[no-untyped-def]
    await asyncio.sleep(float(t.payload or b"0.01"))


@mux.handler("fail")
async def fail(t):  # type: ignore[no-untyped-def]
    raise ValueError("always")


@mux.handler("skip")
async def skip(t):  # type: ignore[no-untyped-def]
    raise SkipRetry("no")


@mux.handler("revoke")
async def revoke(t):  # type: ignore[no-untyped-def]
    raise RevokeTask("mine no more")


@mux.handler("type:")
async def any_type(t):  # type: ignore[no-untyped-def]
    return None
