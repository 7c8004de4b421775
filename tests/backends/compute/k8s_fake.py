"""A FAKE Kubernetes API server on loopback: the few endpoints the kubernetes provider calls
(create / get / patch / delete / list for Jobs, Services, Secrets; list Pods and Nodes; pod logs),
with 404 and 409 answers like the real one. No controllers run: tests play the cluster's part by
editing `objects` (Job status, Pods). It is driven by the REAL kubernetes Python client.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

KINDS = {"jobs": ("batch/v1", "Job"), "services": ("v1", "Service"), "secrets": ("v1", "Secret"),
         "pods": ("v1", "Pod"), "nodes": ("v1", "Node")}


def merge(dst: dict, patch: dict) -> dict:
    for key, value in patch.items():
        if value is None:
            dst.pop(key, None)
        elif isinstance(value, dict) and isinstance(dst.get(key), dict):
            merge(dst[key], value)
        else:
            dst[key] = value
    return dst


def _matches(obj: dict, selector: str | None) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class FakeKubeAPI:
    def __init__(self, token: str = "fake-token"):
        self.token = token
        self.objects: dict[tuple[str, str, str], dict] = {}   # (resource, namespace, name) -> object
        self.logs: dict[tuple[str, str], str] = {}             # (namespace, pod) -> text
        self.requests: list[tuple[str, str]] = []
        self.forbidden: set[str] = set()                       # resources answered with 403
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body, content_type="application/json"):
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str):
                self._send(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": message, "reason": reason, "code": code})

            def _route(self):
                url = urlparse(self.path)
                parts = [p for p in url.path.split("/") if p]
                # /api/v1/... or /apis/batch/v1/...
                parts = parts[2:] if parts[0] == "api" else parts[3:]
                ns = None
                if parts and parts[0] == "namespaces":
                    ns, parts = parts[1], parts[2:]
                resource = parts[0]
                name = parts[1] if len(parts) > 1 else None
                sub = parts[2] if len(parts) > 2 else None
                return resource, ns, name, sub, parse_qs(url.query)

            def _body(self) -> dict:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def _handle(self, method: str):
                fake.requests.append((method, self.path))
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._status(401, "Unauthorized", "Unauthorized")
                resource, ns, name, sub, query = self._route()
                if resource in fake.forbidden:
                    return self._status(403, "Forbidden", f'{resource} is forbidden: User "fake" cannot list')
                api_version, kind = KINDS[resource]
                key = (resource, ns or "", name or "")
                with fake.lock:
                    if method == "POST":
                        body = self._body()
                        key = (resource, ns or "", body["metadata"]["name"])
                        if key in fake.objects:
                            return self._status(409, "AlreadyExists", f'{resource} "{key[2]}" already exists')
                        body["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp="2026-01-01T00:00:00Z")
                        body.setdefault("status", {})
                        fake.objects[key] = body
                        return self._send(201, body)
                    if method == "GET" and name is None:
                        selector = (query.get("labelSelector") or [None])[0]
                        items = [o for (r, n, _), o in sorted(fake.objects.items())
                                 if r == resource and (ns is None or n == ns) and _matches(o, selector)]
                        return self._send(200, {"apiVersion": api_version, "kind": f"{kind}List",
                                                "metadata": {}, "items": items})
                    if key not in fake.objects:
                        return self._status(404, "NotFound", f'{resource} "{name}" not found')
                    if method == "GET" and sub == "log":
                        return self._send(200, fake.logs.get((ns, name), ""), "text/plain")
                    if method == "GET":
                        return self._send(200, fake.objects[key])
                    if method == "PATCH":
                        return self._send(200, merge(fake.objects[key], self._body()))
                    if method == "DELETE":
                        gone = fake.objects.pop(key)
                        if resource == "services":   # like the real server: the deleted object
                            return self._send(200, gone)
                        return self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
                return self._status(405, "MethodNotAllowed", method)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

            def do_DELETE(self):
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> "FakeKubeAPI":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, context: str = "fake") -> dict:
        return {"apiVersion": "v1", "kind": "Config", "current-context": context,
                "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                "users": [{"name": "fake", "user": {"token": self.token}}],
                "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake"}}]}

    # ---- playing the cluster's part
    def get(self, resource: str, ns: str, name: str) -> dict | None:
        return self.objects.get((resource, ns, name))

    def add_pod(self, ns: str, job: str, index: int, phase: str, exit_code: int | None = None,
                reason: str | None = None, log: str = "") -> None:
        labels = dict(self.objects[("jobs", ns, job)]["spec"]["template"]["metadata"]["labels"])
        labels.update({"batch.kubernetes.io/job-name": job, "batch.kubernetes.io/job-completion-index": str(index)})
        status: dict = {"phase": phase}
        if exit_code is not None:
            status["containerStatuses"] = [{"name": "trainer", "ready": False, "restartCount": 0, "image": "x",
                                            "imageID": "", "state": {"terminated": {"exitCode": exit_code, "reason": reason or "Error"}}}]
        name = f"{job}-{index}-abcde"
        self.objects[("pods", ns, name)] = {"apiVersion": "v1", "kind": "Pod", "status": status,
                                            "metadata": {"name": name, "namespace": ns, "labels": labels}}
        self.logs[(ns, name)] = log

    def set_job_status(self, ns: str, job: str, **status) -> None:
        self.objects[("jobs", ns, job)]["status"] = status
