"""oci:// against a loopback stub replaying OCI Object Storage responses (no OCI emulator exists).

The stub answers the REST shapes of the real service (paths /n/{ns}/b/{bucket}/o/{name} and /u for
multipart, JSON bodies and `code` fields as recorded from the API) and records each request, so the
tests check what the oci SDK sends through our backend and how errors are mapped. Skipped only
when the `oci` package is not installed.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

oci = pytest.importorskip("oci")

from foundry.plugins.errors import (  # noqa: E402
    BucketNotFoundError, ConfigError, CredentialsError, ObjectNotFoundError, TransientStorageError,
)
from foundry.plugins.manager import open_store  # noqa: E402

MiB = 1 << 20


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
                prefix = query.get("prefix", "")
                names = sorted(n for n in stub.objects if n.startswith(prefix) and n >= query.get("start", ""))
                page, rest = names[:2], names[2:]  # tiny pages, so pagination is exercised
                return self._reply(200, {"objects": [{"name": n, "size": len(stub.objects[n]), "etag": f"e-{n}"} for n in page],
                                         "nextStartWith": rest[0] if rest else None, "prefixes": []})
            if kind == "o":
                return self._object(name)
            if kind == "u":
                return self._multipart(name, query, body)
            return self._error(400, "InvalidParameter", "unexpected path")

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


def test_operations_and_request_shapes(oci_stub, tmp_path):
    stub, options = oci_stub
    store = open_store("oci://bkt@ns/pre", options)
    store.put("a/1", b"one")
    store.put("a/2", b"two")
    store.put("b", b"bee")
    put = stub.requests[0]
    assert (put["method"], put["path"]) == ("PUT", "/n/ns/b/bkt/o/pre%2Fa%2F1")  # the SDK escapes "/" in names
    assert put["headers"].get("authorization", put["headers"].get("Authorization", "")).startswith("Signature ")
    assert store.get("a/1") == b"one"
    assert store.get_range("a/2", 1, 3) == b"wo"
    assert stub.requests[-1]["headers"].get("range") == "bytes=1-2"
    assert store.get_range("a/2", 10, 20) == b""
    assert store.head("b").size == 3
    assert [o.key for o in store.list()] == ["a/1", "a/2", "b"]  # two pages
    listing = [r for r in stub.requests if r["method"] == "GET" and r["path"] == "/n/ns/b/bkt/o"]
    assert listing[0]["query"]["prefix"] == "pre/" and "start" in listing[-1]["query"]
    assert [o.key for o in store.list("a/")] == ["a/1", "a/2"]
    store.delete("b")
    store.delete("b")  # missing is fine
    assert not store.exists("b")
    with pytest.raises(ObjectNotFoundError, match="no such object: oci://bkt@ns/pre/b"):
        store.get("b")


def test_multipart_upload_and_parallel_download(oci_stub, tmp_path):
    stub, options = oci_stub
    store = open_store("oci://bkt@ns", {**options, "part_size": 5 * MiB, "multipart_threshold": 5 * MiB})
    payload = os.urandom(11 * MiB)
    (tmp_path / "src").write_bytes(payload)
    store.put_file("big", tmp_path / "src")
    shapes = [(r["method"], r["path"], tuple(sorted(r["query"]))) for r in stub.requests]
    assert shapes[0] == ("POST", "/n/ns/b/bkt/u", ())
    assert sorted(s for s in shapes if s[0] == "PUT") == [("PUT", "/n/ns/b/bkt/u/big", ("uploadId", "uploadPartNum"))] * 3
    assert shapes[-1] == ("POST", "/n/ns/b/bkt/u/big", ("uploadId",))
    assert stub.objects["big"] == payload
    store.get_file("big", tmp_path / "dl")
    assert (tmp_path / "dl").read_bytes() == payload


def test_error_mapping_and_retries(oci_stub):
    stub, options = oci_stub
    store = open_store("oci://bkt@ns", {**options, "attempts": 3})
    stub.fail = [(429, "TooManyRequests"), (503, "ServiceUnavailable")]
    store.put("k", b"v")  # third attempt succeeds
    assert stub.objects["k"] == b"v"
    stub.fail = [(503, "ServiceUnavailable")] * 3
    with pytest.raises(TransientStorageError, match="after 3 attempts"):
        store.get("k")
    stub.fail = [(401, "NotAuthenticated")]
    with pytest.raises(CredentialsError):
        store.get("k")
    assert stub.fail == []  # not retried
    with pytest.raises(BucketNotFoundError):
        open_store("oci://other@ns", options).get("k")
    stub.fail = [(404, "NotAuthorizedOrNotFound")]
    with pytest.raises(BucketNotFoundError, match="not visible"):
        store.get("k")


def test_bad_urls_and_missing_config(tmp_path):
    with pytest.raises(ConfigError, match="BUCKET@NAMESPACE"):
        open_store("oci://bucket/x")
    store = open_store("oci://b@ns", {"config_file": str(tmp_path / "missing")})
    with pytest.raises(CredentialsError) as info:
        store.get("k")
    assert "foundry create secret oci" in info.value.hint
