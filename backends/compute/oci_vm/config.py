"""An oci-vm cluster's options, from its `clusters` entry:

```yaml
clusters:
  o:
    provider: oci-vm
    region: us-ashburn-1              # default: the OCI config's region
    compartment: ocid1.compartment.oc1..aaaa...
    availability_domain: Uocm:US-ASHBURN-AD-1
    shape: VM.GPU.A10.1               # or gpus: 1 (+ gpu_type: a10): the cheapest catalogue shape
    ocpus: 4                          # flexible shapes (*.Flex) only; memory_gb default 16 per OCPU
    image: ocid1.image.oc1.iad.aaaa...
    boot_volume_gb: 100
    preemptible: true                 # preemptible_instance_config (spot: true means the same)
    subnet: ocid1.subnet.oc1.iad.aaaa...
    assign_public_ip: true
    secret: oci-key                   # an `ssh` secret: its public key goes in ssh_authorized_keys
    ssh_user: opc                     # Oracle Linux images; ubuntu on Ubuntu images
    credentials: oci                  # optional `oci` secret; default ~/.oci/config (OCI_CONFIG_FILE)
    profile: DEFAULT
    endpoint: https://iaas.us-ashburn-1.oraclecloud.com   # optional
    ssh_wait_s: 600
```
Any other key (python, remote_dir, setup, packages...) is handed to the ssh provider.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from foundry.plugins.errors import ConfigError

from ..vm.config import SSH_KEYS, as_bool, whole
from .catalogue import CATALOGUE

OWN_KEYS = {"provider", "name", "description", "region", "compartment", "availability_domain", "shape", "gpus",
            "gpu_type", "ocpus", "memory_gb", "image", "boot_volume_gb", "preemptible", "spot", "subnet",
            "assign_public_ip", "secret", "ssh_user", "credentials", "profile", "endpoint", "ssh_wait_s",
            "state_dir", "secret_injection", "credentials_injection"}
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def _ocid(raw: dict[str, Any], key: str, kinds: tuple[str, ...], where: str, example: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not any(value.startswith(f"ocid1.{k}.") for k in kinds):
        raise ConfigError(f"{where}: {key} {value!r} is not an OCID of a {kinds[0]}", hint=f"-o {key}={example}")
    return value


@dataclass(frozen=True)
class OciVmConfig:
    name: str
    compartment: str
    availability_domain: str
    shape: str
    gpus: int
    subnet: str
    region: str | None = None
    ocpus: float | None = None
    memory_gb: float | None = None
    image: str | None = None
    boot_volume_gb: int | None = None
    spot: bool = False
    assign_public_ip: bool = True
    secret: str | None = None
    ssh_user: str = "opc"
    credentials: str | None = None
    profile: str = "DEFAULT"
    endpoint: str | None = None
    ssh_wait_s: float = 600.0
    state_dir: str | None = None
    ssh_options: dict[str, Any] = field(default_factory=dict)

    @property
    def machine_type(self) -> str:
        return self.shape

    @property
    def flex(self) -> bool:
        return self.shape.endswith(".Flex")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "OciVmConfig":
        name = str(raw.get("name") or "oci-vm")
        where = f"oci-vm cluster {name!r}"
        unknown = set(raw) - OWN_KEYS - SSH_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown option(s) {', '.join(sorted(unknown))}",
                              hint="see docs/providers.md#oci-vm for the options")
        compartment = _ocid(raw, "compartment", ("compartment", "tenancy"), where, "ocid1.compartment.oc1..aaaa...")
        if not compartment:
            raise ConfigError(f"{where} needs a compartment", hint="-o compartment=ocid1.compartment.oc1..aaaa...")
        ad = raw.get("availability_domain")
        if not ad or not isinstance(ad, str):
            raise ConfigError(f"{where} needs an availability_domain", hint="-o availability_domain=Uocm:US-ASHBURN-AD-1")
        subnet = _ocid(raw, "subnet", ("subnet",), where, "ocid1.subnet.oc1.iad.aaaa...")
        if not subnet:
            raise ConfigError(f"{where} needs a subnet (OCI launches every instance into one)",
                              hint="-o subnet=ocid1.subnet.oc1.iad.aaaa... (its security list must let this machine reach port 22)")
        gpus = whole(raw, "gpus", 0, where)
        shape = raw.get("shape")
        if not shape and raw.get("gpus") is None:
            raise ConfigError(f"{where} needs a shape", hint="-o shape=VM.GPU.A10.1, or -o gpus=1 [-o gpu_type=a10]")
        shape = str(shape or CATALOGUE.pick(gpus, raw.get("gpu_type")))
        if raw.get("shape") and raw.get("gpus") is None:
            gpus = int(CATALOGUE.entry(shape).get("gpus") or 0)
        ocpus, memory = raw.get("ocpus"), raw.get("memory_gb")
        for key, value in (("ocpus", ocpus), ("memory_gb", memory)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ConfigError(f"{where}: {key} must be a number > 0, not {value!r}", hint=f"-o {key}=4")
        if shape.endswith(".Flex"):
            if ocpus is None:
                raise ConfigError(f"{where}: the flexible shape {shape} needs ocpus (memory_gb: default 16 per OCPU)",
                                  hint="-o ocpus=4 [-o memory_gb=64]")
            memory = memory if memory is not None else 16 * ocpus
        elif ocpus is not None or memory is not None:
            raise ConfigError(f"{where}: ocpus/memory_gb are for flexible shapes (*.Flex); {shape} has fixed ones",
                              hint="drop -o ocpus/-o memory_gb, or use a .Flex shape")
        spot = as_bool(raw, "spot", where) or as_bool(raw, "preemptible", where)
        user = str(raw.get("ssh_user") or "opc")
        if not _USER.match(user):
            raise ConfigError(f"{where}: ssh_user {user!r} is not a Linux login name", hint="-o ssh_user=opc")
        return cls(name=name, compartment=compartment, availability_domain=ad, shape=shape, gpus=gpus, subnet=subnet,
                   region=raw.get("region"), ocpus=float(ocpus) if ocpus is not None else None,
                   memory_gb=float(memory) if memory is not None else None,
                   image=_ocid(raw, "image", ("image",), where, "ocid1.image.oc1.iad.aaaa..."),
                   boot_volume_gb=whole(raw, "boot_volume_gb", 0, where) or None, spot=spot,
                   assign_public_ip=as_bool(raw, "assign_public_ip", where, default=True), secret=raw.get("secret"),
                   ssh_user=user, credentials=raw.get("credentials"), profile=str(raw.get("profile") or "DEFAULT"),
                   endpoint=raw.get("endpoint"), ssh_wait_s=float(raw.get("ssh_wait_s") or 600.0),
                   state_dir=raw.get("state_dir"), ssh_options={k: v for k, v in raw.items() if k in SSH_KEYS})
