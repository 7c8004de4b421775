"""An ec2 cluster's options, from its `clusters` entry:

```yaml
clusters:
  aws:
    provider: ec2
    region: us-east-1
    instance_type: g5.xlarge        # or gpus: 1 (+ gpu_type: a10g): the cheapest catalogue type
    image: ami-0123456789abcdef0    # an AMI with python + torch (or let the ssh provider build a venv)
    disk_gb: 100
    spot: true
    key_name: my-key                # the EC2 key pair whose private key is the `secret`
    secret: aws-key                 # an `ssh` secret: the key the instances accept
    ssh_user: ubuntu
    subnet: subnet-0abc             # optional
    security_group: sg-0abc         # optional (must let this machine reach port 22)
    credentials: aws                # optional `s3`/`aws` secret; default: boto3's usual chain
    ssh_wait_s: 600                 # deadline for SSH to answer on every instance
```
Any other key (python, remote_dir, setup, packages...) is handed to the ssh provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foundry.plugins.errors import ConfigError

from . import catalogue

OWN_KEYS = {"provider", "name", "description", "region", "instance_type", "gpus", "gpu_type", "image", "disk_gb",
            "spot", "key_name", "secret", "ssh_user", "subnet", "security_group", "credentials", "ssh_wait_s",
            "state_dir", "secret_injection", "credentials_injection"}
SSH_KEYS = {"python", "remote_dir", "setup", "workdir", "connect_timeout", "ssh_options", "packages", "index_url",
            "uv", "known_hosts"}


@dataclass(frozen=True)
class Ec2Config:
    name: str
    region: str
    instance_type: str
    image: str | None
    gpus: int
    disk_gb: int | None = None
    spot: bool = False
    key_name: str | None = None
    secret: str | None = None
    ssh_user: str = "ubuntu"
    subnet: str | None = None
    security_group: str | None = None
    credentials: str | None = None
    ssh_wait_s: float = 600.0
    state_dir: str | None = None
    ssh_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Ec2Config":
        name = str(raw.get("name") or "ec2")
        unknown = set(raw) - OWN_KEYS - SSH_KEYS
        if unknown:
            raise ConfigError(f"ec2 cluster {name!r}: unknown option(s) {', '.join(sorted(unknown))}",
                              hint="see docs/providers.md#ec2 for the options")
        if not raw.get("region"):
            raise ConfigError(f"ec2 cluster {name!r} needs a region", hint="-o region=us-east-1")
        gpus = _int(raw, "gpus", 0, name)
        itype = raw.get("instance_type") or catalogue.pick(gpus, raw.get("gpu_type")) if (
            raw.get("instance_type") or raw.get("gpus") is not None) else None
        if not itype:
            raise ConfigError(f"ec2 cluster {name!r} needs an instance type",
                              hint="-o instance_type=g5.xlarge, or -o gpus=1 [-o gpu_type=a10g]")
        if raw.get("instance_type") and raw.get("gpus") is None:
            gpus = int((catalogue.catalogue().get(itype) or {}).get("gpus") or 0)
        spot = raw.get("spot", False)
        if not isinstance(spot, bool):
            raise ConfigError(f"ec2 cluster {name!r}: spot must be true or false", hint="-o spot=true")
        return cls(name=name, region=str(raw["region"]), instance_type=str(itype), image=raw.get("image"), gpus=gpus,
                   disk_gb=_int(raw, "disk_gb", 0, name) or None, spot=spot, key_name=raw.get("key_name"),
                   secret=raw.get("secret"), ssh_user=str(raw.get("ssh_user") or "ubuntu"), subnet=raw.get("subnet"),
                   security_group=raw.get("security_group"), credentials=raw.get("credentials"),
                   ssh_wait_s=float(raw.get("ssh_wait_s") or 600.0), state_dir=raw.get("state_dir"),
                   ssh_options={k: v for k, v in raw.items() if k in SSH_KEYS})


def _int(raw: dict[str, Any], key: str, default: int, name: str) -> int:
    value = raw.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"ec2 cluster {name!r}: {key} must be a whole number >= 0, not {value!r}")
    return value
