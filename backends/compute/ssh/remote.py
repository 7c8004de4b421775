"""The provider's helper on each host, run over ssh with the job's python (it has foundry):

    python -m foundry.backends.compute.ssh.remote COMMAND [ARGS]     (JSON on stdin/stdout)

  prepare            stdin {job_dir, files: {name: [base64, mode]}, lease: {file, job_id, count, total}|null,
                     start: bool} -> {job_dir (absolute), gpus, port, [pid, create_time]}: the job folder
                     (0700), its files, the GPU lease (taken again by the same job: the same devices), a
                     TCP port free now (the c10d rendezvous), and with start the launcher (as `start`);
                     exit 3 when too few GPUs are free
  start JOB_DIR      host_job detached in its own session -> {pid, create_time}
  status JOB_DIR     {exit: the exit record | null, alive: launcher still running, ranks: started}
  signal JOB_DIR graceful|kill
                     graceful: stop-requested, then one SIGTERM to each training process through its
                     recorded pid + start time (never by name); ranks that start later get theirs from
                     the launcher; during the setup steps the launcher's group gets it. kill: SIGKILL to
                     each rank's process group (the launcher stays to write the exit record and give
                     the lease back)
  read PATH OFFSET   the file's bytes from OFFSET (at most 1 MiB), for logs
  release FILE JOB   give a lease back (a launch that failed before its launcher started)
Secrets arrive only on stdin (prepare), never on argv.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.process_identity import create_time, still_running

from . import leases

BUSY_EXIT = 3
READ_LIMIT = 1 << 20


def prepare(spec: dict) -> dict:
    job_dir = Path(spec["job_dir"]).expanduser().absolute()
    job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(job_dir, 0o700)
    gpus = None
    lease = spec.get("lease")
    if lease:
        gpus = leases.take(Path(lease["file"]).expanduser().absolute(), lease["job_id"], str(job_dir),
                           int(lease["count"]), int(lease["total"]))
    for name, (content, mode) in spec.get("files", {}).items():
        target = job_dir / name
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(target, base64.b64decode(content), mode=int(mode))
    out = {"job_dir": str(job_dir), "gpus": gpus, "port": free_port()}
    if spec.get("start"):   # job.json written: start its launcher in the same call (one ssh round trip less)
        out.update(start(job_dir))
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def start(job_dir: Path) -> dict:
    job = json.loads((job_dir / "job.json").read_text())
    cwd = job.get("workdir") or str(job_dir)
    if not os.path.isdir(cwd):
        cwd = str(job_dir)
    with open(job_dir / "job.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-u", "-m", "foundry.backends.compute.ssh.host_job", str(job_dir)],
                                cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    return {"pid": proc.pid, "create_time": create_time(proc.pid)}


def _recorded(path: Path) -> tuple[int, float | None] | None:
    try:
        pid, created = path.read_text().split()
        return int(pid), None if created == "None" else float(created)
    except (OSError, ValueError):
        return None


def status(job_dir: Path) -> dict:
    exit_file = job_dir / "exit.json"
    launcher = _recorded(job_dir / "pid")
    alive = bool(launcher) and still_running(launcher[0], launcher[1])
    record = json.loads(exit_file.read_text()) if exit_file.exists() else None
    return {"exit": record, "alive": alive, "ranks": len(list((job_dir / "ranks").glob("rank-*.pid"))),
            "stop": (job_dir / "stop-requested").exists()}


def signal_ranks(job_dir: Path, how: str) -> list[int]:
    """graceful: one SIGTERM to each rank's training process, exactly once whoever calls (this helper
    at stop, or the launcher for ranks that start after it): a `rank-N.stopped` mark is created
    exclusively before the signal (a second SIGTERM makes the trainer exit without its checkpoint).
    kill: SIGKILL to each rank's process group (local_rank starts each command as a group leader)."""
    signalled = []
    for pidfile in sorted((job_dir / "ranks").glob("rank-*.pid")):
        rec = _recorded(pidfile)
        if not rec or rec[1] is None or not still_running(*rec):
            continue
        try:
            if how == "graceful":
                try:
                    os.close(os.open(pidfile.with_suffix(".stopped"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                except FileExistsError:
                    continue   # already sent
                os.kill(rec[0], signal.SIGTERM)
            else:
                os.killpg(rec[0], signal.SIGKILL)
            signalled.append(rec[0])
        except (ProcessLookupError, PermissionError):
            pass
    return signalled


def send(job_dir: Path, how: str) -> dict:
    if (job_dir / "exit.json").exists():
        return {"signalled": []}
    (job_dir / "stop-requested").write_text(how)
    signalled = signal_ranks(job_dir, how)
    launcher = _recorded(job_dir / "pid")
    in_setup = not (job_dir / "torchrun-started").exists()
    if not signalled and in_setup and launcher and still_running(*launcher):
        try:   # the setup steps run: the launcher's group (it stays, and reports paused before the start);
            # once torchrun runs, the launcher itself signals each rank as it starts (signal_ranks)
            os.killpg(launcher[0], signal.SIGTERM if how == "graceful" else signal.SIGKILL)
            signalled.append(launcher[0])
        except (ProcessLookupError, PermissionError):
            pass
    return {"signalled": signalled}


def read(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(READ_LIMIT)
    except FileNotFoundError:
        return b""


def main(argv: list[str]) -> int:
    cmd, args = argv[0], argv[1:]
    if cmd == "prepare":
        try:
            out = prepare(json.loads(sys.stdin.read()))
        except leases.LeaseBusy as exc:
            print(str(exc), file=sys.stderr)
            return BUSY_EXIT
    elif cmd == "start":
        out = start(Path(args[0]))
    elif cmd == "status":
        out = status(Path(args[0]))
    elif cmd == "signal":
        out = send(Path(args[0]), args[1])
    elif cmd == "read":
        sys.stdout.buffer.write(read(Path(args[0]), int(args[1])))
        return 0
    elif cmd == "release":
        leases.release(Path(args[0]).expanduser().absolute(), args[1])
        out = {}
    else:
        print(f"unknown command {cmd}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
