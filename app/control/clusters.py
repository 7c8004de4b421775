"""Clusters: FOUNDRY_HOME/clusters.yaml maps a cluster name to its provider and options.

    clusters:
      local: {provider: local}                 # always exists, even without the file
      hpc:   {provider: slurm, partition: gpu, ...}   # options are the provider's own

The file may be edited by hand; `foundry create cluster` / `delete cluster` edit it atomically.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.compute import ComputeProvider
from foundry.plugins.errors import ConfigError
from foundry.plugins.manager import compute_registry

from foundry.app.names import check_name
from foundry.app.runspec.yaml_limits import safe_load_limited

from .cluster_python import with_job_python
from .models import ClusterInfo

DEFAULT_CLUSTER = "local"


class Clusters:
    def __init__(self, path: Path, secrets: Any = None):
        self.path = Path(path)
        self.secrets = secrets   # a SecretStore: resolves a cluster's `secret` for providers that ask for it

    def _load(self) -> dict[str, dict[str, Any]]:
        data: Any = {}
        if self.path.exists():   # edited by hand: read with the run spec's limits (aliases, size, UTF-8)
            data = safe_load_limited(self.path.read_bytes(), str(self.path)) or {}
        clusters = data.get("clusters", {}) if isinstance(data, dict) else None
        if not isinstance(clusters, dict):
            raise ConfigError(f"{self.path}: `clusters` must be a mapping of name -> {{provider: ...}}")
        out = {DEFAULT_CLUSTER: {"provider": "local"}}
        for name, cfg in clusters.items():
            if not isinstance(cfg, dict) or "provider" not in cfg:
                raise ConfigError(f"{self.path}: clusters.{name}: needs `provider` (one of "
                                  f"{', '.join(compute_registry().names())})")
            out[str(name)] = dict(cfg)
        return out

    def names(self) -> list[str]:
        return list(self._load())

    def config(self, name: str) -> dict[str, Any]:
        check_name("cluster", name)
        clusters = self._load()
        if name not in clusters:
            raise ConfigError(f"unknown cluster {name!r}",
                              hint=f"known clusters: {', '.join(clusters)}; add one with `foundry create cluster`")
        return {**clusters[name], "name": name}

    def provider(self, name: str) -> ComputeProvider:
        cfg = self.config(name)
        reg = compute_registry().get(cfg["provider"])
        if reg is None:
            raise ConfigError(f"cluster {name!r} uses unknown provider {cfg['provider']!r}",
                              hint=f"installed providers: {', '.join(compute_registry().names())}")
        if getattr(reg.value, "accepts_cluster_context", False):
            # a folder of its own for state (pinned host keys, the key file ssh reads) and its `secret`
            cfg.setdefault("state_dir", str(self.path.parent / "cluster-state" / name))
            if cfg.get("secret") and self.secrets is not None:
                cfg["secret_injection"] = self.secrets.injection(str(cfg["secret"]))
            if cfg.get("credentials") and self.secrets is not None:   # a cloud provider's own API keys
                cfg["credentials_injection"] = self.secrets.injection(str(cfg["credentials"]))
        return reg.value(cfg)

    def add(self, name: str, provider: str, options: dict[str, Any] | None = None,
            overwrite: bool = False) -> None:
        check_name("cluster", name)
        if compute_registry().get(provider) is None:
            raise ConfigError(f"unknown provider {provider!r}",
                              hint=f"installed providers: {', '.join(compute_registry().names())}")
        options = with_job_python(name, provider, dict(options or {}))
        cls = compute_registry().get(provider).value
        if getattr(cls, "check_options", None):   # refused before it is written (ConfigError: exit 2)
            cls.check_options({**options, "name": name})
        secret = options.get("secret")
        if secret and getattr(cls, "accepts_cluster_context", False) and self.secrets is not None \
                and not self.secrets.exists(str(secret)):
            raise ConfigError(f"cluster {name!r}: no secret named {secret!r}",
                              hint=f"create it first (`foundry create secret {provider} {secret} ...`); "
                                   "`foundry get secrets` lists them")
        with FileLock(str(self.path) + ".lock"):
            raw = yaml.safe_load(self.path.read_text()) if self.path.exists() else None
            raw = raw if isinstance(raw, dict) else {}
            clusters = raw.setdefault("clusters", {})
            if name in clusters and not overwrite or name == DEFAULT_CLUSTER and not overwrite:
                raise ConfigError(f"cluster {name!r} already exists", hint="delete it first, or edit clusters.yaml")
            clusters[name] = {"provider": provider, **(options or {})}
            self._write(raw)

    def remove(self, name: str) -> None:
        check_name("cluster", name)
        with FileLock(str(self.path) + ".lock"):
            raw = yaml.safe_load(self.path.read_text()) if self.path.exists() else None
            clusters = (raw or {}).get("clusters") or {}
            if name not in clusters:
                raise ConfigError(f"no cluster {name!r} in {self.path}")
            del clusters[name]
            self._write(raw)
        shutil.rmtree(self.path.parent / "cluster-state" / name, ignore_errors=True)   # its key copy, pinned keys

    def _write(self, raw: dict) -> None:
        atomic_write(self.path, yaml.safe_dump(raw, sort_keys=False))

    def info(self, name: str) -> ClusterInfo:
        cfg = self.config(name)
        public = {k: v for k, v in cfg.items() if k not in ("name",)}
        try:
            desc = self.provider(name).describe() or {}
        except Exception as exc:  # a broken cluster shows its error, it does not break the listing
            return ClusterInfo(name, cfg["provider"], None, None, f"error: {getattr(exc, 'message', exc)}", public)
        return ClusterInfo(name=name, provider=cfg["provider"], devices=desc.get("devices"),
                           nodes=desc.get("nodes"), state=str(desc.get("state", "ready")), config=public)
