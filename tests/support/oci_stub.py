"""A loopback stub replaying OCI Object Storage responses (no OCI emulator exists).

The stub answers the REST shapes of the real service (paths /n/{ns}/b/{bucket}/o/{name} and /u for
multipart, JSON bodies and `code` fields as recorded from the API, `prefixes` for a delimiter
listing) and records each request, so tests check what the oci SDK sends through our backend and
how errors are mapped. `oci_stub` (function scope) yields (stub, store options); the bucket is
`bkt` in namespace `ns`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest


class Stub:
    """In-memory OCI Object Storage with scripted failures, recording every request."""

    def __init__(self):
        self.objects: dict[str, bytes] = {}
        self.uploads: dict[str, dict[int, bytes]] = {}
        self.requests: list[dict] = []
        self.fail: list[tuple[int, str]] = []  # (status, code) answered to the next requests
        self.lock = threading.Lock()


def _handler(stub: Stub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _reply(self, status, body=b"", headers=None):
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                headers = {"content-type": "application/json", **(headers or {})}
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("opc-request-id", "stub-request")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status, code, message):
            self._reply(status, {"code": code, "message": message})

        def _handle(self):
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            body = self._body
            parts = [unquote(p) for p in url.path.split("/")[1:]]
            with stub.lock:
                stub.requests.append({"method": self.command, "path": url.path, "query": query,
                                      "headers": dict(self.headers), "body_len": len(body)})
                failure = stub.fail.pop(0) if stub.fail else None
            if failure:
                return self._error(failure[0], failure[1], "scripted failure")
            if "authorization" not in {k.lower() for k in self.headers}:
                return self._error(401, "NotAuthenticated", "The required information to complete authentication was not provided.")
            if len(parts) < 5 or parts[0] != "n" or parts[2] != "b":
                return self._error(404, "NotAuthorizedOrNotFound", "Not found")
            bucket, kind, name = parts[3], parts[4], "/".join(parts[5:])
            if bucket != "bkt":
                return self._error(404, "BucketNotFound", f"Either the bucket named '{bucket}' does not exist in the namespace 'ns' or you are not authorized to access it")
            if kind == "o" and not name and self.command == "GET":
                return self._list(query)
            if kind == "o":
                return self._object(name)
            if kind == "u":
                return self._multipart(name, query, body)
            return self._error(400, "InvalidParameter", "unexpected path")

        def _list(self, query):
            prefix, delimiter = query.get("prefix", ""), query.get("delimiter")
            entries: dict[str, str] = {}  # sort key -> "object" or "prefix", as the service pages them
            for n in stub.objects:
                if not n.startswith(prefix):
                    continue
                rest = n[len(prefix):]
                if delimiter and delimiter in rest:
                    entries[prefix + rest.split(delimiter, 1)[0] + delimiter] = "prefix"
                else:
                    entries[n] = "object"
            names = sorted(n for n in entries if n >= query.get("start", ""))
            page, rest = names[:2], names[2:]  # tiny pages, so pagination is exercised
            return self._reply(200, {
                "objects": [{"name": n, "size": len(stub.objects[n]), "etag": f"e-{n}"} for n in page if entries[n] == "object"],
                "prefixes": [n for n in page if entries[n] == "prefix"],
                "nextStartWith": rest[0] if rest else None})

        def _object(self, name):
            if self.command == "PUT":
                stub.objects[name] = self._body
                return self._reply(200, headers={"etag": f"e-{name}", "opc-content-md5": "x"})
            if self.command == "DELETE":
                if stub.objects.pop(name, None) is None:
                    return self._error(404, "ObjectNotFound", f"The object '{name}' was not found in the bucket 'bkt'")
                return self._reply(204)
            if name not in stub.objects:
                return self._error(404, "ObjectNotFound", f"The object '{name}' was not found in the bucket 'bkt'")
            data = stub.objects[name]
            headers = {"etag": f"e-{name}", "content-type": "application/octet-stream"}
            rng = self.headers.get("range")
            if rng and self.command == "GET":
                start, _, end = rng.removeprefix("bytes=").partition("-")
                start, end = int(start), min(int(end), len(data) - 1)
                if start >= len(data):
                    return self._error(416, "InvalidRange", "The requested range is not satisfiable")
                headers["content-range"] = f"bytes {start}-{end}/{len(data)}"
                return self._reply(206, data[start:end + 1], headers)
            if self.command == "HEAD":
                self.send_response(200)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                return None
            return self._reply(200, data, headers)

        def _multipart(self, name, query, body):
            if self.command == "POST" and not name:
                details = json.loads(body)
                upload_id = f"upload-{len(stub.uploads)}"
                stub.uploads[upload_id] = {}
                return self._reply(200, {"namespace": "ns", "bucket": "bkt", "object": details["object"],
                                         "uploadId": upload_id, "timeCreated": "2026-01-01T00:00:00.000Z"})
            upload = stub.uploads[query["uploadId"]]
            if self.command == "PUT":
                upload[int(query["uploadPartNum"])] = body
                return self._reply(200, headers={"etag": f"part-{query['uploadPartNum']}"})
            if self.command == "POST":
                commit = json.loads(body)["partsToCommit"]
                assert [p["etag"] for p in commit] == [f"part-{p['partNum']}" for p in commit]
                stub.objects[name] = b"".join(upload[p["partNum"]] for p in sorted(commit, key=lambda p: p["partNum"]))
                return self._reply(200, headers={"etag": f"e-{name}"})
            if self.command == "DELETE":
                stub.uploads.pop(query["uploadId"])
                return self._reply(204)
            return self._error(400, "InvalidParameter", "unexpected multipart request")

        def _dispatch(self):
            length = int(self.headers.get("content-length") or 0)
            self._body = self.rfile.read(length) if length else b""
            self._handle()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _dispatch

    return Handler


@pytest.fixture
def oci_stub(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = tmp_path / "key.pem"
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
    stub = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    options = {"endpoint_url": f"http://127.0.0.1:{server.server_address[1]}", "user": "ocid1.user.oc1..aaaa",
               "tenancy": "ocid1.tenancy.oc1..aaaa", "fingerprint": "20:3b:97:13:55:1c:5b:0d:d3:37:d8:50:4e:c5:3a:34", "key_file": str(key_file),
               "region": "us-ashburn-1", "retry_base_delay": 0.01}
    try:
        yield stub, options
    finally:
        server.shutdown()
        server.server_close()
