"""A stand-in Sentry ingest endpoint on 127.0.0.1 that records the envelopes it receives,
so the callback's Sentry reporting runs with the real sentry-sdk and no network."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import zlib


class SentryRecorder:
    """``with SentryRecorder() as sentry:`` then point a DSN at ``sentry.dsn(project)``."""

    def __init__(self):
        self.envelopes: list[dict] = []  # {"path", "raw", "items": [(header, payload)]}
        self._lock = threading.Lock()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                elif encoding == "br":
                    import brotli  # sentry-sdk only picks br when brotli is installed
                    body = brotli.decompress(body)
                recorder._record(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _record(self, path, body):
        lines = body.decode("utf-8", "replace").split("\n")
        items = []
        # Envelope: a header line, then pairs of item header and payload lines.
        for index in range(1, len(lines) - 1, 2):
            if not lines[index].strip():
                continue
            header = json.loads(lines[index])
            payload = lines[index + 1]
            try:
                payload = json.loads(payload)
            except ValueError:
                pass
            items.append((header, payload))
        with self._lock:
            self.envelopes.append({"path": path, "raw": body.decode("utf-8", "replace"), "items": items})

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def dsn(self, project: int = 1) -> str:
        return f"http://public{project}@127.0.0.1:{self.port}/{project}"

    def events(self) -> list[dict]:
        with self._lock:
            return [payload for envelope in self.envelopes for header, payload in envelope["items"]
                    if header.get("type") == "event"]

    def raw(self) -> str:
        with self._lock:
            return "\n".join(envelope["raw"] for envelope in self.envelopes)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
