"""The Python SDK: the control plane for notebooks and scripts, shaped like mcli's.

    from foundry.app.sdk import RunConfig, create_run, get_run, stop_run, resume_run, get_logs

    config = RunConfig.from_file("run.yaml")
    config.gpus = 2
    config.cluster = "local"
    run = create_run(config)                 # RunInfo: name, status, resumptions, ...
    run = wait_for_run(run, timeout=600)     # until it is no longer pending/running/stopping
    print("\\n".join(get_logs(run)))

Every function takes a run name or a RunInfo, and an optional `home` (default FOUNDRY_HOME). See
docs/sdk.md. Errors are FoundryError subclasses (ConfigError for bad specs and unknown names).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from foundry.app.control import ControlPlane, DryRun, RunInfo
from foundry.app.runspec import RunSpec, load_spec, parse_spec

__all__ = ["RunConfig", "create_run", "dry_run", "get_run", "list_runs", "stop_run", "resume_run",
           "delete_run", "get_logs", "follow_run_logs", "wait_for_run", "get_metrics", "use_secret", "RunInfo"]


class RunConfig:
    """A run spec you can edit before launching: `name`, `cluster`, `gpus` (alias `gpu_num`),
    `nodes`, `gpu_type`, `image`, `command`, `parameters`, `env_variables`, `secrets`, `max_retries`."""

    _COMPUTE = {"cluster": "cluster", "gpus": "gpus", "gpu_num": "gpus", "nodes": "nodes",
                "gpu_type": "gpu_type", "instance": "instance"}
    _TOP = ("name", "image", "command", "parameters", "env_variables", "secrets", "integrations")

    def __init__(self, **spec: Any):
        object.__setattr__(self, "_data", parse_spec(spec, "RunConfig").to_dict() if spec else {})

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "RunConfig":
        cfg = cls()
        object.__setattr__(cfg, "_data", load_spec(Path(path)).to_dict())
        return cfg

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        return cls(**data)

    def __getattr__(self, key: str) -> Any:
        data = object.__getattribute__(self, "_data")
        if key in self._COMPUTE:
            return data.get("compute", {}).get(self._COMPUTE[key])
        if key == "run_name":
            key = "name"
        if key == "max_retries":
            return data.get("scheduling", {}).get("max_retries", 0)
        if key in self._TOP:
            return data.get(key)
        raise AttributeError(key)

    def __setattr__(self, key: str, value: Any) -> None:
        if key in self._COMPUTE:
            self._data.setdefault("compute", {})[self._COMPUTE[key]] = value
        elif key == "max_retries":
            self._data.setdefault("scheduling", {})["max_retries"] = value
        elif key in self._TOP or key == "run_name":
            self._data["name" if key == "run_name" else key] = value
        else:
            raise AttributeError(f"RunConfig has no field {key!r}")

    def to_spec(self) -> RunSpec:
        """Validate (ConfigError with the key and what is allowed)."""
        return parse_spec(self._data, "RunConfig")

    def to_dict(self) -> dict[str, Any]:
        return self.to_spec().to_dict()

    def __repr__(self) -> str:
        return f"RunConfig({self._data!r})"


def _cp(home: str | os.PathLike | None) -> ControlPlane:
    return ControlPlane(home)


def _name(run: str | RunInfo) -> str:
    return run.name if isinstance(run, RunInfo) else run


def _spec(config: RunConfig | RunSpec | dict | str | os.PathLike):
    return config.to_spec() if isinstance(config, RunConfig) else config


def create_run(config: RunConfig | RunSpec | dict | str, *, home=None) -> RunInfo:
    """Validate, record and launch a run (resumption 0)."""
    return _cp(home).create_run(_spec(config))


def dry_run(config: RunConfig | RunSpec | dict | str, *, home=None) -> DryRun:
    """The normalized spec and the provider's plan, secret values masked; launches nothing."""
    return _cp(home).dry_run(_spec(config))


def get_run(run: str | RunInfo, *, home=None) -> RunInfo:
    return _cp(home).get_run(_name(run))


def list_runs(*, home=None) -> list[RunInfo]:
    return _cp(home).list_runs()


def stop_run(run: str | RunInfo, *, graceful: bool = True, home=None) -> RunInfo:
    """Pause (graceful: checkpoint, exit as paused) or kill (graceful=False) the run."""
    return _cp(home).stop_run(_name(run), graceful=graceful)


def resume_run(run: str | RunInfo, *, cluster: str | None = None, gpus: int | None = None,
               nodes: int | None = None, home=None) -> RunInfo:
    """A new resumption of a paused/stopped/failed/lost run, on any cluster and device count."""
    return _cp(home).resume_run(_name(run), cluster=cluster, gpus=gpus, nodes=nodes)


def delete_run(run: str | RunInfo, *, checkpoints: str = "keep", home=None) -> str | None:
    """Forget the run and its logs; its checkpoints are kept unless checkpoints="delete". Returns their URL."""
    return _cp(home).delete_run(_name(run), checkpoints=checkpoints)


def get_logs(run: str | RunInfo, *, resumption: int | None = None, rank: int | None = None,
             home=None) -> list[str]:
    return list(_cp(home).logs(_name(run), resumption=resumption, rank=rank))


def follow_run_logs(run: str | RunInfo, *, rank: int | None = None, home=None) -> Iterator[str]:
    """Yield log lines until the run ends, across watchdog retries."""
    return _cp(home).follow_run(_name(run), rank=rank)


def wait_for_run(run: str | RunInfo, *, timeout: float | None = None, home=None) -> RunInfo:
    """Block until the run is no longer pending/running/stopping; returns it."""
    return _cp(home).wait(_name(run), timeout=timeout)


def get_metrics(run: str | RunInfo, *, home=None) -> list[dict]:
    return [dict(row) for row in _cp(home).metrics(_name(run))]  # the caller's own copies


@contextmanager
def use_secret(*names: str, home=None) -> Iterator[None]:
    """Inside the block, this process reads and writes storage with the stored secret(s) `names`
    (`foundry create secret s3 r2 ...`), as a run that lists them does; the environment is put
    back afterwards. `with use_secret("r2"): MDSWriter(out="s3://bucket/data", ...)`."""
    with _cp(home).use_secrets(*names):
        yield
