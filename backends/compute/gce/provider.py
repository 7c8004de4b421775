"""The `gce` compute provider: Compute Engine instances made for one resumption (on-demand or spot),
the job run on them by the `ssh` provider, deleted when the resumption ends (vm/base.py has the
lifecycle and the ledger).

The API is google-cloud-compute's InstancesClient (REST), imported only when used; credentials from
a `gcp` secret (service-account JSON) or Application Default Credentials. Instance names are made
from the launch token before anything is asked (so the ledger holds them), labels carry the token,
run, resumption and cluster (lowercased: GCE's label rules), the insert's requestId is derived from
the token (a repeated insert is the same request), and the operation is waited on through the same
endpoint: capacity and quota errors arrive there (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED) and
become NoCapacityError, retry-eligible.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from typing import Any

from foundry.plugins.compute import JobRequest
from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError

from ..vm.base import NoCapacityError, Vm, VmProvider, label_value
from .catalogue import CATALOGUE
from .config import DEFAULT_IMAGE, GceConfig

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# GCE's codes for "none left" (the zone's pool, the project's quota): retry-eligible, elsewhere or later
NO_CAPACITY = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "QUOTA_EXCEEDED", "quotaExceeded",
               "RESOURCE_EXHAUSTED", "STOCKOUT", "RESOURCE_POOL_EXHAUSTED"}
PENDING = {"PROVISIONING", "STAGING", "REPAIRING", "PENDING"}
OPERATION_WAIT_S = 300.0


class GceProvider(VmProvider):
    name = "gce"
    notice = "gce"   # spot: instance/preempted on the metadata server (GCE_METADATA_HOST)
    ids_are_names = True
    catalogue = CATALOGUE
    sdk_extra = "gcp"
    config_class = GceConfig

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        super().__init__(cluster_config)
        self._clients: tuple[Any, Any] | None = None

    def where(self) -> str:
        return f"{self.config.project}/{self.config.zone}"

    # ---- the API
    def credentials(self):
        files = getattr(self._credentials, "files", None) or {}
        info = next((v for p, v in files.items() if p.endswith("/credentials.json")), None)
        if self.config.credentials and info is None:
            raise ConfigError(f"gce cluster {self.config.name!r}: credentials {self.config.credentials!r} is not a gcp secret",
                              hint="foundry create secret gcp NAME --credentials KEY.json")
        try:
            if info is not None:
                from google.oauth2 import service_account

                return service_account.Credentials.from_service_account_info(json.loads(info), scopes=SCOPES)
            import google.auth

            return google.auth.default(scopes=SCOPES)[0]
        except ImportError:
            raise ConfigError("the gce provider needs google-cloud-compute",
                              hint="pip install 'foundry-anywhere[gcp]'") from None
        except (ValueError, KeyError) as exc:
            raise CredentialsError(f"gce cluster {self.config.name!r}: the gcp secret is not a service-account key "
                                   f"({type(exc).__name__})", hint="foundry create secret gcp NAME --credentials KEY.json") from None
        except Exception as exc:   # google.auth.exceptions.DefaultCredentialsError: no ADC on this machine
            raise CredentialsError(f"gce cluster {self.config.name!r}: no Google credentials ({type(exc).__name__})",
                                   hint="-o credentials=NAME (a gcp secret), or `gcloud auth application-default login`") from None

    @property
    def clients(self):
        """(InstancesClient, ZoneOperationsClient), both on the cluster's endpoint (the operations
        client the SDK makes for ExtendedOperation.result() ignores it, so operations are waited on here)."""
        if self._clients is None:
            try:
                from google.cloud import compute_v1
            except ImportError:
                raise ConfigError("the gce provider needs google-cloud-compute",
                                  hint="pip install 'foundry-anywhere[gcp]'") from None
            creds = self.credentials()
            options = {"api_endpoint": self.config.endpoint} if self.config.endpoint else None
            self._clients = (compute_v1.InstancesClient(credentials=creds, client_options=options),
                             compute_v1.ZoneOperationsClient(credentials=creds, client_options=options))
        return self._clients

    # ---- the request
    def check_plan(self, request: JobRequest) -> None:
        if self.config.gpus and not self.config.image:
            raise ConfigError(f"gce cluster {self.config.name!r}: a GPU machine needs an image with its driver",
                              hint="-o image=projects/deeplearning-platform-release/global/images/family/"
                                   "common-cu124-debian-11-py310 (or your own)")

    def names(self, request: JobRequest, token: str) -> list[str]:
        return [f"foundry-{token}-{i}" for i in range(request.nodes)]

    def create_request(self, request: JobRequest, token: str, name: str, ssh_public_key: str):
        from google.cloud import compute_v1

        c = self.config
        params = compute_v1.AttachedDiskInitializeParams(source_image=c.image or DEFAULT_IMAGE)
        if c.disk_size_gb:
            params.disk_size_gb = c.disk_size_gb
        nic = compute_v1.NetworkInterface()
        if c.network:
            nic.network = _path(c.network, "global/networks/")
        if c.subnet:
            nic.subnetwork = _path(c.subnet, f"regions/{c.region}/subnetworks/")
        if not c.network and not c.subnet:
            nic.network = "global/networks/default"
        if c.external_ip:
            nic.access_configs = [compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")]
        instance = compute_v1.Instance(
            name=name, machine_type=f"zones/{c.zone}/machineTypes/{c.machine_type}",
            labels=self.labels(request, token),
            disks=[compute_v1.AttachedDisk(boot=True, auto_delete=True, initialize_params=params)],
            network_interfaces=[nic],
            metadata=compute_v1.Metadata(items=[compute_v1.Items(key="ssh-keys",
                                                                 value=f"{c.ssh_user}:{ssh_public_key}")]))
        scheduling = compute_v1.Scheduling()
        if c.gpus:   # GPUs cannot live-migrate
            scheduling.on_host_maintenance = "TERMINATE"
        if c.accelerator:
            instance.guest_accelerators = [compute_v1.AcceleratorConfig(
                accelerator_type=f"zones/{c.zone}/acceleratorTypes/{c.accelerator}", accelerator_count=c.gpus)]
        if c.spot:
            scheduling.provisioning_model = "SPOT"
            scheduling.instance_termination_action = "DELETE"   # a preempted one is gone, not a stopped leftover
            scheduling.automatic_restart = False
            scheduling.on_host_maintenance = "TERMINATE"
        if scheduling != compute_v1.Scheduling():
            instance.scheduling = scheduling
        return instance

    def create(self, request: JobRequest, token: str, names: list[str], ssh_public_key: str) -> list[str]:
        from google.api_core import exceptions as gexc
        from google.cloud import compute_v1

        instances, operations = self.clients
        c = self.config
        pending = []
        for name in names:
            body = self.create_request(request, token, name, ssh_public_key)
            try:
                # the same requestId for the same instance of the same launch: a repeated insert is one
                op = instances.insert(request=compute_v1.InsertInstanceRequest(
                    project=c.project, zone=c.zone, instance_resource=body,
                    request_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"foundry:{token}:{name}"))))
            except gexc.GoogleAPICallError as exc:
                raise _error(exc, name) from None
            pending.append((name, op.name))
        deadline = time.monotonic() + OPERATION_WAIT_S
        for name, op_name in pending:
            while True:
                try:
                    op = operations.wait(project=c.project, zone=c.zone, operation=op_name)
                except gexc.GoogleAPICallError as exc:
                    raise _error(exc, f"operation {op_name}") from None
                if op.status.name == "DONE":
                    break
                if time.monotonic() > deadline:
                    raise ProviderError(f"gce: operation {op_name} not done after {OPERATION_WAIT_S:.0f}s (instances deleted)")
            errors = [(e.code, e.message) for e in op.error.errors] if op.error else []
            if errors:
                raise _op_error(errors, name)
        return names

    # ---- the instances
    def _vm(self, inst) -> Vm:
        status = inst.status
        state = "pending" if status in PENDING else "running" if status == "RUNNING" else "ended"
        nic = inst.network_interfaces[0] if inst.network_interfaces else None
        address = None
        if nic is not None:
            address = next((a.nat_i_p for a in nic.access_configs if a.nat_i_p), None) or nic.network_i_p or None
        started = None
        if inst.creation_timestamp:
            try:
                started = datetime.fromisoformat(inst.creation_timestamp).timestamp()
            except ValueError:
                started = None
        return Vm(id=inst.name, state=state, address=address, reason=inst.status_message or status,
                  labels=dict(inst.labels), type=inst.machine_type.rsplit("/", 1)[-1],
                  spot=inst.scheduling.provisioning_model == "SPOT", started_at=started)

    def lookup(self, ids: list[str]) -> list[Vm]:
        from google.api_core import exceptions as gexc

        instances, _ = self.clients
        out = []
        for name in ids:
            try:
                out.append(self._vm(instances.get(project=self.config.project, zone=self.config.zone, instance=name)))
            except gexc.NotFound:
                out.append(Vm(id=name, state="gone", reason="deleted"))
            except gexc.GoogleAPICallError as exc:
                raise _error(exc, f"get {name}") from None
        return out

    def find(self, token: str | None = None) -> list[Vm]:
        from google.api_core import exceptions as gexc
        from google.cloud import compute_v1

        instances, _ = self.clients
        terms = [f'(labels.foundry-cluster = "{label_value(self.config.name)}")']
        if token:
            terms.append(f'(labels.foundry-token = "{token}")')
        try:
            found = instances.list(request=compute_v1.ListInstancesRequest(
                project=self.config.project, zone=self.config.zone, filter=" ".join(terms)))
            return [self._vm(inst) for inst in found]
        except gexc.GoogleAPICallError as exc:
            raise _error(exc, "list") from None

    def delete(self, ids: list[str]) -> None:
        from google.api_core import exceptions as gexc

        instances, _ = self.clients
        for name in ids:
            try:   # not waited on: the instance is STOPPING, then gone; a later find no longer lists it
                instances.delete(project=self.config.project, zone=self.config.zone, instance=name)
            except (gexc.NotFound, gexc.Conflict):
                continue
            except gexc.BadRequest as exc:
                if "resourceNotReady" in _codes(exc) or "not ready" in str(exc):   # being deleted already
                    continue
                raise _error(exc, f"delete {name}") from None
            except gexc.GoogleAPICallError as exc:
                raise _error(exc, f"delete {name}") from None


def _path(value: str, prefix: str) -> str:
    """A short name (default) or a full resource path, as users type either."""
    return value if "/" in value else f"{prefix}{value}"


def _codes(exc) -> list[str]:
    codes = [str(e.get("reason") or e.get("code") or "") if isinstance(e, dict) else str(getattr(e, "code", ""))
             for e in (getattr(exc, "errors", None) or [])]
    return [c for c in codes if c]


def _error(exc, what: str) -> Exception:
    """The SDK's error as one line: no capacity/quota -> NoCapacityError, rights -> CredentialsError."""
    from google.api_core import exceptions as gexc

    message = (getattr(exc, "message", None) or str(exc)).splitlines()[0][:300]
    codes = set(_codes(exc))
    if codes & NO_CAPACITY or "quota" in message.lower() and isinstance(exc, gexc.Forbidden):
        return NoCapacityError(f"gce: no capacity for {what}: {message}",
                               hint="another zone or machine type, or a failover placement; the run is retry-eligible")
    if isinstance(exc, (gexc.Unauthorized, gexc.Forbidden)):
        return CredentialsError(f"gce: {what} refused: {message}",
                                hint="the credentials need compute.instances.* on the project")
    if isinstance(exc, (gexc.NotFound, gexc.BadRequest)):
        return ConfigError(f"gce: {what}: {message}", hint="check project, zone, machine_type, image, network")
    return ProviderError(f"gce: {what}: {message}")


def _op_error(errors: list[tuple[str, str]], what: str) -> Exception:
    code, message = errors[0]
    line = f"{code}: {message.splitlines()[0][:300]}" if message else code
    if any(c in NO_CAPACITY for c, _ in errors):
        return NoCapacityError(f"gce: no capacity for {what}: {line}",
                               hint="another zone or machine type, or a failover placement; the run is retry-eligible")
    return ProviderError(f"gce: {what} failed: {line}", hint="check project, zone, machine_type, image, network")
