"""The job's heartbeat: evidence, from the job itself, that its processes still exist.

A provider's status call can fail for reasons that say nothing about the job (an API timeout, a
frozen Slurm controller, a network partition between the control plane and the cluster). The
watchdog then must not relaunch or kill anything on a guess: it marks the run `unknown`. Only when
the provider cannot be reached *and* the job's own heartbeat has been silent past a deadline is
the job taken as gone (lost). A job that never wrote a heartbeat stays `unknown` until the provider
answers again.

Each rank's provider wrapper (backends/compute/local_rank.py, Slurm's rank.sh) refreshes

    $FOUNDRY_RUN_DIR/heartbeats/<RESUMPTION_INDEX>-<RANK>       (its mtime is the beat)

every INTERVAL_S while the rank's process runs, and writes heartbeats/ended/<RESUMPTION_INDEX>-<RANK>
once it has exited 0 (a job that completed is silent too, but is not gone). The run folder must be shared between the job and
the control plane for this to work (as it is for metrics.jsonl); where it is not, no beat arrives
and a run that cannot be observed stays `unknown`, never `lost` by the heartbeat.

    FOUNDRY_HEARTBEAT_DEADLINE_S   seconds of silence (and of an unreachable provider) after which
                                   the job is taken as lost (default DEADLINE_S)
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Mapping

from .errors import ConfigError

INTERVAL_S = 10.0
DEADLINE_S = 300.0
FOLDER = "heartbeats"
ENDED = "ended"     # heartbeats/ended/<RESUMPTION_INDEX>-<RANK>: the rank's process exited 0


def beat_path(run_dir: str | os.PathLike, resumption: int | str, rank: int | str) -> Path:
    return Path(run_dir) / FOLDER / f"{resumption}-{rank}"


def ended_path(run_dir: str | os.PathLike, resumption: int | str, rank: int | str) -> Path:
    """Written by the rank's wrapper once its process has exited 0: its beats stop because it finished."""
    return Path(run_dir) / FOLDER / ENDED / f"{resumption}-{rank}"


def all_ended(run_dir: str | os.PathLike, resumption: int) -> bool:
    """Every rank of this resumption that beat has also recorded that its process exited 0. Then the
    silence is the job's own end (a run that completed while its provider could not be reached), not
    evidence that it vanished: it stays `unknown` until the provider says how it ended. A rank killed
    or crashed records nothing, so its silence still counts."""
    folder = Path(run_dir) / FOLDER
    beat = {p.name for p in folder.glob(f"{resumption}-*")}
    return bool(beat) and beat <= {p.name for p in (folder / ENDED).glob(f"{resumption}-*")}


def last_beat(run_dir: str | os.PathLike, resumption: int) -> float | None:
    """The newest beat of any rank of this resumption (UNIX time), or None when none ever beat."""
    newest = None
    for path in (Path(run_dir) / FOLDER).glob(f"{resumption}-*"):
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            continue
        newest = mtime if newest is None else max(newest, mtime)
    return newest


def deadline_s(environ: Mapping[str, str] | None = None) -> float:
    env = os.environ if environ is None else environ
    raw = env.get("FOUNDRY_HEARTBEAT_DEADLINE_S", "")
    if not raw:
        return DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= INTERVAL_S:
        raise ConfigError(f"FOUNDRY_HEARTBEAT_DEADLINE_S={raw!r} must be a number of seconds above {INTERVAL_S:.0f}",
                          hint="unset it for the default (300)")
    return value


class Beater:
    """Touches one rank's beat file every INTERVAL_S until stop() (a daemon thread: it never keeps
    a process alive). Failures to write are ignored: a missing beat only ever means `unknown`."""

    def __init__(self, path: Path, interval: float = INTERVAL_S):
        self.path, self.interval = path, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="foundry-heartbeat", daemon=True)

    @classmethod
    def from_env(cls, rank: int, environ: Mapping[str, str] | None = None) -> "Beater | None":
        env = os.environ if environ is None else environ
        run_dir = env.get("FOUNDRY_RUN_DIR")
        if not run_dir:
            return None
        return cls(beat_path(run_dir, env.get("RESUMPTION_INDEX", "0"), rank))

    def start(self) -> "Beater":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.touch()
            except OSError:
                pass
            self._stop.wait(self.interval)

    def stop(self, ended: bool = False) -> None:
        """Stop beating; `ended`: the rank's process has exited 0 (recorded beside the beats)."""
        self._stop.set()
        if ended:
            try:
                marker = self.path.parent / ENDED / self.path.name
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            except OSError:
                pass
