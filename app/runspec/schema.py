"""The run spec schema (pydantic): what a `run.yaml` may say, and nothing else.

The modern form (mcli's newer shape):

    name: tiny-gpt
    image: python:3.11              # containers on kubernetes; refused by clusters that cannot run one
    command: python -m foundry.examples.gpt.train    # or a list (argv); or omit and give `parameters`
    parameters: {...}               # trainer config, passed to the job as FOUNDRY_PARAMETERS (YAML)
    compute: {cluster: local, gpus: 2, nodes: 1, gpu_type: a100, instance: ...}
                                    # or a list of them: failover placements (docs/providers.md)
    env_variables: {KEY: value}
    secrets: [r2-creds]             # names of stored secrets, injected per their type
    integrations:
      - {integration_type: git_repo, git_repo: org/repo, git_branch: main, pip_install: -e .}
      - {integration_type: pip_packages, packages: [numpy]}
    scheduling: {max_retries: 2, priority: medium}
    grace: 30s                      # the preemption notice window (SIGTERM to kill): the trainer says at
                                    # start when its last checkpoint cannot be published within it

`command` runs once per process (rank) under torchrun, with RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set, unless it starts the ranks itself as mcli YAML does (composer,
torchrun, ...): then once per node (`launch:` in launch_mode.py). Integrations run once per node
before it. `image`, `gpu_type` and `instance` are honoured where the cluster can (kubernetes: image,
node selectors on the GPU product and on node.kubernetes.io/instance-type; slurm: gres) and refused
elsewhere, never ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from foundry.app.names import ENV_NAME_RE as ENV_KEY_RE, NAME_RULE, name_problem

from .launch_mode import resolve_launch



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# Bounds far above any real cluster, so an absurd count is a one-line error, never a plan; a cluster
# whose capacity is known is checked against it at launch (app/control/launch.check_capacity).
MAX_DEVICES = 100_000
MAX_NODES = 10_000


def _whole_number(value: Any) -> Any:
    """pydantic takes `true` for 1: a count written as a boolean is a mistake, said as one."""
    if isinstance(value, bool):
        raise ValueError(f"must be a whole number (got {str(value).lower()})")
    return value


class Compute(_Strict):
    cluster: str | None = None
    gpus: int | None = Field(default=None, ge=0, le=MAX_DEVICES)   # total devices; on CPU clusters, processes
    nodes: int = Field(default=1, ge=1, le=MAX_NODES)
    gpu_type: str | None = None
    instance: str | None = None

    _counts = field_validator("gpus", "nodes", mode="before")(_whole_number)

    @model_validator(mode="after")
    def _divisible(self) -> "Compute":
        if self.gpus and self.gpus % self.nodes:
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of nodes ({self.nodes})")
        return self

    @property
    def devices(self) -> int:
        return max(self.gpus or 1, self.nodes)

    @property
    def procs_per_node(self) -> int:
        return self.devices // self.nodes


class GitRepo(_Strict):
    integration_type: Literal["git_repo"]
    git_repo: str
    git_branch: str | None = None
    git_commit: str | None = None
    path: str | None = None
    pip_install: str | None = None
    ssh_clone: bool = False

    def setup_commands(self) -> list[str]:
        url = self.git_repo
        if "://" not in url and not url.startswith("git@") and url.count("/") == 1:
            url = f"git@github.com:{url}.git" if self.ssh_clone else f"https://github.com/{url}.git"
        path = self.path or url.rstrip("/").split("/")[-1].removesuffix(".git")
        branch = f" --branch {self.git_branch}" if self.git_branch else ""
        cmds = [f"[ -d {path} ] || git clone{branch} {url} {path}"]
        if self.git_commit:
            cmds.append(f"git -C {path} checkout {self.git_commit}")
        if self.pip_install:
            cmds.append(f"(cd {path} && python -m pip install {self.pip_install})")
        return cmds


class PipPackages(_Strict):
    integration_type: Literal["pip_packages"]
    packages: list[str] = Field(min_length=1)

    def setup_commands(self) -> list[str]:
        return ["python -m pip install " + " ".join(self.packages)]


Integration = Annotated[Union[GitRepo, PipPackages], Field(discriminator="integration_type")]


class Scheduling(_Strict):
    max_retries: int = Field(default=0, ge=0, le=100)
    priority: Literal["low", "medium", "high"] = "medium"
    # Where `foundry resume` (no --cluster) takes a run that failed over: "current", where it ran last;
    # "first", its first placement when that one can take it now (else where it ran last).
    prefer: Literal["current", "first"] = "current"

    _counts = field_validator("max_retries", mode="before")(_whole_number)


_GRACE_UNITS = {"s": 1, "m": 60, "h": 3600}


def _grace_seconds(value: Any) -> Any:
    """`grace: 30s`, `2m` or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError("must be a duration such as 30s or 2m")
    if isinstance(value, str):
        text = value.strip().lower()
        unit = _GRACE_UNITS.get(text[-1:]) if text else None
        try:
            return float(text[:-1]) * unit if unit else float(text)
        except ValueError:
            raise ValueError(f"{value!r} is not a duration: write it as 30s, 2m or a number of seconds") from None
    return value


class RunSpec(_Strict):
    name: str
    image: str | None = None
    command: str | list[str] | None = None
    parameters: dict[str, Any] | None = None
    compute: Compute = Field(default_factory=Compute)
    # Further placements, in order of preference, for the watchdog's relaunch after a loss (issue 31).
    # `compute:` written as a list means its first item here and the rest as `failover`.
    failover: list[Compute] = Field(default_factory=list, max_length=16)
    env_variables: dict[str, str] = Field(default_factory=dict)
    secrets: list[str] = Field(default_factory=list)
    integrations: list[Integration] = Field(default_factory=list)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    launch: Literal["auto", "per_process", "per_node"] = "auto"   # see launch_mode.py
    # Seconds between a stop's SIGTERM and the kill (Kubernetes terminationGracePeriodSeconds, Slurm
    # --signal=B:TERM@N); unset: the provider's known window, if any. The job gets FOUNDRY_GRACE_S.
    grace: float | None = Field(default=None, gt=0, le=86_400)

    _grace = field_validator("grace", mode="before")(_grace_seconds)

    @property
    def launch_mode(self) -> str:
        """per_process or per_node: `launch`, with auto resolved from the command."""
        return resolve_launch(self.launch, self.command)

    @model_validator(mode="before")
    @classmethod
    def _compute_list(cls, data: Any) -> Any:
        """`compute: [{cluster: a, gpus: 8}, {cluster: b, gpus: 4}]`: placements in order of preference."""
        if isinstance(data, dict) and isinstance(data.get("compute"), list):
            placements = data["compute"]
            if not placements:
                raise ValueError("compute: the list is empty; give one placement ({cluster: ..., gpus: ...}) or more")
            if data.get("failover"):
                raise ValueError("compute is a list and `failover` is set: give the placements in one of them")
            data = {**data, "compute": placements[0], "failover": placements[1:]}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = name_problem("run", value)
        if problem:
            raise ValueError(f"{problem}: {NAME_RULE}")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            problem = name_problem("secret", name)
            if problem:
                raise ValueError(f"{problem}: {NAME_RULE}")
        return value

    @field_validator("env_variables", mode="before")
    @classmethod
    def _env(cls, value: Any) -> Any:
        if isinstance(value, list):  # mcli's older [{key, value}] form
            out = {}
            for item in value:
                if not isinstance(item, dict) or set(item) - {"key", "value", "name"} or "value" not in item:
                    raise ValueError("each env_variables item must be {key: NAME, value: VALUE}")
                out[str(item.get("key", item.get("name")))] = item["value"]
            value = out
        if isinstance(value, dict):
            bad = [k for k in value if not ENV_KEY_RE.match(str(k))]
            if bad:
                raise ValueError(f"invalid environment variable name(s): {', '.join(map(str, bad))}")
            for key, item in value.items():  # str(None) would hand the job the text "None"
                if item is None or isinstance(item, (list, dict)):
                    kind = "empty (null)" if item is None else f"a {type(item).__name__}"
                    raise ValueError(f"{key} is {kind}; a variable's value is one string or number "
                                     "(quote it: '' for an empty one)")
                if "\x00" in str(item):
                    raise ValueError(f"{key} holds a NUL byte, which no environment variable can")
            return {str(k): str(v) for k, v in value.items()}
        return value

    @field_validator("command")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if any("\x00" in part for part in ([value] if isinstance(value, str) else value or [])):
            raise ValueError("holds a NUL byte (\\x00), which no process argument can; remove it")
        return value

    @model_validator(mode="after")
    def _has_work(self) -> "RunSpec":
        if self.command is None and self.parameters is None:
            raise ValueError("give a `command` (what to run) or `parameters` (a trainer config)")
        if isinstance(self.command, str) and not self.command.strip():
            raise ValueError("`command` is empty")
        return self

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_none=True)
        if not data.get("failover"):   # a spec without a failover list reads as it always did
            data.pop("failover", None)
        return data
