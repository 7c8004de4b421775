"""Run one training (straight, or through its stops) as processes on this machine, and read back
what it wrote. No torch here: the training is the user's command, started as a user would start it
(the command itself for one process, torchrun for more), with the variables the trainer takes from
outside (trainer/env_settings.py, trainer/resume_probe.py) pointing it at this run's own folders.

A stop is delivered when the probe says the process is ready for it (its `waiting` row), so stops land
after the planned batch however fast the machine is: SIGTERM to the launched process (torchrun forwards
it to its ranks once), or SIGKILL to its whole process group.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from foundry.plugins.errors import ConfigError, FoundryError

from .compare import RunRecord
from .plan import Plan, Stop

# The launcher's variables a nested launch must not inherit (it would join the outer job's world).
_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
                "MASTER_PORT", "TORCHELASTIC_RUN_ID", "RESUMPTION_INDEX", "RUN_NAME", "FOUNDRY_RUN_DIR",
                "FOUNDRY_METRICS_FILE")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


class TrainingFailed(FoundryError):
    """The user's training did not run to where the plan needed it (not a resume difference)."""


@dataclass(frozen=True)
class Target:
    """What to run: an argv as the user would type it, its working folder, variables of its own."""

    command: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...] = ()

    def argv(self, world_size: int, log_dir: Path) -> list[str]:
        if world_size == 1:
            return list(self.command)
        first, rest = self.command[0], list(self.command[1:])
        torchrun = ["-m", "torch.distributed.run", "--standalone", "--nnodes=1", f"--nproc-per-node={world_size}",
                    f"--log-dir={log_dir}"]  # torchrun's own records: not a folder left in /tmp
        if _PYTHON.match(os.path.basename(first)) and rest:
            return [first, *torchrun, *rest]  # `python script.py ...` or `python -m module ...`
        return [sys.executable, *torchrun, "--no-python", first, *rest]  # this environment's torchrun


def run_training(target: Target, plan: Plan, world_size: int, folder: Path, stops: tuple[Stop, ...],
                 timeout: float, extra_env: dict[str, str]) -> RunRecord:
    """Train `plan.steps` batches in `folder`, stopping at `stops` (one process per segment, each
    resuming from the last); the rows it wrote."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, stop in enumerate((*stops, None)):
        _segment(target, plan, world_size, folder, index, stop, timeout, extra_env)
    return read_record(folder)


def _segment(target: Target, plan: Plan, world_size: int, folder: Path, index: int, stop: Stop | None,
             timeout: float, extra_env: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCH_VARS and not k.startswith("FOUNDRY_VERIFY_")}
    env.update(dict(target.env))
    env.update(extra_env)
    env.update({
        "RUN_NAME": "verify-resume", "FOUNDRY_RUN_NAME": "verify-resume", "RESUMPTION_INDEX": str(index),
        "FOUNDRY_RUN_DIR": str(folder / "run"), "FOUNDRY_METRICS_FILE": str(folder / "run" / "metrics.jsonl"),
        "FOUNDRY_SAVE_FOLDER": (folder / "checkpoints").as_uri(), "FOUNDRY_SAVE_INTERVAL": f"{plan.save_every}ba",
        "FOUNDRY_AUTORESUME": "1", "FOUNDRY_VERIFY_DIR": str(folder / "probe"),
        "FOUNDRY_VERIFY_STEPS": str(plan.steps), "PYTHONUNBUFFERED": "1",
    })
    if stop is not None:
        env["FOUNDRY_VERIFY_STOP"] = f"{stop.kind}:{stop.at}"
    log_path = folder / f"segment{index}.log"
    argv = target.argv(world_size, folder / "torchelastic")
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(argv, cwd=target.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except (FileNotFoundError, PermissionError) as exc:
            raise ConfigError(f"cannot start {argv[0]!r}: {exc.strerror}",
                              hint="give the program's full path, or activate the environment that has it") from None
    try:
        rc = _drive(proc, folder, index, stop, time.monotonic() + timeout)
    finally:
        _kill_all(proc, folder, index)
    _check(folder, index, stop, rc, log_path)


def _drive(proc: subprocess.Popen, folder: Path, index: int, stop: Stop | None, deadline: float) -> int:
    """Wait for the process, delivering the stop once the probe is waiting for it."""
    delivered, reader = False, _Tail(folder / "probe" / "rank0.jsonl")
    while proc.poll() is None:
        if time.monotonic() > deadline:
            raise TrainingFailed(f"the training did not finish segment {index} in time",
                                 hint="give --timeout more seconds, or fewer --steps")
        if stop is not None and not delivered and any(
                r.get("kind") == "waiting" and r.get("resumption") == index for r in reader.new_rows()):
            delivered = True
            if stop.kind == "term":
                os.kill(proc.pid, signal.SIGTERM)  # the process itself: torchrun forwards it to each rank once
            else:
                _kill_all(proc, folder, index)
        time.sleep(0.05)
    return proc.returncode


def _kill_all(proc: subprocess.Popen, folder: Path, index: int) -> None:
    """kill -9 the launched process's group and each rank's (torchrun starts every rank in a session of
    its own, with its DataLoader workers): a whole job dies at once, as when its node is lost. Also the
    cleanup after every segment, so nothing it started outlives it."""
    groups = {proc.pid} | {row["pgid"] for rows in read_record(folder).probe.values() for row in rows
                           if row.get("kind") == "start" and row.get("resumption") == index and row.get("pgid")}
    groups.discard(os.getpgrp())
    tree = _descendants(proc.pid)  # read before the kill: a rank that never reached the probe is in it too
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def _descendants(root: int) -> set[int]:
    """Every process below `root`, from /proc (Linux; elsewhere only the groups above are killed)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _check(folder: Path, index: int, stop: Stop | None, rc: int, log_path: Path) -> None:
    record = read_record(folder)
    rows = [r for r in record.probe.get(0, []) if r.get("resumption") == index]
    where = f"segment {index} ({stop.describe() if stop else 'to the end'}) exited {rc}"
    if not any(r.get("kind") == "start" for r in rows):
        if rc == 0:
            raise TrainingFailed(f"{where} without calling foundry.trainer's Trainer.fit(); log: {log_path}",
                                 hint="verify-resume checks scripts that train with foundry.trainer.Trainer")
        raise TrainingFailed(f"{where} before training started; log: {log_path}", hint=_tail(log_path))
    if stop is None:
        if rc != 0 or not any(r.get("kind") == "final" for r in rows):
            raise TrainingFailed(f"{where} without finishing; log: {log_path}", hint=_tail(log_path))
        return
    if not any(r.get("kind") == "waiting" for r in rows):
        raise TrainingFailed(f"{where} before reaching batch {stop.at}; log: {log_path}",
                             hint="does the script train at least --steps batches?  " + _tail(log_path))
    if stop.kind == "term" and not any(m.get("event") == "paused" and m.get("resumption") == index
                                       for m in record.metrics):
        raise TrainingFailed(f"{where}: it did not pause (checkpoint, exit) after SIGTERM; log: {log_path}",
                             hint=_tail(log_path))


def _tail(path: Path, lines: int = 3) -> str:
    """The log's last lines, for the person reading the error (never parsed)."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "last log lines: " + " | ".join(line.strip() for line in text[-lines:])


class _Tail:
    """The complete JSON rows appended to a file since the last call."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def new_rows(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return [json.loads(line) for line in data[:end].splitlines() if line.strip()]


def read_record(folder: Path) -> RunRecord:
    probe: dict[int, list[dict]] = {}
    for path in sorted((folder / "probe").glob("rank*.jsonl")):
        probe[int(path.stem[4:])] = _rows(path)
    metrics_file = next((Path(r["metrics_file"]) for r in probe.get(0, []) if r.get("kind") == "start"),
                        folder / "run" / "metrics.jsonl")
    return RunRecord(metrics=_rows(metrics_file), probe=probe)


def _rows(path: Path) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # the last line of a killed process, cut short
            continue
    return out
