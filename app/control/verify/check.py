"""`foundry verify-resume`: train the user's own job straight and through stops, on each world size,
and say whether the resumed run is the straight run bit for bit; if not, where and why.

Everything a run writes stays in its work folder (checkpoints, run dir, probe rows, each process's
log): removed at the end unless kept (--keep / --work-dir), or when the training itself failed (then
the error names the log).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from foundry.plugins.errors import ConfigError

from .compare import Comparison, compare
from .plan import Plan, make_plan, parse_world_sizes
from .runner import Target, TrainingFailed, run_training

_SHELL = re.compile(r"[;&|<>$`(){}*?~\n]")


@dataclass
class Outcome:
    ok: bool
    plan: Plan
    comparisons: list[Comparison]
    wall_seconds: float
    work_dir: str | None  # kept folder, else None
    command: str
    runs: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """For a person (--json prints to_dict() instead)."""
        from .report import render

        return render(self)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "command": self.command, "steps": self.plan.steps,
                "stops": [{"kind": s.kind, "after_batch": s.at} for s in self.plan.stops],
                "save_interval": f"{self.plan.save_every}ba", "world_sizes": list(self.plan.world_sizes),
                "results": [c.to_dict() for c in self.comparisons], "wall_seconds": round(self.wall_seconds, 1),
                "work_dir": self.work_dir}


def target_from_command(argv: list[str], cwd: Path) -> Target:
    if not argv:
        raise ConfigError("no training command given", hint="foundry verify-resume -- python train.py ARGS, or -f run.yaml")
    return Target(tuple(argv), cwd)


def target_from_spec(path: str, cwd: Path) -> tuple[Target, int]:
    """The spec's command (or `python -m foundry.trainer` for `parameters`) and environment, run on this
    machine as the local cluster runs it; the world size its compute asks for."""
    import yaml

    from foundry.app.runspec.loader import load_spec

    spec = load_spec(path)
    env = dict(spec.env_variables)
    if spec.command is None:
        argv = ["python", "-m", "foundry.trainer"]
        env["FOUNDRY_PARAMETERS"] = yaml.safe_dump(spec.parameters, sort_keys=False)
    elif isinstance(spec.command, list):
        argv = list(spec.command)
    elif _SHELL.search(spec.command):
        argv = ["bash", "-c", spec.command]
    else:
        argv = shlex.split(spec.command)
    if spec.compute.nodes > 1:
        raise ConfigError(f"{path}: verify-resume runs on this machine; the spec asks for {spec.compute.nodes} nodes",
                          hint="check one node's worth with --world-sizes (the resume contract is per world size)")
    return Target(tuple(argv), cwd, tuple(sorted(env.items()))), spec.compute.gpus or 1


def verify_resume(command: list[str] | None = None, file: str | None = None, *, steps: int = 20, stops: int = 2,
                  world_sizes: str | None = None, work_dir: str | None = None, timeout: float = 1800.0,
                  progress: Callable[[str], None] = lambda line: None, cwd: Path | None = None) -> Outcome:
    """The whole check, from what the user typed: a command (argv) or a run spec's path."""
    if bool(file) == bool(command):
        raise ConfigError("give either -f RUN.yaml or a command after --, not both" if file else "nothing to verify",
                          hint="foundry verify-resume -- python train.py ARGS, or foundry verify-resume -f run.yaml")
    cwd = cwd or Path.cwd()
    if file:
        target, spec_world = target_from_spec(file, cwd)
    else:
        target, spec_world = target_from_command(list(command or []), cwd), 1
    plan = make_plan(steps, stops, parse_world_sizes(world_sizes) if world_sizes else (spec_world,))
    return run_check(target, plan, work_dir=work_dir, timeout=timeout, progress=progress)


def run_check(target: Target, plan: Plan, *, work_dir: str | None = None, keep: bool = False,
              timeout: float = 1800.0, progress: Callable[[str], None] = lambda line: None) -> Outcome:
    start = time.monotonic()
    root = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="foundry-verify-resume-"))
    root.mkdir(parents=True, exist_ok=True)
    keep = keep or bool(work_dir)
    extra_env = {} if os.environ.get("FOUNDRY_CACHE_DIR") else {"FOUNDRY_CACHE_DIR": str(root / "data-cache")}
    comparisons, failed = [], True
    try:
        for world in plan.world_sizes:
            progress(f"world size {world}: training {plan.steps} batches straight")
            straight = run_training(target, plan, world, root / f"w{world}-straight", (), timeout, extra_env)
            progress(f"world size {world}: training again, stopped "
                     + ", ".join(s.describe() for s in plan.stops))
            stopped = run_training(target, plan, world, root / f"w{world}-stopped", plan.stops, timeout, extra_env)
            comparisons.append(compare(world, straight, stopped))
        failed = False
    except TrainingFailed:
        keep = True  # the error names a log inside it
        raise
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
        elif failed:
            progress(f"kept {root}")
    return Outcome(ok=all(c.ok for c in comparisons), plan=plan, comparisons=comparisons,
                   wall_seconds=time.monotonic() - start, work_dir=str(root) if keep else None,
                   command=shlex.join(target.command))
