"""Run `foundry ARGS...` and SIGKILL it at a named moment of a launch (imported by the CLI process
the kill probes start; patches only that process).

    python -c "import kill_points; kill_points.main()" POINT ARGS...

POINTs, in launch order:
  after-create    the run and its resumption 0 are recorded; nothing planned
  before-launch   the launch intent is recorded; provider.launch not called
  in-launch       inside provider.launch: local - the launcher process exists, its pid is not
                  written; slurm - sbatch accepted the job, its id is not parsed
  after-launch    provider.launch returned a handle; the registry does not have it
  after-record    the handle is recorded; the "launched" event is not
  none            no kill (a control run)
The watchdog's relaunch (`foundry watch --once` on a lost run) takes the same launch path, and has
two moments of its own before it:
  after-lost      the lost resumption is recorded; no new resumption yet
  after-add       the retry's new resumption (planning intent) is recorded; nothing planned
"""

from __future__ import annotations

import os
import signal
import sys


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _after(owner, name: str, when=lambda *a, **k: True) -> None:
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        result = real(*args, **kwargs)
        if when(*args, **kwargs):
            _die()
        return result

    setattr(owner, name, wrapper)


def _before(owner, name: str) -> None:
    def wrapper(*args, **kwargs):
        _die()

    setattr(owner, name, wrapper)


def arm(point: str) -> None:
    from foundry.app.control.registry import Registry
    from foundry.backends.compute import local
    from foundry.backends.compute.slurm import commands, provider

    providers = (local.LocalProvider, provider.SlurmProvider)
    if point == "after-create":
        _after(Registry, "create_run")
    elif point == "before-launch":
        for cls in providers:
            _before(cls, "launch")
    elif point == "in-launch":
        _after(local, "create_time")              # called right after Popen, before the pid file
        _after(commands, "parse_sbatch")          # sbatch answered: the job exists
    elif point == "after-launch":
        for cls in providers:
            _after(cls, "launch")
    elif point == "after-record":
        _after(Registry, "update_resumption", lambda self, run_id, idx, **fields: "handle" in fields)
    elif point == "after-lost":
        _after(Registry, "transition", lambda self, run_id, idx, expect, new, *a, **k: new == "lost")
    elif point == "after-add":
        _after(Registry, "add_resumption")
    elif point != "none":
        raise SystemExit(f"unknown kill point {point!r}")


def main() -> None:
    point, args = sys.argv[1], sys.argv[2:]
    arm(point)
    from foundry.app.cli.main import main as cli_main

    sys.argv = ["foundry", *args]
    cli_main(args)


if __name__ == "__main__":
    main()
