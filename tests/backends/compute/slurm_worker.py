"""A tiny distributed job for the Slurm tests (run by torchrun, gloo on CPU).

    slurm_worker.py allreduce     all-reduce of rank+1 over the world; prints it, the job's env, the secret
    slurm_worker.py pause         waits; on SIGTERM counts signals for a moment, then exits 75 (paused)
    slurm_worker.py sleep         waits; SIGTERM kills it (default action)
    slurm_worker.py fail N        rank 0 exits with N, the others exit 0
"""

import os
import signal
import sys
import time

import torch
import torch.distributed as dist

terms = 0


def on_term(signum, frame):
    global terms
    terms += 1


def main() -> int:
    mode = sys.argv[1]
    if mode == "pause":
        signal.signal(signal.SIGTERM, on_term)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"ready rank={rank} world={world}", flush=True)
    if mode == "allreduce":
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        secret = os.environ.get("TEST_SECRET_FILE", "")
        mode_bits = oct(os.stat(secret).st_mode & 0o777) if secret else "-"
        content = open(secret).read() if secret else ""
        print(f"allreduce={t.item():g} run={os.environ['RUN_NAME']} id={os.environ['RUN_ID']} "
              f"resumption={os.environ['RESUMPTION_INDEX']} plain={os.environ.get('PLAIN')} "
              f"secret_mode={mode_bits} secret_ok={content == 'top-secret'}", flush=True)
        dist.barrier()
        return 0
    if mode == "fail":
        dist.barrier()
        return int(sys.argv[2]) if rank == 0 else 0
    deadline = time.time() + 120
    while time.time() < deadline:
        if terms and mode == "pause":
            time.sleep(1.5)          # "checkpointing": a second SIGTERM would show up here
            print(f"paused rank={rank} sigterms={terms}", flush=True)
            return 75
        time.sleep(0.1)
    return 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)   # no process-group teardown: a paused peer may already be gone
