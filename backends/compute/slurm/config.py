"""A Slurm cluster's configuration, from the `clusters` file entry (a plain dict).

```yaml
clusters:
  hpc:
    provider: slurm
    partition: gpu            # optional: the cluster's default partition otherwise
    account: ml-team          # optional
    time: "04:00:00"          # optional default time limit (sbatch --time)
    ssh_host: login.hpc.example   # optional: run sbatch/squeue/scancel over ssh; local by default
    jobs_dir: /shared/foundry/jobs   # per-job folders; must be visible on every compute node
    python: /shared/venv/bin/python  # interpreter with torch, on the compute nodes
    signal: "TERM@120"        # optional: pause the job 120 s before its time limit
    gres: "gpu"               # optional: generic resource name for GPUs (gpu:<type>:<n>)
    cpus_per_task: 8          # optional
    setup: ["module load cuda"]     # optional shell lines run before srun
    sbatch_args: ["--qos=high"]      # optional extra sbatch options
    slurm_conf: /etc/slurm-b/slurm.conf   # optional: this cluster's slurm.conf (SLURM_CONF for its commands)
    env: {SLURM_CONF: ..., PATH: ...}      # optional: environment for sbatch/squeue/scancel/sinfo
    workdir: /shared/project         # optional: where jobs start (sbatch --chdir); default: where the
                                     # run was created (`foundry run`'s directory)
```

Two clusters served by different slurmctlds are registered side by side by giving each its own
`slurm_conf` (or `env`): the `foundry` process's own SLURM_CONF then does not matter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from foundry.plugins.errors import ConfigError

_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SIGNAL = re.compile(r"^(B:)?([A-Z]+|\d+)(@\d+)?$")
KNOWN_KEYS = {
    "provider", "name", "partition", "account", "time", "ssh_host", "jobs_dir", "python", "signal",
    "gres", "cpus_per_task", "setup", "sbatch_args", "rdzv_port_base", "description", "slurm_conf", "env",
    "workdir",
}


@dataclass
class SlurmConfig:
    name: str = "slurm"
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    ssh_host: str | None = None
    jobs_dir: str | None = None
    python: str = "python3"
    signal: str | None = None
    gres: str = "gpu"
    cpus_per_task: int | None = None
    setup: list[str] = field(default_factory=list)
    sbatch_args: list[str] = field(default_factory=list)
    rdzv_port_base: int = 20000
    slurm_conf: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None

    def command_env(self) -> dict[str, str]:
        """Environment for this cluster's Slurm commands (and, through sbatch's export, its jobs)."""
        env = dict(self.env)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> "SlurmConfig":
        raw = dict(raw or {})
        unknown = sorted(set(raw) - KNOWN_KEYS)
        if unknown:
            raise ConfigError(
                f"slurm cluster config: unknown key(s) {', '.join(unknown)}",
                hint=f"allowed: {', '.join(sorted(KNOWN_KEYS - {'provider'}))}",
            )
        raw.pop("provider", None)
        raw.pop("description", None)
        cfg = cls(**{k: v for k, v in raw.items() if v is not None})
        if cfg.time is not None and not _TIME.match(str(cfg.time)):
            raise ConfigError(f"slurm cluster config: time {cfg.time!r} is not a Slurm time",
                              hint='use "MM", "HH:MM:SS" or "D-HH:MM:SS"')
        if cfg.signal is not None:
            sig = str(cfg.signal).upper()
            if not _SIGNAL.match(sig):
                raise ConfigError(f"slurm cluster config: signal {cfg.signal!r} is not valid",
                                  hint='use e.g. "TERM@120" (SIGTERM 120 s before the time limit)')
            cfg.signal = sig[2:] if sig.startswith("B:") else sig
        if cfg.cpus_per_task is not None and int(cfg.cpus_per_task) < 1:
            raise ConfigError("slurm cluster config: cpus_per_task must be at least 1")
        if not isinstance(cfg.env, dict) or not all(
                isinstance(k, str) and _ENV_NAME.match(k) and isinstance(v, (str, int, float))
                for k, v in cfg.env.items()):
            raise ConfigError("slurm cluster config: env must map variable names to strings",
                              hint="e.g. env: {SLURM_CONF: /etc/slurm-b/slurm.conf}")
        cfg.env = {k: str(v) for k, v in cfg.env.items()}
        for key in ("setup", "sbatch_args"):
            value = getattr(cfg, key)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"slurm cluster config: {key} must be a list of strings")
        return cfg
