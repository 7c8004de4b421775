"""The `oci-vm` compute provider: OCI Compute instances made for one resumption (on-demand or
preemptible), the job run on them by the `ssh` provider, terminated when the resumption ends
(vm/base.py has the lifecycle and the ledger).

The API is the `oci` SDK's ComputeClient (instances, VNIC attachments) and VirtualNetworkClient
(the VNIC's addresses), imported only when used; credentials from an `oci` secret (config + API key)
or ~/.oci/config (OCI_CONFIG_FILE). Each launch_instance carries an opc-retry-token made from the
launch token (a repeated request makes no second instance) and freeform tags with the token, run,
resumption and cluster; OCI's list has no tag filter, so instances are listed per compartment and
availability domain and picked by tag here. "Out of host capacity" and service-limit/quota refusals
become NoCapacityError, retry-eligible. A preempted instance is terminated by OCI (no notice on the
instance metadata service that Foundry reads): the job is then lost, retry-eligible.
"""

from __future__ import annotations

import configparser
import os
from typing import Any

from foundry.plugins.compute import JobRequest
from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError

from ..vm.base import NoCapacityError, Vm, VmProvider, label_value
from .catalogue import CATALOGUE, flex_price
from .config import OciVmConfig

PENDING = {"PROVISIONING", "STARTING", "MOVING"}
GONE = {"TERMINATING", "TERMINATED"}
NO_CAPACITY_CODES = {"LimitExceeded", "QuotaExceeded"}


class OciVmProvider(VmProvider):
    name = "oci-vm"
    catalogue = CATALOGUE
    sdk_extra = "oci"
    config_class = OciVmConfig

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        super().__init__(cluster_config)
        self._clients: tuple[Any, Any] | None = None

    def where(self) -> str:
        return f"{self.config.region or 'the config region'}/{self.config.availability_domain}"

    def price(self) -> float:
        c = self.config
        if c.flex:
            return flex_price(c.shape, c.ocpus or 0.0, c.memory_gb or 0.0, c.spot)
        return super().price()

    def vm_price(self, vm: Vm) -> float:
        if vm.type.endswith(".Flex"):
            return flex_price(vm.type, vm.size.get("ocpus", 0.0), vm.size.get("memory_gb", 0.0), vm.spot)
        return super().vm_price(vm)

    # ---- the API
    def oci_config(self) -> dict[str, Any]:
        try:
            import oci
        except ImportError:
            raise ConfigError("the oci-vm provider needs the oci SDK", hint="pip install 'foundry-anywhere[oci]'") from None
        c = self.config
        try:
            if c.credentials:
                files = getattr(self._credentials, "files", None) or {}
                text = next((v for p, v in files.items() if p.endswith("/config")), None)
                key = next((v for p, v in files.items() if p.endswith("/key.pem")), None)
                if text is None or key is None:
                    raise ConfigError(f"oci-vm cluster {c.name!r}: credentials {c.credentials!r} is not an oci secret",
                                      hint="foundry create secret oci NAME --config ~/.oci/config --key KEY.pem")
                parser = configparser.ConfigParser()
                parser.read_string(text.decode())
                if c.profile != "DEFAULT" and not parser.has_section(c.profile):
                    raise CredentialsError(f"oci-vm cluster {c.name!r}: the oci secret has no profile {c.profile!r}")
                cfg: dict[str, Any] = dict(parser[c.profile])
                cfg.pop("key_file", None)
                cfg["key_content"] = key.decode()   # in memory: the key is never written out here
            else:
                path = os.environ.get("OCI_CONFIG_FILE") or oci.config.DEFAULT_LOCATION
                cfg = oci.config.from_file(file_location=path, profile_name=c.profile)
            if c.region:
                cfg["region"] = c.region
            oci.config.validate_config(cfg)
        except (oci.exceptions.ConfigFileNotFound, oci.exceptions.ProfileNotFound, oci.exceptions.InvalidConfig,
                oci.exceptions.InvalidKeyFilePath, configparser.Error) as exc:
            raise CredentialsError(f"oci-vm cluster {c.name!r}: no usable OCI config ({type(exc).__name__})",
                                   hint="-o credentials=NAME (an oci secret), or ~/.oci/config (`oci setup config`)") from None
        return cfg

    @property
    def clients(self):
        """(ComputeClient, VirtualNetworkClient), on the cluster's endpoint when it names one."""
        if self._clients is None:
            import oci

            cfg = self.oci_config()
            kwargs = {"service_endpoint": self.config.endpoint} if self.config.endpoint else {}
            self._clients = (oci.core.ComputeClient(cfg, **kwargs), oci.core.VirtualNetworkClient(cfg, **kwargs))
        return self._clients

    # ---- the request
    def check_plan(self, request: JobRequest) -> None:
        if not self.config.image:
            raise ConfigError(f"oci-vm cluster {self.config.name!r} has no image",
                              hint="-o image=ocid1.image.oc1... (a platform image of the region, or your own with python)")

    def names(self, request: JobRequest, token: str) -> list[str]:
        return [f"foundry-{token}-{i}" for i in range(request.nodes)]

    def create_request(self, request: JobRequest, token: str, name: str, ssh_public_key: str):
        from oci.core import models

        c = self.config
        source = models.InstanceSourceViaImageDetails(image_id=c.image or "ocid1.image.unset")
        if c.boot_volume_gb:
            source.boot_volume_size_in_gbs = c.boot_volume_gb
        details = models.LaunchInstanceDetails(
            availability_domain=c.availability_domain, compartment_id=c.compartment, shape=c.shape, display_name=name,
            freeform_tags=self.labels(request, token), metadata={"ssh_authorized_keys": ssh_public_key},
            source_details=source,
            create_vnic_details=models.CreateVnicDetails(subnet_id=c.subnet, assign_public_ip=c.assign_public_ip))
        if c.flex:
            details.shape_config = models.LaunchInstanceShapeConfigDetails(ocpus=c.ocpus, memory_in_gbs=c.memory_gb)
        if c.spot:   # reclaimed by OCI when it needs the capacity: terminated, the boot volume with it
            details.preemptible_instance_config = models.PreemptibleInstanceConfigDetails(
                preemption_action=models.TerminatePreemptionAction(preserve_boot_volume=False))
        return details

    def create(self, request: JobRequest, token: str, names: list[str], ssh_public_key: str) -> list[str]:
        import oci

        compute, _ = self.clients
        ids: list[str] = []
        for i, name in enumerate(names):
            details = self.create_request(request, token, name, ssh_public_key)
            try:
                # no SDK retries here: "out of host capacity" is an answer (fail over), not a hiccup
                reply = compute.launch_instance(details, opc_retry_token=f"{token}-{i}"[:64],
                                                retry_strategy=oci.retry.NoneRetryStrategy())
            except (oci.exceptions.ServiceError, oci.exceptions.RequestException) as exc:
                raise _error(exc, name) from None
            ids.append(reply.data.id)
            self.ledger.write(token, instance_ids=ids)   # each id as soon as it is known
        return ids

    # ---- the instances
    def _vm(self, inst, address: str | None = None) -> Vm:
        state = inst.lifecycle_state
        kind = "pending" if state in PENDING else "running" if state == "RUNNING" else "gone" if state in GONE else "ended"
        shape = inst.shape_config
        size = {"ocpus": float(shape.ocpus or 0), "memory_gb": float(shape.memory_in_gbs or 0)} if shape else {}
        return Vm(id=inst.id, state=kind, address=address, reason=state, labels=dict(inst.freeform_tags or {}),
                  type=inst.shape, spot=inst.preemptible_instance_config is not None,
                  started_at=inst.time_created.timestamp() if inst.time_created else None, size=size)

    def _address(self, instance_id: str) -> str | None:
        compute, network = self.clients
        attachments = compute.list_vnic_attachments(self.config.compartment, instance_id=instance_id).data
        vnic_id = next((a.vnic_id for a in attachments if a.lifecycle_state == "ATTACHED" and a.vnic_id), None)
        if vnic_id is None:
            return None
        vnic = network.get_vnic(vnic_id).data
        return vnic.public_ip or vnic.private_ip

    def lookup(self, ids: list[str]) -> list[Vm]:
        import oci

        compute, _ = self.clients
        out = []
        for iid in ids:
            try:
                inst = compute.get_instance(iid).data
                address = self._address(iid) if inst.lifecycle_state == "RUNNING" else None
                out.append(self._vm(inst, address))
            except oci.exceptions.ServiceError as exc:
                if exc.status == 404:
                    out.append(Vm(id=iid, state="gone", reason="not found"))
                    continue
                raise _error(exc, f"get {iid}") from None
            except oci.exceptions.RequestException as exc:
                raise _error(exc, f"get {iid}") from None
        return out

    def find(self, token: str | None = None) -> list[Vm]:
        import oci

        compute, _ = self.clients
        try:
            found = oci.pagination.list_call_get_all_results(
                compute.list_instances, self.config.compartment, availability_domain=self.config.availability_domain).data
        except (oci.exceptions.ServiceError, oci.exceptions.RequestException) as exc:
            raise _error(exc, "list_instances") from None
        cluster = label_value(self.config.name)
        return [self._vm(inst) for inst in found
                if (inst.freeform_tags or {}).get("foundry-cluster") == cluster
                and (token is None or (inst.freeform_tags or {}).get("foundry-token") == token)
                and inst.lifecycle_state != "TERMINATED"]

    def delete(self, ids: list[str]) -> None:
        import oci

        compute, _ = self.clients
        for iid in ids:
            try:   # not waited on: TERMINATING, then TERMINATED
                compute.terminate_instance(iid, preserve_boot_volume=False)
            except oci.exceptions.ServiceError as exc:
                if exc.status in (404, 409):   # gone, or already terminating
                    continue
                raise _error(exc, f"terminate {iid}") from None


def _error(exc, what: str) -> Exception:
    """The SDK's error as one line: no capacity/limit/quota -> NoCapacityError, rights -> CredentialsError."""
    status, code = getattr(exc, "status", None), getattr(exc, "code", None)
    message = str(getattr(exc, "message", None) or exc).splitlines()[0][:300]
    if code in NO_CAPACITY_CODES or "out of host capacity" in message.lower():
        return NoCapacityError(f"oci-vm: no capacity for {what}: {code}: {message}",
                               hint="another availability domain or shape, or a failover placement; the run is retry-eligible")
    if status == 401 or code == "NotAuthenticated":
        return CredentialsError(f"oci-vm: {what} refused: {code}: {message}",
                                hint="check the API key, fingerprint and tenancy in the OCI config")
    if status in (400, 404):
        return ConfigError(f"oci-vm: {what}: {code}: {message}",
                           hint="check compartment, availability_domain, shape, image, subnet (and the policies)")
    if status is None:
        return ProviderError(f"oci-vm: {what}: cannot reach the OCI API ({type(exc).__name__})")
    return ProviderError(f"oci-vm: {what}: {status} {code}: {message}")
