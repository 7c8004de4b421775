"""A Kubernetes cluster's configuration, from the `clusters` file entry (a plain dict).

```yaml
clusters:
  k8s:
    provider: kubernetes
    context: my-context          # kubeconfig context (default: the current one)
    kubeconfig: ~/.kube/config   # optional; default: $KUBECONFIG or ~/.kube/config (read when used)
    namespace: ml                # default "default"
    image: ghcr.io/acme/train:1  # used when the run spec names no image
    python: python               # interpreter inside the image
    restart_policy: Never        # Never (default) or OnFailure; Always is invalid for a Job
    backoff_limit: 0             # pod retries inside Kubernetes (Foundry's watchdog retries runs)
    termination_grace_seconds: 300   # time a pausing job has to checkpoint
    service_account: trainer     # optional
    node_selector: {pool: gpu}   # optional
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    image_pull_secrets: [regcred]
    cpu: "8"                     # optional requests per pod
    memory: 64Gi
    gpu_resource: nvidia.com/gpu
    gpu_type_label: nvidia.com/gpu.product   # node label matched against the run's gpu_type
    rdzv_port: 29500
    ttl_seconds_after_finished: 86400
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foundry.plugins.errors import ConfigError

RESTART_POLICIES = ("Never", "OnFailure")


@dataclass
class KubernetesConfig:
    name: str = "kubernetes"
    context: str | None = None
    kubeconfig: str | None = None
    namespace: str = "default"
    image: str | None = None
    python: str = "python"
    restart_policy: str = "Never"
    backoff_limit: int = 0
    termination_grace_seconds: int = 300
    service_account: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    image_pull_secrets: list[str] = field(default_factory=list)
    cpu: str | None = None
    memory: str | None = None
    gpu_resource: str = "nvidia.com/gpu"
    gpu_type_label: str = "nvidia.com/gpu.product"
    rdzv_port: int = 29500
    ttl_seconds_after_finished: int | None = 86400
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, extra_keys: frozenset[str] = frozenset()) -> "KubernetesConfig":
        raw = {k: v for k, v in dict(raw or {}).items() if k not in ("provider", "description")}
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - known - set(extra_keys))
        if unknown:
            raise ConfigError(f"kubernetes cluster config: unknown key(s) {', '.join(unknown)}",
                              hint=f"allowed: {', '.join(sorted(known | set(extra_keys)))}")
        cfg = cls(**{k: v for k, v in raw.items() if k in known and v is not None})
        if cfg.restart_policy not in RESTART_POLICIES:
            raise ConfigError(
                f"kubernetes cluster config: restart_policy {cfg.restart_policy!r} is not valid for a Job",
                hint="use Never (default) or OnFailure",
            )
        for key in ("backoff_limit", "termination_grace_seconds", "rdzv_port"):
            if not isinstance(getattr(cfg, key), int) or getattr(cfg, key) < 0:
                raise ConfigError(f"kubernetes cluster config: {key} must be a non-negative integer")
        return cfg
