"""Checkpoint save/restore throughput: Foundry's Trainer vs the floor, on SeaweedFS (issue 32).

    .venv/bin/python bench/trainer/ckpt_throughput.py                       # 0.1 and 1 GB, both layouts, 1 and 2 ranks
    .venv/bin/python bench/trainer/ckpt_throughput.py --sizes 0.1 --reps 3 --ranks 1
    .venv/bin/python bench/trainer/ckpt_throughput.py --sizes 4 --ranks 1   # 4 GB: ~3x the state in RAM per side

Starts SeaweedFS (`weed mini`, tests/support/storage_servers.py) on loopback. For each size (GB of
model + AdamW state: an MLP of 12 bytes per parameter), layout (full, sharded) and world size (1;
2: FSDP over gloo, under torchrun), runs both sides as fresh processes, interleaved and alternating
which goes first (floor, foundry, foundry, floor, ...):
- foundry: the Trainer's save, from the training thread's hand-off to `latest` published (the
  training thread idle meanwhile), and its restore, from fit() to fit_start (right before the first
  step), the slowest rank.
- floor: the same state with torch.save to a local file + boto3's transfer manager upload_file
  (--floor-part-mib parts, --floor-threads threads), then download_file + torch.load; under FSDP the
  full layout's rank 0 writes the gathered state, the sharded one every rank its own shards.
The table shows medians, throughput (each side's bytes / seconds: Foundry's state tensors, the floor's file) and
foundry/floor throughput ratios
(goal >= 0.8), and the peak RSS of the largest rank process of each side. Also prints the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WIDTHS = {0.1: (1024, 8), 1.0: (2048, 20), 4.0: (4096, 20)}  # 12 bytes/param: ~0.1, ~1.0, ~4.0 GB


def shape_for(gb: float) -> tuple[int, int]:
    if gb in WIDTHS:
        return WIDTHS[gb]
    width = 2048
    return width, max(1, round(gb * 1e9 / 12 / width**2))


def run_side(side, layout, ranks, width, depth, prefix, tmp: Path, env, wrap: tuple[str, ...] = ()) -> list[dict]:
    """One side as a fresh process (torchrun for 2+ ranks); `wrap` prefixes the command (e.g. a
    network-namespace exec). Returns every rank's result."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{side}-", dir=tmp))
    args = [str(HERE / "ckpt_side.py"), side, layout, str(width), str(depth), prefix, str(run_dir)]
    if ranks == 1:
        cmd = [sys.executable, *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", *args]
    env = {**env, "TMPDIR": str(run_dir)}  # torchrun's torchelastic_* log folders go with the run's
    proc = subprocess.run([*wrap, *cmd], cwd=HERE, env=env, capture_output=True, text=True, timeout=3600)
    shutil.rmtree(run_dir, ignore_errors=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"{side} {layout} x{ranks} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")


def summarize(results: list[list[dict]]) -> dict:
    """Per side: median over reps of the slowest rank's seconds; bytes summed over ranks; max RSS."""
    med = statistics.median
    return {"save_s": med(max(r["save_s"] for r in rep) for rep in results),
            "restore_s": med(max(r["restore_s"] for r in rep) for rep in results),
            "bytes": results[0] and sum(r["bytes"] for r in results[0]),
            "rss_mib": max(r["rss_mib"] for rep in results for r in rep),
            "stages": {k: med(max(r.get("stages", {}).get(k, 0.0) for r in rep) for rep in results)
                       for k in dict.fromkeys(k for rep in results for r in rep for k in r.get("stages", {}))},
            "save_each": [max(r["save_s"] for r in rep) for rep in results],
            "restore_each": [max(r["restore_s"] for r in rep) for rep in results]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="0.1,1", help="GB of model + optimizer state, comma-separated")
    p.add_argument("--layouts", default="full,sharded")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--floor-part-mib", type=int, default=16)
    p.add_argument("--floor-threads", type=int, default=16)
    p.add_argument("--foundry-part-mib", type=int, help="Trainer(checkpoint_transfer=...) part size (default: the store's, 8)")
    p.add_argument("--foundry-threads", type=int, default=8, help="... and threads, with --foundry-part-mib")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from support.storage_servers import start_seaweedfs, stop_seaweedfs

    tmp = Path(tempfile.mkdtemp(prefix="foundry-bench-ckpt-"))
    weed, server = start_seaweedfs(tmp / "weed")
    env = {**os.environ, **server.env(), "FLOOR_PART_MIB": str(a.floor_part_mib),
           "FLOOR_THREADS": str(a.floor_threads), "FOUNDRY_DISABLE_PLUGIN_AUTOLOAD": "1",
           **({"FOUNDRY_PART_MIB": str(a.foundry_part_mib), "FOUNDRY_THREADS": str(a.foundry_threads)}
              if a.foundry_part_mib else {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    bucket = server.create_bucket("ckpt-bench")
    loads = [os.getloadavg()[0]]
    rows = []
    try:
        for gb in (float(s) for s in a.sizes.split(",")):
            width, depth = shape_for(gb)
            for layout in a.layouts.split(","):
                for ranks in (int(r) for r in a.ranks.split(",")):
                    got: dict[str, list] = {"foundry": [], "floor": []}
                    for rep in range(a.reps):
                        order = ("floor", "foundry") if rep % 2 == 0 else ("foundry", "floor")
                        for side in order:
                            prefix = f"{bucket}/{gb}-{layout}-{ranks}/{side}{rep}"
                            got[side].append(run_side(side, layout, ranks, width, depth, prefix, tmp, env))
                            loads.append(os.getloadavg()[0])
                    f, b = summarize(got["foundry"]), summarize(got["floor"])
                    row = {"gb": gb, "layout": layout, "ranks": ranks, "foundry": f, "floor": b}
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        stop_seaweedfs(weed)
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps(rows))
        return
    print(f"\nSeaweedFS on loopback, {a.reps} interleaved reps, medians of the slowest rank; floor: torch.save + "
          f"boto3 upload_file / download_file + torch.load, {a.floor_part_mib} MiB parts, {a.floor_threads} threads; "
          f"foundry: {f'{a.foundry_part_mib} MiB parts, {a.foundry_threads} threads' if a.foundry_part_mib else 'the store defaults'}; "
          f"1-min load average {min(loads):.1f}-{max(loads):.1f} (median {statistics.median(loads):.1f}), "
          f"{os.cpu_count()} CPUs")
    print("\n".join(table(rows)))
    print("\nWhere Foundry's time goes (seconds, median of the slowest rank; a stage includes the ones indented "
          "under it in the code, e.g. upload includes verify):")
    print("\n".join(stage_table(rows)))


def stage_table(rows: list[dict]) -> list[str]:
    names = list(dict.fromkeys(k for r in rows for k in r["foundry"].get("stages", {})))
    out = ["| stage | " + " | ".join(f"{r['gb']:g} GB {r['layout']} x{r['ranks']}" for r in rows) + " |",
           "|---" * (len(rows) + 1) + "|"]
    out.append("| save, all (hand-off to latest) | " + " | ".join(f"{r['foundry']['save_s']:.2f}" for r in rows) + " |")
    out.append("| restore, all (fit to first step) | " + " | ".join(f"{r['foundry']['restore_s']:.2f}" for r in rows) + " |")
    for name in names:
        out.append(f"| {name} | " + " | ".join(f"{r['foundry']['stages'].get(name, 0.0):.2f}" for r in rows) + " |")
    return out


def table(rows: list[dict], extra: tuple[str, ...] = ()) -> list[str]:
    """Markdown rows, one per (state, layout, ranks[, each key in `extra`]): medians, MB/s, ratios, peak RSS."""
    head = "| state | layout | ranks | " + "".join(f"{k} | " for k in extra)
    out = [head + "save: foundry / floor | save MB/s foundry / floor | ratio | "
           "restore: foundry / floor | restore MB/s foundry / floor | ratio | peak RSS MiB foundry / floor |",
           "|---" * (9 + len(extra)) + "|---|"]
    for r in rows:
        f, b = r["foundry"], r["floor"]
        mb = f["bytes"] / 1e6
        out.append(f"| {mb / 1000:.2f} GB | {r['layout']} | {r['ranks']} | " + "".join(f"{r[k]} | " for k in extra)
                   + f"{f['save_s']:.2f} s / {b['save_s']:.2f} s | "
                   f"{mb / f['save_s']:.0f} / {b['bytes'] / 1e6 / b['save_s']:.0f} | "
                   f"{(mb / f['save_s']) / (b['bytes'] / 1e6 / b['save_s']):.2f} | "
                   f"{f['restore_s']:.2f} s / {b['restore_s']:.2f} s | {mb / f['restore_s']:.0f} / "
                   f"{b['bytes'] / 1e6 / b['restore_s']:.0f} | "
                   f"{(mb / f['restore_s']) / (b['bytes'] / 1e6 / b['restore_s']):.2f} | "
                   f"{f['rss_mib']:.0f} / {b['rss_mib']:.0f} |")
    return out


if __name__ == "__main__":
    main()
