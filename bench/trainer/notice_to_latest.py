"""Notice to published `latest`: how long a preemption notice (SIGTERM) takes to become a published
checkpoint on S3 (SeaweedFS on loopback), per state size (issue 31.4).

    .venv/bin/python bench/trainer/notice_to_latest.py                  # 0.1 and 1 GB, 3 reps each
    .venv/bin/python bench/trainer/notice_to_latest.py --sizes 4 --reps 1   # ~3x the state in RAM

Each rep is a fresh trainer process (one rank, CPU) on an MLP of model + AdamW state of the given
size (12 bytes per parameter), saving only on a stop. After its 2nd step it prints READY; this
driver sends SIGTERM and times:
- notice_s: the trainer's own record (`paused` event) from its signal handler to the checkpoint
  published (`latest` written) - the step in progress, the all-reduce agreement, copy, upload;
- wall_s: from the driver's kill to the process's exit (75, paused) - what the kill deadline races;
- step_s: a step's time (the wait for the step in progress is part of notice_s).
Prints a markdown table of medians; --json for the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHAPES = {0.1: (1024, 8), 1.0: (2048, 20), 4.0: (4096, 20)}  # 12 bytes/param: ~0.1, ~1.0, ~4.0 GB

CHILD = """
import os, sys, time, torch
sys.path.insert(0, sys.argv[1])
from bench_models import data, mlp
from foundry.trainer import Trainer

width, depth, url, run_dir = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

class Ready:
    def batch_end(self, t):
        if t.timestamp.batch == 2:
            print("READY", os.getpid(), flush=True)  # the trainer's own pid: a wrapper (mn_exec) may sit above it

t = Trainer(run_name="notice-bench", model=mlp(width, depth), train_dataloader=data(width, 10**4, 8),
            max_duration="10000ba", loss_fn=torch.nn.functional.mse_loss, save_folder=url,
            save_interval="100000ba", device="cpu", run_dir=run_dir, progress_bar=False,
            console_log_interval=10**9, callbacks=[Ready()], autoresume=False, save_overwrite=True)
t.fit()
"""


def shape_for(gb: float) -> tuple[int, int]:
    if gb in SHAPES:
        return SHAPES[gb]
    return 2048, max(1, round(gb * 1e9 / 12 / 2048**2))


def one(gb: float, url: str, tmp: Path, env: dict, wrap: Sequence[str] = ()) -> dict:
    """One rep: a fresh trainer (run under the `wrap` command prefix if given, e.g. mn_exec on a node),
    SIGTERM to the pid it reports after its 2nd step, its `paused` record + the wall time to exit."""
    width, depth = shape_for(gb)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=tmp))
    proc = subprocess.Popen([*wrap, sys.executable, "-c", CHILD, str(HERE), str(width), str(depth), url, str(run_dir)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        line = proc.stdout.readline().split()
        if line[:1] != ["READY"]:
            raise SystemExit(f"no READY ({line!r}): {proc.stderr.read()[-3000:]}")
        pid = int(line[1])
        sent = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        code = proc.wait(timeout=1800)
        wall = time.monotonic() - sent
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.kill()
            proc.wait()
    if code != 75:
        raise SystemExit(f"exit {code}, not 75 (paused): {err[-3000:]}")
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    shutil.rmtree(run_dir, ignore_errors=True)
    [paused] = [r for r in rows if r.get("event") == "paused"]
    steps = [1.0 / r["throughput"] for r in rows if "throughput" in r]
    params = sum(w * w + w for _ in range(depth) for w in [width]) + width + 1
    return {"gb": gb, "state_bytes": params * 12, "notice_s": paused["notice_s"], "wall_s": round(wall, 3),
            "step_s": statistics.median(steps) if steps else None, "checkpoint": paused["checkpoint"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="0.1,1", help="GB of model + optimizer state, comma-separated")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from support.storage_servers import start_seaweedfs, stop_seaweedfs

    tmp = Path(tempfile.mkdtemp(prefix="foundry-bench-notice-"))
    weed, server = start_seaweedfs(tmp / "weed")
    env = {**os.environ, **server.env(), "FOUNDRY_DISABLE_PLUGIN_AUTOLOAD": "1", "OMP_NUM_THREADS": "1"}
    env.pop("FOUNDRY_METRICS_FILE", None)
    bucket = server.create_bucket("notice-bench")
    loads = [os.getloadavg()[0]]
    rows = []
    try:
        for gb in (float(s) for s in a.sizes.split(",")):
            for rep in range(a.reps):
                row = one(gb, f"s3://{bucket}/{gb}/{rep}", tmp, env)
                loads.append(os.getloadavg()[0])
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        stop_seaweedfs(weed)
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps(rows))
        return
    med = statistics.median
    print(f"\nSeaweedFS on loopback, 1 rank on CPU, {a.reps} reps, medians; 1-min load average "
          f"{min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} CPUs")
    print("| state | step | notice -> latest published (trainer) | SIGTERM -> exit 75 (driver) |")
    print("|---|---|---|---|")
    for gb in dict.fromkeys(r["gb"] for r in rows):
        mine = [r for r in rows if r["gb"] == gb]
        print(f"| {mine[0]['state_bytes'] / 1e9:.2f} GB | {med(r['step_s'] for r in mine):.2f} s | "
              f"{med(r['notice_s'] for r in mine):.2f} s | {med(r['wall_s'] for r in mine):.2f} s |")


if __name__ == "__main__":
    main()
