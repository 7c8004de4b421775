"""A loopback Compute Engine API that answers with the RECORDED response bodies in tests/backends/compute/recorded/gce/,
for the REAL google-cloud-compute client (its REST transport, pointed here by the cluster's
`endpoint` option) and the real google-auth service-account credentials (their self-signed JWT is
verified against the key's public half; an OAuth token from `token_uri` is accepted too).

Only what the gce provider calls: instances.insert / get / list (label filter) / delete,
zoneOperations.wait, and the token endpoint. It keeps the instances it was asked for, so a launch,
a `foundry get instances` and a `clean instances` see one another. Every insert body is checked
against the SDK's own schema (compute_v1.Instance.from_json, unknown fields refused) and GCE's
rules for names, labels and ssh-keys, and kept in `inserts` for the tests to read. Knobs:
`insert_error` (a recorded error file answered to every insert) and `operation_error` (the
recorded operation an insert's wait returns, e.g. the zone out of capacity).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from google.cloud import compute_v1   # at collection: its import (seconds) is the module's cost, not a test's

RECORDED = Path(__file__).resolve().parents[1] / "backends" / "compute" / "recorded" / "gce"
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_PATH = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/"
                   r"(?P<kind>instances|operations)(?:/(?P<name>[^/]+))?(?P<wait>/wait)?$")


def recorded(name: str) -> dict:
    return json.loads((RECORDED / name).read_text())


def check_insert(body: dict) -> None:
    """What GCE itself refuses: the SDK's schema, then the name / label / ssh-keys rules."""
    compute_v1.Instance.from_json(json.dumps(body), ignore_unknown_fields=False)
    assert _NAME.match(body["name"]), f"instance name {body['name']!r} breaks GCE's naming rule"
    for key, value in (body.get("labels") or {}).items():
        assert _LABEL_KEY.match(key) and _LABEL_VALUE.match(value), f"label {key}={value} breaks GCE's rules"
    assert re.match(r"^zones/[a-z0-9-]+/machineTypes/[a-z0-9-]+$", body["machineType"]), body["machineType"]
    [disk] = body["disks"]
    assert disk["boot"] and disk["autoDelete"] and disk["initializeParams"]["sourceImage"]
    for item in body["metadata"]["items"]:
        if item["key"] == "ssh-keys":
            assert re.match(r"^[a-z_][a-z0-9_-]*:ssh-(ed25519|rsa) [A-Za-z0-9+/=]+$", item["value"]), item["value"]
    scheduling = body.get("scheduling") or {}
    if scheduling.get("provisioningModel") == "SPOT":
        assert scheduling.get("instanceTerminationAction") in ("STOP", "DELETE")
    if body.get("guestAccelerators"):
        assert scheduling.get("onHostMaintenance") == "TERMINATE", "GPUs need onHostMaintenance TERMINATE"


class RecordedGCE:
    def __init__(self, address: str = "127.0.0.1", public_key_pem: bytes | None = None,
                 addresses: list[str] | None = None, authorized_keys: Path | None = None):
        # the instances' natIP and networkIP, one after the other: loopback, or the test's own
        # namespace nodes (tests/multinode/test_vm_fleet.py), never anything outside this machine
        self.addresses = list(addresses or [address])
        self._made = 0
        self.authorized_keys = authorized_keys   # given: the guest agent's part, the ssh-keys metadata lands here
        self.public_key_pem = public_key_pem
        self.instances: dict[str, dict] = {}
        self.inserts: list[dict] = []     # the insert bodies, as sent
        self.request_ids: list[str] = []
        self.deleted: list[str] = []
        self.calls: list[str] = []
        self.insert_error: str | None = None
        self.operation_error: str | None = None
        self.tokens: set[str] = set()
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def live(self) -> list[str]:
        with self.lock:
            return sorted(self.instances)

    def add(self, name: str, labels: dict[str, str], machine_type: str = "g2-standard-8") -> None:
        """An instance made outside this test's launches (a leftover, or someone else's)."""
        with self.lock:
            self.instances[name] = self._instance({"name": name, "labels": labels,
                                                   "machineType": f"zones/us-central1-a/machineTypes/{machine_type}"})

    def _instance(self, body: dict) -> dict:
        inst = copy.deepcopy(recorded("instance.json"))
        text = json.dumps(inst).replace("/instances/NAME", f"/instances/{body['name']}").replace(
            "/disks/NAME", f"/disks/{body['name']}")
        inst = json.loads(text)
        inst["name"] = body["name"]
        inst["id"] = str(uuid.uuid4().int % 10**19)
        inst["labels"] = dict(body.get("labels") or {})
        inst["machineType"] = "https://www.googleapis.com/compute/v1/projects/my-project/" + body["machineType"]
        inst["metadata"]["items"] = (body.get("metadata") or {}).get("items", [])
        if body.get("scheduling"):
            inst["scheduling"] = {**inst["scheduling"], **body["scheduling"],
                                  "preemptible": body["scheduling"].get("provisioningModel") == "SPOT"}
        address = self.addresses[self._made % len(self.addresses)]
        self._made += 1
        nic = inst["networkInterfaces"][0]
        nic["networkIP"] = address
        nic["accessConfigs"][0]["natIP"] = address
        if self.authorized_keys is not None:
            with open(self.authorized_keys, "a") as out:
                for item in inst["metadata"]["items"]:
                    if item["key"] == "ssh-keys":
                        out.write(item["value"].split(":", 1)[1] + "\n")   # "user:key" -> key
        return inst

    def start(self) -> "RecordedGCE":
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def _authorized(self) -> bool:
                auth = self.headers.get("Authorization", "")
                if not auth.startswith("Bearer "):
                    return False
                token = auth[len("Bearer "):]
                if token in outer.tokens:
                    return True
                if outer.public_key_pem is None:
                    return False
                from google.auth import jwt

                try:   # the SDK's self-signed JWT, signed with the service account's private key
                    jwt.decode(token, certs=outer.public_key_pem, verify=True,
                               audience=None, clock_skew_in_seconds=60)
                except ValueError:
                    return False
                return True

            def do_POST(self):
                url = urlparse(self.path)
                if url.path == "/token":   # the service account's token_uri (when no self-signed JWT)
                    token = f"ya29.recorded-{uuid.uuid4().hex}"
                    outer.tokens.add(token)
                    return self._send(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})
                self._route("POST", url)

            def do_GET(self):
                self._route("GET", urlparse(self.path))

            def do_DELETE(self):
                self._route("DELETE", urlparse(self.path))

            def _route(self, method: str, url) -> None:
                m = _PATH.match(url.path)
                if not m:
                    return self._send(404, recorded("error_not_found.json"))
                if not self._authorized():
                    return self._send(401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                                      "errors": [{"reason": "authError", "domain": "global"}]}})
                query = parse_qs(url.query)
                kind, name = m["kind"], m["name"]
                outer.calls.append(f"{method} {kind}{'/' + name if name else ''}{m['wait'] or ''}")
                if kind == "operations" and m["wait"]:
                    op = recorded(outer.operation_error or "operation_done.json")
                    return self._send(200, {**op, "name": name})
                if kind == "instances" and name is None and method == "POST":
                    if outer.insert_error:
                        err = recorded(outer.insert_error)
                        return self._send(err["error"]["code"], err)
                    body = self._body()
                    try:
                        check_insert(body)
                    except Exception as exc:   # what GCE answers a body it refuses
                        return self._send(400, {"error": {"code": 400, "message": f"Invalid value: {exc}",
                                                          "errors": [{"reason": "invalid", "domain": "global",
                                                                      "message": str(exc)}]}})
                    with outer.lock:
                        outer.inserts.append(body)
                        outer.request_ids.extend(query.get("requestId", []))
                        if not outer.operation_error:
                            outer.instances[body["name"]] = outer._instance(body)
                    op = recorded("operation_running.json")
                    op["name"] = f"operation-{uuid.uuid4().hex[:12]}-{body['name']}"
                    op["targetLink"] = op["targetLink"].replace("NAME", body["name"])
                    return self._send(200, op)
                if kind == "instances" and name is None and method == "GET":
                    terms = re.findall(r'\(labels\.([a-z0-9_-]+) = "([^"]*)"\)', (query.get("filter") or [""])[0])
                    with outer.lock:
                        items = [i for i in outer.instances.values()
                                 if all(i["labels"].get(k) == v for k, v in terms)]
                    return self._send(200, {"kind": "compute#instanceList", "id": "projects/my-project/zones/x/instances",
                                            "items": items, "selfLink": "https://www.googleapis.com/compute/v1/x"})
                with outer.lock:
                    inst = outer.instances.get(name)
                    if inst is not None and method == "DELETE":
                        del outer.instances[name]
                        outer.deleted.append(name)
                if inst is None:
                    err = json.loads(json.dumps(recorded("error_not_found.json")).replace("NAME", name))
                    return self._send(404, err)
                if method == "DELETE":
                    op = recorded("operation_running.json")
                    return self._send(200, {**op, "operationType": "delete", "name": f"operation-del-{name}"})
                return self._send(200, inst)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
