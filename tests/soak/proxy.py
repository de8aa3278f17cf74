"""A fault-injecting HTTP proxy in front of the moto S3 server (127.0.0.1 only).

Every request a worker's S3 client sends goes through it. The soak turns faults
on and off while it runs:

* ``latency``: seconds added before each request is forwarded (a slow S3);
* ``fail_next(n)``: the next ``n`` requests get ``503 SlowDown`` (an S3 5xx
  burst), after which requests pass again (recovery).

Only plain HTTP with a ``Content-Length`` body (what botocore sends to an
``http://`` endpoint) is forwarded; that is all the soak needs.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class FaultProxy:
    """A threaded proxy to ``upstream`` (``http://127.0.0.1:<port>``) with faults."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.latency = 0.0
        self.injected = 0
        self.forwarded = 0
        self._failing = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _relay(self) -> None:
                proxy.relay(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a killed worker's reset connection is expected here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, n: int) -> None:
        with self._lock:
            self._failing += n

    def _take_failure(self) -> bool:
        with self._lock:
            if self._failing > 0:
                self._failing -= 1
                self.injected += 1
                return True
            return False

    def relay(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        if self.latency:
            threading.Event().wait(self.latency)
        if self._take_failure():
            handler.send_response(503)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(SLOW_DOWN)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(SLOW_DOWN)
            return
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_HEADERS}
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        with self._lock:
            self.forwarded += 1
        handler.send_response(response.status, response.reason)
        head = handler.command == "HEAD"  # a HEAD's Content-Length is the object's size
        for key, value in response.getheaders():
            if key.lower() not in HOP_HEADERS and (head or key.lower() != "content-length"):
                handler.send_header(key, value)
        if not head:
            handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)
