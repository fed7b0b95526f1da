"""The gunicorn worker `asynqpy web` runs: gunicorn's gthread worker, except that a request line over gunicorn's
bound (limit_request_line, which `asynqpy web` sets to gunicorn's maximum, MAX_REQUEST_LINE bytes) is answered
with the dashboard's own error page (status 414) instead of gunicorn's unstyled one.

The bound stays: gunicorn stops reading the line at it and refuses the request, as before; only the answer
changes. It is made by the app itself, asked with a short request of our own that carries REFUSED in its WSGI
environment (a key no client can set: clients reach the environment only through HTTP_* headers), so it is the
same page as every other error, with the same headers (CSP and the rest) and under the same --url-prefix.
Other requests gunicorn refuses (a malformed line, too many or too large headers) keep gunicorn's answer.
"""

from __future__ import annotations

import io
import sys
from typing import Any

from gunicorn import util  # type: ignore[import-untyped]
from gunicorn.http.errors import LimitRequestLine  # type: ignore[import-untyped]
from gunicorn.workers.gthread import ThreadWorker  # type: ignore[import-untyped]

from webui.app import REFUSED

MAX_REQUEST_LINE = 8190  # gunicorn refuses a larger limit_request_line (0 would mean no bound at all)


class Worker(ThreadWorker):  # type: ignore[misc]
    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        if not isinstance(exc, LimitRequestLine):
            super().handle_error(req, client, addr, exc)
            return
        ip = (addr or ("", -1))[0]
        self.log.warning("Invalid request from ip=%s: %s", ip, exc)
        reason = f"the request line is longer than {self.cfg.limit_request_line} bytes"
        try:
            util.write_nonblock(client, self._page(ip, reason))
        except Exception:  # the client left, or the app failed: gunicorn's own answer, as before
            self.log.debug("Failed to send the dashboard's 414 page.", exc_info=True)
            super().handle_error(req, client, addr, exc)

    def _page(self, ip: str, reason: str) -> bytes:
        """The app's answer to a GET / that carries REFUSED = (414, reason), as the bytes of one HTTP response."""
        environ = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": "/", "QUERY_STRING": "",
                   "SERVER_NAME": "localhost", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
                   "REMOTE_ADDR": ip, "wsgi.version": (1, 0), "wsgi.url_scheme": "https" if self.cfg.is_ssl else "http",
                   "wsgi.input": io.BytesIO(), "wsgi.errors": sys.stderr, "wsgi.multithread": True,
                   "wsgi.multiprocess": True, "wsgi.run_once": False, REFUSED: (414, reason)}
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            answer[:] = [status, headers]

        chunks = self.wsgi(environ, start_response)
        try:
            body = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        status, headers = answer
        head = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers
                                         if k.lower() not in ("connection", "content-length")]
        head += ["Connection: close", f"Content-Length: {len(body)}"]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
