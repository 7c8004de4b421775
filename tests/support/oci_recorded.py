"""A loopback OCI Core Services API that answers with the RECORDED response bodies in tests/backends/compute/recorded/oci/,
for the REAL `oci` SDK clients (ComputeClient, VirtualNetworkClient), pointed here by the cluster's
`endpoint` option. Every request's signature (OCI's HTTP signature, rsa-sha256 over date,
(request-target), host and the body headers) is verified against the API key's public half.

Only what the oci-vm provider calls: LaunchInstance, GetInstance, ListInstances, TerminateInstance,
ListVnicAttachments, GetVnic. It keeps the instances it launched, so a launch, `get instances` and
`clean instances` see one another. Every LaunchInstance body is checked against the SDK's own model
types (check_model: unknown fields refused, nested and polymorphic types followed) and kept in
`launches`. Knob: `launch_error` (a recorded error file answered to every launch).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

RECORDED = Path(__file__).resolve().parents[1] / "backends" / "compute" / "recorded" / "oci"


# the test tenancy's names, as the recorded bodies use them
COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaaexamplecompartmentid"
SUBNET = "ocid1.subnet.oc1.iad.aaaaaaaaexamplesubnetid"
IMAGE = "ocid1.image.oc1.iad.aaaaaaaaexampleimageid"
OCI_CONFIG = """[DEFAULT]
user=ocid1.user.oc1..aaaaaaaaexampleuserid
fingerprint=20:3b:97:13:55:1c:5b:0d:d3:37:d8:50:4e:c5:3a:34
tenancy=ocid1.tenancy.oc1..aaaaaaaaexampletenancyid
region=us-ashburn-1
key_file=/foundry/secrets/oci/key.pem
"""


def recorded(name: str) -> dict:
    return json.loads((RECORDED / name).read_text())


def _public(inst: dict) -> dict:
    """An instance as the API shows it (without the server's own bookkeeping keys)."""
    return {k: v for k, v in inst.items() if not k.startswith("_")}


def check_model(data, type_name: str, path: str = "$") -> None:
    """`data` (the wire JSON) fits the SDK's model `type_name`: every key is one of its attributes,
    recursively; a polymorphic base (InstanceSourceDetails...) resolves to its subtype first."""
    from oci.core import models

    if data is None:
        return
    m = re.match(r"^list\[(.+)\]$", type_name)
    if m:
        assert isinstance(data, list), f"{path}: a list expected"
        for i, item in enumerate(data):
            check_model(item, m[1], f"{path}[{i}]")
        return
    m = re.match(r"^dict\(str, (.+)\)$", type_name)
    if m:
        assert isinstance(data, dict), f"{path}: an object expected"
        for k, v in data.items():
            check_model(v, m[1], f"{path}.{k}")
        return
    model = getattr(models, type_name, None)
    if model is None:   # a scalar (str, int, float, bool, datetime, object)
        expected = {"str": str, "int": int, "bool": bool, "float": (int, float)}.get(type_name)
        if expected:
            assert isinstance(data, expected) and not (expected is int and isinstance(data, bool)), \
                f"{path}: {type_name} expected, got {data!r}"
        return
    if hasattr(model, "get_subtype"):
        type_name = model.get_subtype(data)
        model = getattr(models, type_name)
    assert isinstance(data, dict), f"{path}: a {type_name} object expected"
    inst = model()
    by_wire = {wire: attr for attr, wire in inst.attribute_map.items()}
    for key, value in data.items():
        assert key in by_wire, f"{path}.{key}: not a field of {type_name}"
        check_model(value, inst.swagger_types[by_wire[key]], f"{path}.{key}")


def check_launch(body: dict) -> None:
    check_model(body, "LaunchInstanceDetails")
    for key in ("availabilityDomain", "compartmentId", "shape"):
        assert body.get(key), f"{key} is required"
    assert body["sourceDetails"]["sourceType"] == "image" and body["sourceDetails"]["imageId"].startswith("ocid1.image.")
    assert body["createVnicDetails"]["subnetId"].startswith("ocid1.subnet.")
    assert re.match(r"^ssh-(ed25519|rsa) [A-Za-z0-9+/=]+$", body["metadata"]["ssh_authorized_keys"])
    if body["shape"].endswith(".Flex"):
        assert body["shapeConfig"]["ocpus"] > 0, "a flexible shape needs shapeConfig.ocpus"
    if body.get("preemptibleInstanceConfig"):
        assert body["preemptibleInstanceConfig"]["preemptionAction"]["type"] == "TERMINATE"


class RecordedOCI:
    def __init__(self, public_key_pem: bytes, address: str = "127.0.0.1", addresses: list[str] | None = None,
                 authorized_keys: Path | None = None):
        self.public_key_pem = public_key_pem
        # the VNICs' publicIp and privateIp, one instance after the other: loopback, or the test's own
        # namespace nodes (tests/multinode/test_vm_fleet.py), never anything outside this machine
        self.addresses = list(addresses or [address])
        self._made = 0
        self.authorized_keys = authorized_keys   # given: cloud-init's part, ssh_authorized_keys lands here
        self.instances: dict[str, dict] = {}
        self.launches: list[dict] = []    # LaunchInstance bodies, as sent
        self.retry_tokens: list[str] = []
        self.terminated: list[str] = []
        self.calls: list[str] = []
        self.launch_error: str | None = None
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def live(self) -> list[str]:
        with self.lock:
            return sorted(i["displayName"] for i in self.instances.values() if i["lifecycleState"] != "TERMINATED")

    def set_state(self, display_name: str, state: str) -> None:
        with self.lock:
            for inst in self.instances.values():
                if inst["displayName"] == display_name:
                    inst["lifecycleState"] = state

    def add(self, display_name: str, tags: dict[str, str], shape: str = "VM.GPU.A10.1") -> str:
        """An instance launched outside this test's launches (a leftover, or someone else's)."""
        body = {"displayName": display_name, "freeformTags": tags, "shape": shape, "metadata": {},
                "availabilityDomain": "Uocm:US-ASHBURN-AD-1",
                "compartmentId": "ocid1.compartment.oc1..aaaaaaaaexamplecompartmentid",
                "sourceDetails": {"sourceType": "image", "imageId": "ocid1.image.oc1.iad.aaaaaaaaexampleimageid"}}
        with self.lock:
            inst = self._instance(body)
            inst["lifecycleState"] = "RUNNING"
            self.instances[inst["id"]] = inst
        return inst["id"]

    def _instance(self, body: dict) -> dict:
        inst = copy.deepcopy(recorded("instance.json"))
        inst["id"] = f"ocid1.instance.oc1.iad.anuwcljt{uuid.uuid4().hex}"
        for key in ("displayName", "freeformTags", "shape", "metadata", "availabilityDomain", "compartmentId",
                    "preemptibleInstanceConfig"):
            if key in body:
                inst[key] = body[key]
        inst["sourceDetails"] = {**inst["sourceDetails"], **body["sourceDetails"]}
        inst["imageId"] = body["sourceDetails"]["imageId"]
        inst["_address"] = self.addresses[self._made % len(self.addresses)]
        self._made += 1
        if self.authorized_keys is not None and (body.get("metadata") or {}).get("ssh_authorized_keys"):
            with open(self.authorized_keys, "a") as out:
                out.write(body["metadata"]["ssh_authorized_keys"] + "\n")
        if body.get("shapeConfig"):
            inst["shapeConfig"] = {**inst["shapeConfig"], "ocpus": body["shapeConfig"]["ocpus"],
                                   "memoryInGBs": body["shapeConfig"].get("memoryInGBs"), "gpus": 0}
        return inst

    def _verify(self, handler, method: str, body: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding

        auth = handler.headers.get("Authorization", "")
        fields = dict(re.findall(r'(\w+)="([^"]*)"', auth))
        if not auth.startswith("Signature ") or fields.get("algorithm") != "rsa-sha256" or fields.get("version") != "1":
            return False
        lines = []
        for name in fields.get("headers", "").split():
            if name == "(request-target)":
                lines.append(f"(request-target): {method.lower()} {handler.path}")
            else:
                value = handler.headers.get(name)
                if value is None:
                    return False
                lines.append(f"{name}: {value}")
        if method in ("POST", "PUT"):
            if not {"x-content-sha256", "content-length"} <= set(fields["headers"].split()):
                return False   # OCI requires the body headers to be signed
            if handler.headers.get("x-content-sha256") != base64.b64encode(hashlib.sha256(body).digest()).decode():
                return False
        key = serialization.load_pem_public_key(self.public_key_pem)
        try:
            key.verify(base64.b64decode(fields["signature"]), "\n".join(lines).encode(), padding.PKCS1v15(),
                       hashes.SHA256())
        except InvalidSignature:
            return False
        return True

    def start(self) -> "RecordedOCI":
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body=None, headers: dict | None = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("opc-request-id", uuid.uuid4().hex.upper())
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, name: str) -> None:
                err = recorded(name)
                self._send(err["status"], err["body"])

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_DELETE(self):
                self._route("DELETE")

            def _route(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not outer._verify(self, method, body):
                    return self._send(401, {"code": "NotAuthenticated",
                                            "message": "The required information to complete authentication was not provided or was incorrect."})
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                parts = [p for p in url.path.split("/") if p]
                if not parts or parts[0] != "20160918":
                    return self._error("error_not_found.json")
                kind, ident = parts[1], (parts[2] if len(parts) > 2 else None)
                outer.calls.append(f"{method} {kind}{'/' + ident if ident else ''}")
                with outer.lock:
                    if kind == "instances" and method == "POST" and ident is None:
                        if outer.launch_error:
                            return self._error(outer.launch_error)
                        data = json.loads(body)
                        try:
                            check_launch(data)
                        except AssertionError as exc:   # what OCI answers a body it refuses
                            return self._send(400, {"code": "InvalidParameter", "message": str(exc)})
                        token = self.headers.get("opc-retry-token")
                        same = [i for i in outer.instances.values() if i.get("_token") == token] if token else []
                        if same:   # OCI: the same retry token within 24 h is the same request
                            return self._send(200, _public(same[0]))
                        outer.launches.append(data)
                        outer.retry_tokens.append(token)
                        inst = outer._instance(data)
                        outer.instances[inst["id"]] = {**inst, "_token": token}
                        reply = _public(inst)
                        inst_ref = outer.instances[inst["id"]]
                        inst_ref["lifecycleState"] = "RUNNING"   # the next GetInstance finds it up
                        return self._send(200, reply, {"etag": uuid.uuid4().hex})
                    if kind == "instances" and ident is None:
                        items = [_public(i) for i in outer.instances.values()
                                 if i["compartmentId"] == query.get("compartmentId")
                                 and i["availabilityDomain"] == query.get("availabilityDomain", i["availabilityDomain"])]
                        return self._send(200, items)
                    if kind == "instances":
                        inst = outer.instances.get(ident)
                        if inst is None:
                            return self._error("error_not_found.json")
                        if method == "DELETE":
                            if inst["lifecycleState"] in ("TERMINATING", "TERMINATED"):
                                return self._send(409, {"code": "Conflict", "message": "The instance is already terminating."})
                            inst["lifecycleState"] = "TERMINATED"
                            outer.terminated.append(inst["displayName"])
                            return self._send(204)
                        return self._send(200, _public(inst), {"etag": "x"})
                    if kind == "vnicAttachments":
                        inst = outer.instances.get(query.get("instanceId", ""))
                        if inst is None:
                            return self._send(200, [])
                        att = {**recorded("vnic_attachment.json"), "instanceId": inst["id"],
                               "vnicId": f"ocid1.vnic.oc1.iad.{inst['id'].rsplit('.', 1)[-1]}"}
                        return self._send(200, [att])
                    if kind == "vnics":
                        inst = next(i for i in outer.instances.values() if i["id"].rsplit(".", 1)[-1] == ident.rsplit(".", 1)[-1])
                        vnic = {**recorded("vnic.json"), "id": ident, "publicIp": inst["_address"],
                                "privateIp": inst["_address"]}
                        return self._send(200, vnic)
                return self._error("error_not_found.json")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
