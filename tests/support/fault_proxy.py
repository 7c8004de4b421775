"""A small fault-injecting HTTP proxy on 127.0.0.1, for testing retries against a real server.

    with FaultProxy("http://127.0.0.1:8333", rate=0.2, seed=1) as proxy:
        store = open_store("s3://bucket", {"endpoint_url": proxy.url, ...})

Each HTTP request from the client is, with probability `rate`, answered by a fault instead of the
upstream server; otherwise it is forwarded (Host header untouched, so S3 signatures still match).
Faults (`kinds`):
- "reset": the connection is reset (RST) before the request reaches the server;
- "slowdown": HTTP 503 with an S3 `SlowDown` error body;
- "stall": nothing is answered for `stall_s` seconds, then the connection closes;
- "truncate": GET only: the server's response is forwarded with half its body, then closed.
Faults that would hide a completed write (a reset after forwarding a POST) are never injected.
A kind listed twice in `kinds` is picked twice as often. `proxy.faults` counts the faults injected
by kind; `proxy.rate` can be changed at any time.
"""

from __future__ import annotations

import http.client
import random
import socket
import socketserver
import struct
import threading
from collections import Counter
from urllib.parse import urlsplit

KINDS = ("reset", "slowdown", "stall", "truncate")
_SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class FaultProxy:
    def __init__(self, upstream: str, rate: float = 0.0, kinds: tuple[str, ...] = KINDS,
                 stall_s: float = 2.0, seed: int | None = None):
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rate = rate
        self.kinds = tuple(kinds)
        self.stall_s = stall_s
        self.faults: Counter[str] = Counter()
        self.requests = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True, name="fault-proxy")

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def _pick(self, method: str) -> str | None:
        with self._lock:
            self.requests += 1
            if self._random.random() >= self.rate:
                return None
            kinds = [k for k in self.kinds if k != "truncate" or method == "GET"] or ["slowdown"]
            kind = self._random.choice(kinds)
            self.faults[kind] += 1
            return kind

    # -- one client connection -----------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        upstream: http.client.HTTPConnection | None = None
        try:
            while not self._closing.is_set():
                request = _read_request(reader, sock)
                if request is None:
                    return
                method, target, headers, body = request
                fault = self._pick(method)
                if fault == "reset":
                    _reset(sock)
                    return
                if fault == "slowdown":
                    sock.sendall(_response(503, "Slow Down", [("Content-Type", "application/xml")], _SLOWDOWN))
                    continue
                if fault == "stall":
                    self._closing.wait(self.stall_s)
                    return
                if upstream is None:
                    upstream = http.client.HTTPConnection(*self.upstream, timeout=30)
                upstream.request(method, target, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                head = method == "HEAD"  # keeps the server's Content-Length (the object's size)
                out = [(k, v) for k, v in response.getheaders()
                       if k.lower() not in _HOP and (head or k.lower() != "content-length")]
                if fault == "truncate" and len(data) > 1:
                    raw = _response(response.status, response.reason, out, data)
                    sock.sendall(raw[: len(raw) - len(data) // 2])
                    _reset(sock)
                    return
                sock.sendall(_response(response.status, response.reason, out, data, head=head))
        except (ConnectionError, OSError, http.client.HTTPException):
            return
        finally:
            if upstream is not None:
                upstream.close()
            try:
                sock.close()
            except OSError:
                pass


def _read_request(reader, sock: socket.socket) -> tuple[str, str, dict[str, str], bytes] | None:
    line = reader.readline(65537)
    if not line:
        return None
    method, target, _ = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        line = reader.readline(65537)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip()] = value.strip()
    lower = {k.lower(): v for k, v in headers.items()}
    if lower.get("expect", "").lower() == "100-continue":
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # else the client waits a second for it
        headers = {k: v for k, v in headers.items() if k.lower() != "expect"}
    if lower.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int(reader.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                reader.readline()
                break
            body += reader.read(size)
            reader.readline()
        headers = {k: v for k, v in headers.items() if k.lower() != "transfer-encoding"}
        headers["Content-Length"] = str(len(body))
        return method, target, headers, bytes(body)
    length = int(lower.get("content-length", "0") or 0)
    body = reader.read(length) if length else b""
    return method, target, headers, body


def _response(status: int, reason: str, headers: list[tuple[str, str]], body: bytes, head: bool = False) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    if not head:
        lines.append(f"Content-Length: {len(body)}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return raw if head else raw + body


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a crashed server or a middlebox would."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass
