"""The detached launcher of one ssh job on one host: setup steps, torchrun, the host's exit record.

    python -m foundry.backends.compute.ssh.host_job JOB_DIR       (started by `remote start`)

JOB_DIR/job.json says what to run (no secrets); JOB_DIR/env.json (0600) holds the job's environment
and is deleted once read.
torchrun joins the c10d rendezvous on the fleet's first host (--nnodes, --rdzv_endpoint) and starts
this host's ranks through local_rank, which records each training process (pid + start time in
ranks/rank-N.pid), its log (ranks/rank-N.log) and its exit status (ranks/rank-N.exit). When torchrun
ends, JOB_DIR/exit.json {state, exit_code, reason, ranks} is written with the local provider's rules
(local_job.classify), the job's secret files are removed and the host's GPU lease is given back.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.compute import PAUSED_EXIT_CODE
from foundry.plugins.process_identity import create_time

from ..local_job import TORCHRUN, classify
from . import leases
from .remote import signal_ranks


def torchrun_argv(job: dict, job_dir: Path, python: str) -> list[str]:
    """This host's torchrun: one agent per host, c10d rendezvous on the first host. The first host is
    told it hosts the store (is_host): torch's own guess compares the endpoint with the addresses its
    hostname resolves to, which misses a cloud instance reached through its public (NATed) address."""
    wrapper = [python, "-u", "-m", "foundry.backends.compute.local_rank", str(job_dir), "--", *job["command"]]
    return [python, "-c", TORCHRUN, f"--nnodes={job['nnodes']}", f"--nproc_per_node={job['nprocs']}",
            "--rdzv_backend=c10d", f"--rdzv_endpoint={job['rdzv_endpoint']}", f"--rdzv_id={job['job_id']}",
            f"--rdzv_conf=is_host={1 if job.get('node', 0) == 0 else 0}",
            "--max-restarts=0", f"--log-dir={job_dir / 'torchelastic'}", "--no-python", *wrapper]


def host_codes(job_dir: Path) -> dict[int, int | None]:
    """Global rank -> exit status of the ranks this host started (None: started, no exit record)."""
    codes: dict[int, int | None] = {}
    for pidfile in (job_dir / "ranks").glob("rank-*.pid"):
        rank = int(pidfile.name[5:-4])
        exit_file = job_dir / "ranks" / f"rank-{rank}.exit"
        codes[rank] = int(exit_file.read_text()) if exit_file.exists() else None
    return codes


def classify_host(codes: dict[int, int | None], nprocs: int, stop_requested: bool) -> tuple[str, int, str]:
    """local_job.classify over this host's ranks; ranks that never started count as vanished."""
    ranks = sorted(codes)
    local = {i: codes[r] for i, r in enumerate(ranks)}
    state, code, reason = classify(local, nprocs, stop_requested)
    return state, code, re.sub(r"rank (\d+)", lambda m: f"rank {ranks[int(m[1])] if int(m[1]) < len(ranks) else m[1]}",
                               reason)


def relocated(env: dict[str, str], job: dict, job_dir: Path) -> dict[str, str]:
    """Variables that point at /foundry/secrets/... point at this job's copies (JOB_DIR/secrets/...)."""
    for mount in job.get("secret_paths", []):
        env = {k: v.replace(mount, str(job_dir / "secrets" / mount.lstrip("/"))) for k, v in env.items()}
    return env


def _finish(job_dir: Path, job: dict, record: dict) -> None:
    shutil.rmtree(job_dir / "secrets", ignore_errors=True)   # secret files live only while the job runs
    atomic_write(job_dir / "exit.json", json.dumps(record))
    if job.get("lease_file"):
        leases.release(Path(job["lease_file"]), job["job_id"])
    print(f"[launcher] {time.strftime('%H:%M:%S')} {job['host']}: job {record['state']}: {record['reason']}",
          flush=True)


def main(job_dir: Path) -> int:
    job = json.loads((job_dir / "job.json").read_text())
    (job_dir / "pid").write_text(f"{os.getpid()} {create_time(os.getpid())}")
    signal.signal(signal.SIGTERM, lambda *_: None)   # a stop signals the ranks by pid; this launcher stays
    signal.signal(signal.SIGINT, lambda *_: None)    # to write the exit record
    stop_flag = job_dir / "stop-requested"
    for line in job.get("notes", []):
        print(f"[launcher] {line}", flush=True)
    # not the ssh session's variables: with SSH_CLIENT set, every `bash -c` of the job sources ~/.bashrc
    # (bash's rshd/sshd rule), which may put another python first on PATH
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSH_")}
    env.update(relocated(json.loads((job_dir / "env.json").read_text()), job, job_dir))
    (job_dir / "env.json").unlink()   # it holds secret values: on the host only until the job has them
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    if job.get("gpus") is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in job["gpus"])
    for line in job.get("setup_commands", []):
        print(f"[setup] {line}", flush=True)
        rc = subprocess.call(["bash", "-c", line], stdin=subprocess.DEVNULL, env=env)
        if rc != 0:
            state = ("paused", PAUSED_EXIT_CODE, "stopped before the ranks started: nothing to restore") \
                if stop_flag.exists() else ("failed", rc, f"setup step failed ({rc}) on {job['host']}: {line}")
            _finish(job_dir, job, dict(zip(("state", "exit_code", "reason"), state), ranks={}))
            return 0
    print(f"[launcher] {time.strftime('%H:%M:%S')} {job['host']}: torchrun, node {job['node']} of "
          f"{job['nnodes']}, {job['nprocs']} process(es), rendezvous {job['rdzv_endpoint']}", flush=True)
    if stop_flag.exists():
        _finish(job_dir, job, {"state": "paused", "exit_code": PAUSED_EXIT_CODE, "ranks": {},
                               "reason": "stopped before the ranks started: nothing to restore"})
        return 0
    (job_dir / "torchrun-started").touch()   # from now on a stop reaches the ranks, not this launcher's group
    proc = subprocess.Popen(torchrun_argv(job, job_dir, sys.executable), stdin=subprocess.DEVNULL, env=env)
    torchrun_stopped = False
    while True:
        try:
            rc = proc.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if not stop_flag.exists() or torchrun_stopped:
                continue
            how = stop_flag.read_text().strip() or "graceful"
            if not any((job_dir / "ranks").glob("rank-*.pid")):
                # no rank started (torchrun may wait in the rendezvous for a host that has stopped): stop
                # torchrun itself; a rank starting right now gets the signal once, from its local_rank
                proc.send_signal(signal.SIGTERM if how == "graceful" else signal.SIGKILL)
                torchrun_stopped = True
            else:   # ranks that started after the stop get their one SIGTERM as they start
                signal_ranks(job_dir, how)
    codes = host_codes(job_dir)
    if stop_flag.exists() and not codes:
        record = {"state": "paused", "exit_code": PAUSED_EXIT_CODE,
                  "reason": "stopped before the ranks started: nothing to restore"}
    elif rc != 0 and not codes and not stop_flag.exists():
        record = {"state": "failed", "exit_code": rc,
                  "reason": f"torchrun on {job['host']} exited {rc} before starting the ranks"}
    else:
        state, code, reason = classify_host(codes, job["nprocs"], stop_flag.exists())
        record = {"state": state, "exit_code": code, "reason": f"{job['host']}: {reason}"}
    _finish(job_dir, job, {**record, "ranks": {str(k): v for k, v in codes.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
