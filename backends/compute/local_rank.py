"""Per-process wrapper under torchrun (local provider): logs and the exact exit code of one rank.

    python -m foundry.backends.compute.local_rank JOB_DIR -- COMMAND...

Runs COMMAND, writes its output to JOB_DIR/ranks/rank-N.log and (prefixed "[rank N]") to stdout,
forwards SIGTERM/SIGINT to it exactly once per signal received (COMMAND runs in its own process
group, so torchrun's killpg of this wrapper's group does not reach it twice), and writes its exit status to JOB_DIR/ranks/rank-N.exit (negative:
killed by that signal). Both this wrapper and COMMAND die with their parent (PR_SET_PDEATHSIG), so
killing the job's launcher never leaves orphan ranks behind. While COMMAND runs, the rank's
heartbeat file is refreshed (plugins/heartbeat.py).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.heartbeat import Beater
from foundry.plugins.process_identity import create_time

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    die_with_parent()
    job_dir = Path(argv[0])
    command = argv[2:] if len(argv) > 1 and argv[1] == "--" else argv[1:]
    rank = int(os.environ.get("RANK", "0"))
    ranks = job_dir / "ranks"
    ranks.mkdir(parents=True, exist_ok=True)
    # Forwarding is in place before the command starts: a stop that lands while it starts (torchrun
    # signals this wrapper as soon as it exists) would otherwise kill this wrapper, the command with
    # it (PDEATHSIG), and leave no exit record. A signal that comes before the command is sent to it
    # once it has started.
    child: subprocess.Popen | None = None
    early: list[int] = []

    def forward(signum, _frame):
        if child is None:
            early.append(signum)
            return
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, preexec_fn=die_with_parent, process_group=0)
    while early:
        forward(early.pop(0), None)
    atomic_write(ranks / f"rank-{rank}.pid", f"{child.pid} {create_time(child.pid)}")  # pid + start: pids are reused
    beater = Beater.from_env(rank)   # the job's own evidence that it exists (plugins/heartbeat.py)
    if beater:
        beater.start()
    prefix = f"[rank {rank}] ".encode()
    with open(ranks / f"rank-{rank}.log", "ab", buffering=0) as log:
        assert child.stdout is not None
        for line in iter(child.stdout.readline, b""):
            log.write(line)
            try:
                sys.stdout.buffer.write(prefix + line)
                sys.stdout.buffer.flush()
            except (BrokenPipeError, ValueError):
                pass
    code = child.wait()
    if beater:
        beater.stop(ended=code == 0)
    atomic_write(ranks / f"rank-{rank}.exit", str(code))
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
