"""The main job on the embedded default, as a run: prepare a real text corpus (the Python standard
library's sources, byte-level tokens) as MDS shards in file:// storage under FOUNDRY_HOME, then
register a run on the local cluster (examples/gpt/job.py under torchrun) that streams it into the tiny
GPT for a couple of minutes with checkpoints going to file:// storage. The run's log is followed
here; afterwards `foundry get runs`, `foundry describe run main-job` and `foundry-tui` show it with
its loss curve.

    python examples/main_job.py [--minutes 2] [--max-duration 2000ba] [--resume]

A second start replaces the run (and its checkpoints); --resume continues it as a new resumption.
Ctrl-C pauses the run gracefully (checkpoint, then "paused"); --resume continues it.
FOUNDRY_HOME defaults to the platform's user data directory (platformdirs). Outputs:
  FOUNDRY_HOME/storage/datasets/pystdlib-bytes/{train,val}   the dataset (written once)
  FOUNDRY_HOME/storage/checkpoints/main-job/                 checkpoints (`foundry checkpoint ls ...`)
  FOUNDRY_HOME/runs/main-job/metrics.jsonl                   step, loss, lr, throughput, ...
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from examples.gpt.prep import prepare  # noqa: E402
from foundry.app.control import RESUMABLE_STATUSES, ControlPlane  # noqa: E402
from foundry.plugins.errors import FoundryError  # noqa: E402
from foundry.plugins.manager import open_store  # noqa: E402

RUN = "main-job"


def prepare_data(storage: Path) -> str:
    data_url = f"file://{storage / 'datasets' / 'pystdlib-bytes'}"
    if open_store(data_url).exists("train/index.json"):
        print(f"dataset ready at {data_url}", flush=True)
        return data_url
    t0 = time.time()
    counts = prepare(data_url, max_mb=2.0)
    print(f"prepared {counts['train']} training sequences from the Python stdlib sources "
          f"into {data_url} ({time.time() - t0:.1f}s)", flush=True)
    return data_url


def start_run(cp: ControlPlane, spec: dict, resume: bool):
    existing = {r.name: r for r in cp.list_runs()}.get(RUN)
    if existing is not None and resume and existing.status in RESUMABLE_STATUSES:
        print(f"resuming run {RUN} (status {existing.status}) as a new resumption", flush=True)
        return cp.resume_run(RUN)
    if existing is not None and resume:  # completed (its time budget ran out): a new run continues it
        print(f"run {RUN} is {existing.status}: starting it again; it resumes from its checkpoints", flush=True)
        cp.delete_run(RUN, checkpoints="keep")
    elif existing is not None:
        print(f"replacing the earlier run {RUN} and its checkpoints (--resume continues it instead)", flush=True)
        cp.delete_run(RUN, checkpoints="delete")
    return cp.create_run(spec)


def summary(cp: ControlPlane) -> tuple[str, bool]:
    rows = cp.metrics(RUN)
    losses = [r["loss"] for r in rows if "loss" in r]
    evals = [r["eval/loss"] for r in rows if "eval/loss" in r]
    if len(losses) < 2:
        return "no training steps were recorded", False
    k = min(10, len(losses) // 2)
    head, tail = sum(losses[:k]) / k, sum(losses[-k:]) / k
    text = (f"trained {rows[-1].get('step', len(losses))} steps: loss {head:.3f} (first {k} steps) -> "
            f"{tail:.3f} (last {k} steps)" + (f"; eval loss {evals[0]:.3f} -> {evals[-1]:.3f}" if len(evals) > 1 else ""))
    return text, tail < head


def main() -> int:
    try:
        return demo()
    except FoundryError as exc:
        print(f"error: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""), file=sys.stderr)
        return 2


def demo() -> int:
    p = argparse.ArgumentParser(description="Train the tiny GPT as a run on the embedded default.")
    p.add_argument("--minutes", type=float, default=2.0, help="wall-clock training budget")
    p.add_argument("--max-duration", default="2000ba", help="training length (the LR schedule's length)")
    p.add_argument("--resume", action="store_true", help="continue the previous demo run instead of replacing it")
    a = p.parse_args()
    cp = ControlPlane()
    storage = cp.paths.home / "storage"
    data_url = prepare_data(storage)
    spec = {
        "name": RUN,
        "command": [sys.executable, str(REPO / "examples" / "gpt" / "job.py")],
        "compute": {"cluster": "local", "gpus": 1},
        "env_variables": {"DATA_URL": data_url, "SAVE_URL": f"file://{storage / 'checkpoints'}/{{run_name}}",
                          "MINUTES": f"{a.minutes:g}", "MAX_DURATION": a.max_duration},
    }
    run = start_run(cp, spec, a.resume)
    print(f"run {RUN} launched on the local cluster (resumption {run.latest.index}); following its log "
          f"(Ctrl-C pauses it)", flush=True)
    try:
        for line in cp.follow_run(RUN):
            print(line, flush=True)
        run = cp.wait(RUN)
    except KeyboardInterrupt:
        print(f"\npausing run {RUN} (checkpoint, then exit) ...", flush=True)
        cp.stop_run(RUN)
        run = cp.wait(RUN, timeout=300)
        print(f"run {RUN} is {run.status}; `python examples/main_job.py --resume` continues it")
        return 130
    text, went_down = summary(cp)
    print(f"\nrun {RUN} {run.status}; {text}")
    bin_dir = Path(sys.executable).parent
    activate = "" if shutil.which("foundry") == str(bin_dir / "foundry") else \
        f" (after `source {bin_dir / 'activate'}`)"
    print(f"look at it with{activate}:")
    print("  foundry get runs")
    print(f"  foundry describe run {RUN}")
    print("  foundry-tui")
    return 0 if run.status == "completed" and went_down else 1


if __name__ == "__main__":
    sys.exit(main())
