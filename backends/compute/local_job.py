"""The detached launcher of one local job: setup steps, torchrun, and the job's exit record.

    python -m foundry.backends.compute.local_job JOB_DIR        (started by LocalProvider.launch)

Reads JOB_DIR/job.json (no secrets: those arrive in the environment), runs the setup commands once,
then `torchrun --standalone --nproc_per_node=N` over `local_rank` wrappers, and finally writes
JOB_DIR/exit.json {exit_code, state, reason} from the ranks' exit codes:
  - a rank exited with its own non-zero code (not 75)              -> failed (never retried)
  - a rank was SIGKILLed or vanished without an exit record        -> lost (retry-eligible)
  - every rank exited 0                                            -> completed
  - ranks exited 75 (PAUSED_EXIT_CODE), others 0/75/SIGTERM        -> paused
  - ranks ended by SIGTERM nobody asked for                        -> lost
  - a graceful stop before any rank's command started (during the setup steps, or while torchrun
    starts)                                                        -> paused, with nothing to restore
SIGTERM to this process group (a graceful stop) reaches torchrun, which forwards it to the ranks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.compute import PAUSED_EXIT_CODE
from foundry.plugins.process_identity import create_time

from .local_claim import claim_launch


# torchrun, minus the traceback it prints when a graceful stop's SIGTERM reaches it.
TORCHRUN = """import sys
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main
try:
    main()
except SignalException as exc:
    print(f"[launcher] torchrun stopped by signal {exc.sigval}", flush=True)
    sys.exit(128 + int(exc.sigval))
"""


def classify(codes: dict[int, int | None], nprocs: int, stop_requested: bool) -> tuple[str, int, str]:
    """(state, exit_code, reason) of a job from its ranks' exit codes (None: no record)."""
    all_codes = [codes.get(r) for r in range(nprocs)]
    own = [(r, c) for r, c in enumerate(all_codes) if c is not None and c > 0 and c != PAUSED_EXIT_CODE]
    if own:
        rank, code = own[0]
        return "failed", code, f"rank {rank} exited with code {code}"
    killed = [r for r, c in enumerate(all_codes) if c is None or c == -signal.SIGKILL]
    if killed and not stop_requested:
        return "lost", 137, f"rank {killed[0]} was killed (SIGKILL or vanished)"
    if all(c == 0 for c in all_codes):
        return "completed", 0, "all ranks exited 0"
    if any(c == PAUSED_EXIT_CODE for c in all_codes):
        return "paused", PAUSED_EXIT_CODE, "paused after a checkpoint"
    signals = sorted({-c for c in all_codes if c is not None and c < 0})
    names = ", ".join(signal.Signals(s).name for s in signals) or "a signal"
    if stop_requested:
        return "failed", 128 + (signals[0] if signals else 15), f"stopped ({names}) without a checkpoint"
    return "lost", 128 + (signals[0] if signals else 9), f"terminated by {names}"


def main(job_dir: Path) -> int:
    owner = f"started {os.getpid()} {create_time(os.getpid())}"
    if claim_launch(job_dir, owner) != owner:  # the control plane gave this launch up (local_claim.py)
        print("[launcher] this launch was abandoned by the control plane; not starting", flush=True)
        return 0
    job = json.loads((job_dir / "job.json").read_text())
    stop_flag = job_dir / "stop-requested"
    signal.signal(signal.SIGTERM, lambda *_: None)  # torchrun (same group) handles the stop
    signal.signal(signal.SIGINT, lambda *_: None)
    print(f"[launcher] {time.strftime('%H:%M:%S')} job {job['job_id']}: {job['nprocs']} process(es)", flush=True)
    for line in job.get("setup_commands", []):
        print(f"[setup] {line}", flush=True)
        rc = subprocess.call(["bash", "-c", line], stdin=subprocess.DEVNULL)
        if rc != 0 and stop_flag.exists():
            return _paused_before_start(job_dir)
        if rc != 0:
            atomic_write(job_dir / "exit.json", json.dumps(
                {"state": "failed", "exit_code": rc, "reason": f"setup step failed ({rc}): {line}"}))
            return 1
    rank_wrapper = [sys.executable, "-u", "-m", "foundry.backends.compute.local_rank", str(job_dir), "--",
                    *job["command"]]
    env = None
    nprocs = job["nprocs"]
    if job.get("launch") == "per_node":   # mcli: the command runs once and starts the ranks itself
        cmd, env, nprocs = rank_wrapper, node_environment(job["nprocs"]), 1
        print(f"[launcher] {time.strftime('%H:%M:%S')} starting the command once for the node", flush=True)
    else:
        cmd = [sys.executable, "-c", TORCHRUN, "--standalone", "--nnodes=1",
               f"--nproc_per_node={job['nprocs']}", "--max-restarts=0",
               f"--log-dir={job_dir / 'torchelastic'}",   # torchrun's own records: not a folder left in /tmp
               "--no-python", *rank_wrapper]
        print(f"[launcher] {time.strftime('%H:%M:%S')} starting torchrun", flush=True)
    rc = subprocess.call(cmd, stdin=subprocess.DEVNULL, env=env)
    if stop_flag.exists() and not any((job_dir / "ranks").glob("rank-*.pid")):
        return _paused_before_start(job_dir)  # local_rank writes the pid once the command has started
    codes: dict[int, int | None] = {}
    for rank in range(nprocs):
        path = job_dir / "ranks" / f"rank-{rank}.exit"
        codes[rank] = int(path.read_text()) if path.exists() else None
    if rc != 0 and all(c is None for c in codes.values()) and not stop_flag.exists():
        state, code, reason = "failed", rc, f"torchrun exited {rc} before starting the ranks"
    else:
        state, code, reason = classify(codes, nprocs, stop_flag.exists())
    shutil.rmtree(job_dir / "secrets", ignore_errors=True)  # secret files live only while the job runs
    atomic_write(job_dir / "exit.json", json.dumps({"state": state, "exit_code": code, "reason": reason,
                                                    "ranks": codes}))
    print(f"[launcher] {time.strftime('%H:%M:%S')} job {state}: {reason}", flush=True)
    return 0


def _paused_before_start(job_dir: Path) -> int:
    """A graceful stop before any rank's command started: nothing ran, so nothing is lost. The run
    is paused, not failed: resuming it starts it again (from its last checkpoint, if it has one)."""
    shutil.rmtree(job_dir / "secrets", ignore_errors=True)
    reason = "stopped before the ranks started: nothing to restore"
    atomic_write(job_dir / "exit.json", json.dumps({"state": "paused", "exit_code": PAUSED_EXIT_CODE,
                                                    "reason": reason, "ranks": {}}))
    print(f"[launcher] {time.strftime('%H:%M:%S')} job paused: {reason}", flush=True)
    return 0


def node_environment(nprocs: int) -> dict[str, str]:
    """What mcli gives a once-per-node command (composer's and torchrun's launchers read these)."""
    import socket

    with socket.socket() as sock:   # a free port for the command's own rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    env.update(NODE_RANK="0", NUM_NODES="1", LOCAL_WORLD_SIZE=str(nprocs), WORLD_SIZE=str(nprocs),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
