"""A gce cluster's options, from its `clusters` entry:

```yaml
clusters:
  g:
    provider: gce
    project: my-project
    zone: us-central1-a
    machine_type: g2-standard-8     # or gpus: 1 (+ gpu_type: l4): the cheapest catalogue type
    image: projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310
    disk_size_gb: 100
    spot: true                      # provisioningModel SPOT, deleted when preempted
    network: default                # optional; subnet: regions/us-central1/subnetworks/NAME
    external_ip: true               # an ephemeral public address (this machine must reach port 22)
    secret: gce-key                 # an `ssh` secret: its public key goes in the instances' ssh-keys
    ssh_user: foundry
    credentials: gcp                # optional `gcp` secret (service-account JSON); default: ADC
    endpoint: https://compute.googleapis.com   # optional: a private endpoint
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

OWN_KEYS = {"provider", "name", "description", "project", "zone", "machine_type", "gpus", "gpu_type", "image",
            "disk_size_gb", "spot", "network", "subnet", "external_ip", "secret", "ssh_user", "credentials",
            "endpoint", "ssh_wait_s", "state_dir", "secret_injection", "credentials_injection"}
DEFAULT_IMAGE = "projects/debian-cloud/global/images/family/debian-12"
_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
_PROJECT = re.compile(r"^[a-z][-a-z0-9.:]{4,62}[a-z0-9]$")
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


@dataclass(frozen=True)
class GceConfig:
    name: str
    project: str
    zone: str
    machine_type: str
    gpus: int
    image: str | None = None
    accelerator: str | None = None   # the GPU attached through guestAccelerators (N1 types)
    disk_size_gb: int | None = None
    spot: bool = False
    network: str | None = None
    subnet: str | None = None
    external_ip: bool = True
    secret: str | None = None
    ssh_user: str = "foundry"
    credentials: str | None = None
    endpoint: str | None = None
    ssh_wait_s: float = 600.0
    state_dir: str | None = None
    ssh_options: dict[str, Any] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "GceConfig":
        name = str(raw.get("name") or "gce")
        where = f"gce cluster {name!r}"
        unknown = set(raw) - OWN_KEYS - SSH_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown option(s) {', '.join(sorted(unknown))}",
                              hint="see docs/providers.md#gce for the options")
        project, zone = raw.get("project"), raw.get("zone")
        if not project:
            raise ConfigError(f"{where} needs a project", hint="-o project=my-project")
        if not isinstance(project, str) or not _PROJECT.match(project):
            raise ConfigError(f"{where}: project {project!r} is not a GCP project id", hint="-o project=my-project")
        if not zone:
            raise ConfigError(f"{where} needs a zone", hint="-o zone=us-central1-a")
        if not isinstance(zone, str) or not _ZONE.match(zone):
            raise ConfigError(f"{where}: zone {zone!r} is not a GCE zone", hint="-o zone=us-central1-a")
        gpus = whole(raw, "gpus", 0, where)
        mtype = raw.get("machine_type")
        if not mtype and raw.get("gpus") is None:
            raise ConfigError(f"{where} needs a machine type",
                              hint="-o machine_type=g2-standard-8, or -o gpus=1 [-o gpu_type=l4]")
        mtype = str(mtype or CATALOGUE.pick(gpus, raw.get("gpu_type")))
        entry = CATALOGUE.entry(mtype)
        if raw.get("machine_type") and raw.get("gpus") is None:
            gpus = int(entry.get("gpus") or 0)
        user = str(raw.get("ssh_user") or "foundry")
        if not _USER.match(user):
            raise ConfigError(f"{where}: ssh_user {user!r} is not a Linux login name", hint="-o ssh_user=foundry")
        return cls(name=name, project=project, zone=zone, machine_type=mtype, gpus=gpus,
                   image=raw.get("image") or None, accelerator=entry.get("accelerator"),
                   disk_size_gb=whole(raw, "disk_size_gb", 0, where) or None, spot=as_bool(raw, "spot", where),
                   network=raw.get("network"), subnet=raw.get("subnet"),
                   external_ip=as_bool(raw, "external_ip", where, default=True), secret=raw.get("secret"),
                   ssh_user=user, credentials=raw.get("credentials"), endpoint=raw.get("endpoint"),
                   ssh_wait_s=float(raw.get("ssh_wait_s") or 600.0), state_dir=raw.get("state_dir"),
                   ssh_options={k: v for k, v in raw.items() if k in SSH_KEYS})
