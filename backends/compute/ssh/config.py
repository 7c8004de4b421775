"""An ssh fleet's configuration, from its `clusters` entry (a plain dict) or handed over by a VM provider.

```yaml
clusters:
  fleet:
    provider: ssh
    hosts: root@10.0.0.1,root@10.0.0.2    # or a list; [user@]address[:port]
    user: ubuntu                 # optional: for hosts given without one
    gpus_per_host: 1             # devices per host: capacity = hosts x gpus_per_host
    secret: fleet-key            # an `ssh` secret (foundry create secret ssh NAME --private-key PATH)
    identity_file: ~/.ssh/id_ed25519   # or a key file on this machine (VM providers hand one over)
    known_hosts: ~/fleet_known_hosts   # optional: host keys given up front (checked strictly)
    python: /opt/venv/bin/python       # optional: interpreter with torch + foundry on every host;
                                       # without it a uv venv is built on each host (packages, index_url)
    remote_dir: .foundry-fleet/{host}  # per-host state (jobs, leases, venv); {host} keeps hosts that
                                       # share a home folder (NFS) apart
    setup: ["source /etc/profile"]     # optional shell lines run on each host before torchrun
    workdir: /data/project             # optional: where jobs start on the hosts (default: the job folder)
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from foundry.plugins.errors import ConfigError

KNOWN_KEYS = {
    "provider", "name", "description", "hosts", "user", "gpus_per_host", "secret", "identity_file",
    "known_hosts", "python", "remote_dir", "setup", "workdir", "connect_timeout", "ssh_options",
    "packages", "index_url", "uv", "state_dir", "secret_injection",
}
_HOST = re.compile(r"^(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*)@)?(?P<addr>[A-Za-z0-9][A-Za-z0-9.-]*)(?::(?P<port>\d{1,5}))?$")


@dataclass(frozen=True)
class Host:
    """One machine of the fleet: how ssh reaches it."""

    addr: str
    user: str | None = None
    port: int = 22

    @classmethod
    def parse(cls, text: str, default_user: str | None = None) -> "Host":
        m = _HOST.match(text.strip())
        if not m or (m["port"] and not 0 < int(m["port"]) < 65536):
            raise ConfigError(f"ssh cluster config: host {text!r} is not [user@]address[:port]",
                              hint="e.g. -o hosts=root@10.0.0.1,root@10.0.0.2")
        return cls(addr=m["addr"], user=m["user"] or default_user, port=int(m["port"] or 22))

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"{user}{self.addr}{port}"

    @property
    def known_hosts_name(self) -> str:
        """How OpenSSH names this host in known_hosts."""
        return self.addr if self.port == 22 else f"[{self.addr}]:{self.port}"


@dataclass
class SshConfig:
    name: str = "ssh"
    hosts: list[Host] = field(default_factory=list)
    gpus_per_host: int = 0
    secret: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    python: str | None = None
    remote_dir: str = ".foundry-fleet/{host}"
    setup: list[str] = field(default_factory=list)
    workdir: str | None = None
    connect_timeout: int = 10
    ssh_options: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    index_url: str | None = None
    uv: str = "uv"
    state_dir: str | None = None

    def remote_root(self, host: Host) -> str:
        return self.remote_dir.replace("{host}", host.addr)

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> "SshConfig":
        raw = dict(raw or {})
        unknown = sorted(set(raw) - KNOWN_KEYS)
        if unknown:
            raise ConfigError(f"ssh cluster config: unknown key(s) {', '.join(unknown)}",
                              hint=f"allowed: {', '.join(sorted(KNOWN_KEYS - {'provider', 'secret_injection', 'state_dir'}))}")
        hosts = raw.get("hosts")
        if isinstance(hosts, str):
            hosts = [h for h in hosts.split(",") if h.strip()]
        if not hosts or not isinstance(hosts, list):
            raise ConfigError("ssh cluster config: needs hosts",
                              hint="e.g. -o hosts=root@10.0.0.1,root@10.0.0.2")
        user = raw.get("user")
        parsed = [Host.parse(str(h), user) for h in hosts]
        if len({(h.addr, h.port) for h in parsed}) != len(parsed):
            raise ConfigError("ssh cluster config: a host is listed twice", hint="list each host once")
        try:
            gpus = int(raw.get("gpus_per_host") or 0)
            timeout = int(raw.get("connect_timeout") or 10)
        except (TypeError, ValueError):
            raise ConfigError("ssh cluster config: gpus_per_host and connect_timeout must be whole numbers") from None
        if gpus < 0 or timeout < 1:
            raise ConfigError("ssh cluster config: gpus_per_host must be 0 or more, connect_timeout 1 s or more")
        cfg = cls(name=str(raw.get("name") or "ssh"), hosts=parsed, gpus_per_host=gpus, connect_timeout=timeout)
        for key in ("secret", "identity_file", "known_hosts", "python", "workdir", "index_url", "state_dir"):
            if raw.get(key) not in (None, ""):
                setattr(cfg, key, str(raw[key]))
        for key in ("remote_dir", "uv"):
            if raw.get(key):
                setattr(cfg, key, str(raw[key]))
        for key in ("setup", "ssh_options", "packages"):
            value = raw.get(key) or []
            if isinstance(value, str):
                value = [value]
            if not all(isinstance(v, str) for v in value):
                raise ConfigError(f"ssh cluster config: {key} must be a list of strings")
            setattr(cfg, key, list(value))
        if any(not re.match(r"^[A-Za-z][A-Za-z0-9]*=[^\s]*$", o) for o in cfg.ssh_options):
            raise ConfigError("ssh cluster config: ssh_options are OpenSSH -o settings like ServerAliveInterval=5")
        if not cfg.secret and not cfg.identity_file and raw.get("secret_injection") is None:
            raise ConfigError("ssh cluster config: needs secret (an ssh secret) or identity_file",
                              hint="foundry create secret ssh fleet-key --private-key PATH, then -o secret=fleet-key")
        return cfg
