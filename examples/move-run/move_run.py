"""The proof: start the tiny GPT on cluster A, pause it, resume it on cluster B with another device
count (same global batch), let it finish, and compare with an uninterrupted run.

    python examples/move-run/move_run.py --data-url s3://bucket/data --save-url 's3://bucket/ckpt/{run_name}' \\
        --cluster-a local --gpus-a 2 --cluster-b hpc --gpus-b 1 --secret r2 --out /tmp/move-run

Everything goes through the `foundry` CLI (run, stop, resume, describe) the way a user would type it.
Prints a step-by-step comparison table and the time from `foundry resume` to the first training step
(and how it splits), and writes OUT/loss.png and OUT/result.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from plot import PlotExtraMissing, line_plot, require_matplotlib  # noqa: E402


def foundry(*args: str, check: bool = True) -> str:
    exe = Path(sys.executable).parent / "foundry"
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"foundry {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def spec(name: str, cluster: str, gpus: int, opts) -> dict:
    return {"name": name, "command": [str(HERE / "train.py")],
            "compute": {"cluster": cluster, "gpus": gpus},
            "env_variables": {"DATA_URL": opts.data_url, "SAVE_URL": opts.save_url, "STEPS": str(opts.steps),
                              "GLOBAL_BATCH": str(opts.global_batch),
                              "STEP_DELAY": str(opts.step_delay if name.endswith("moved") else 0)},
            "secrets": [opts.secret] if opts.secret else []}


def wait(cp, name: str, until, timeout: float = 600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = cp.get_run(name)
        if until(run):
            return run
        if run.status not in ("pending", "running", "stopping"):
            raise SystemExit(f"run {name} ended {run.status}: {run.latest.exit_reason}\n"
                             + "\n".join(list(cp.logs(name))[-30:]))
        time.sleep(0.3)
    raise SystemExit(f"run {name}: timed out")


def steps_of(run_dir: Path, resumption: int) -> dict[int, dict]:
    """step -> {"ids": global batch ids in global order, "loss"} for one resumption. The ranks of
    one node read positions r, r + R, r + 2R, ... of each global batch (mosaic's layout)."""
    per_step: dict[int, dict] = {}
    for path in sorted(run_dir.glob(f"samples-r{resumption}-rank*.jsonl"), key=lambda p: int(p.stem.split("rank")[1])):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            entry = per_step.setdefault(row["step"], {"ranks": [], "loss": row["loss"]})
            entry["ranks"].append(row["ids"])
    for entry in per_step.values():
        ranks = entry.pop("ranks")
        entry["ids"] = [r[j] for j in range(len(ranks[0])) for r in ranks] if len({len(r) for r in ranks}) == 1 \
            else [i for r in ranks for i in r]  # uneven last batches: only the set compares
    return per_step


def losses(run_dir: Path) -> dict[int, float]:
    out = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "loss" in row and "step" in row:
            out[row["step"]] = row["loss"]
    return out


def timeline(run_dir: Path, resumption: int, t_cmd: float, t_returned: float, started_at: float) -> dict:
    t = json.loads((run_dir / f"timeline-r{resumption}-rank0.json").read_text())
    phases = {
        "cli + control plane + submit": t_returned - t_cmd,
        "scheduling + launcher (to process start)": t["process_start"] - t_returned,
        "process start (python + torch import)": t["imports_done"] - t["process_start"],
        "init (process group, model)": t["checkpoint_start"] - t["imports_done"],
        "checkpoint download + restore": t["checkpoint_done"] - t["checkpoint_start"],
        "data resume (to first batch)": t["first_batch"] - t["checkpoint_done"],
        "first step": t["first_step"] - t["first_batch"],
    }
    return {"total": t["first_step"] - t_cmd, "phases": phases, "resumed_from": t.get("resumed_from"),
            "registry_recorded_after": started_at - t_cmd}


def prove(opts) -> dict:
    from foundry.app.control import ControlPlane

    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    cp = ControlPlane()
    if opts.write_data:
        from data import write_dataset

        write_dataset(opts.data_url)
    ref, moved = f"{opts.prefix}-ref", f"{opts.prefix}-moved"
    for name, cluster, gpus in ((ref, opts.cluster_a, opts.gpus_a), (moved, opts.cluster_a, opts.gpus_a)):
        path = out / f"{name}.yaml"
        path.write_text(json.dumps(spec(name, cluster, gpus, opts), indent=2))
        foundry("run", "-f", str(path))
    wait(cp, moved, lambda r: any(m.get("step", 0) >= opts.pause_at for m in cp.metrics(moved)))
    foundry("stop", moved)
    run = wait(cp, moved, lambda r: r.status == "paused")
    t_cmd = time.time()
    foundry("resume", moved, "--cluster", opts.cluster_b, "--gpus", str(opts.gpus_b))
    t_returned = time.time()
    run = wait(cp, moved, lambda r: r.status == "completed")
    wait(cp, ref, lambda r: r.status == "completed")
    described = foundry("describe", "run", moved)

    ref_dir, moved_dir = cp.paths.run_dir(ref), cp.paths.run_dir(moved)
    ref_steps = steps_of(ref_dir, 0)
    moved_steps: dict[int, dict] = {}
    owner: dict[int, int] = {}
    for res in run.resumptions:
        for step, entry in steps_of(moved_dir, res.index).items():
            moved_steps[step] = entry
            owner[step] = res.index
    ref_loss, moved_loss = losses(ref_dir), losses(moved_dir)
    rows, same_batches, same_order, max_diff = [], True, True, 0.0
    for step in sorted(ref_steps):
        a, b = ref_steps[step], moved_steps.get(step, {"ids": []})
        same = sorted(a["ids"]) == sorted(b["ids"])
        same_batches &= same
        same_order &= a["ids"] == b["ids"]
        diff = abs(ref_loss[step] - moved_loss.get(step, float("nan")))
        max_diff = max(max_diff, diff) if diff == diff else float("inf")
        res = run.resumptions[owner[step]] if step in owner else None
        rows.append({"step": step, "ran_on": f"{res.cluster} x{res.devices}" if res else "-",
                     "ref_loss": ref_loss[step], "moved_loss": moved_loss.get(step), "abs_diff": diff,
                     "same_batch": same})
    seen = [i for s in sorted(moved_steps) for i in moved_steps[s]["ids"]]
    expected = [i for s in sorted(ref_steps) for i in ref_steps[s]["ids"]]
    paused_at = max(s for s, r in owner.items() if r == 0)
    result = {
        "rows": rows, "paused_at": paused_at, "steps": len(rows),
        "same_batches": same_batches, "same_order": same_order, "max_loss_diff": max_diff,
        "duplicates": len(seen) - len(set(seen)), "skipped": len(set(expected) - set(seen)),
        "resumptions": [r.to_dict() for r in run.resumptions],
        "resume_to_first_step": timeline(moved_dir, run.latest.index, t_cmd, t_returned, run.latest.started_at),
        "describe": described,
    }
    line_plot(str(out / "loss.png"), {"uninterrupted": [(r["step"], r["ref_loss"]) for r in rows],
                                      "paused + moved": [(r["step"], r["moved_loss"]) for r in rows if r["moved_loss"] is not None]},
              title=f"tiny GPT loss: {opts.cluster_a} x{opts.gpus_a} -> {opts.cluster_b} x{opts.gpus_b}",
              vlines={f"moved after step {paused_at}": paused_at + 0.5})
    (out / "result.json").write_text(json.dumps(result, indent=2, default=str))
    return result


def report(result: dict) -> str:
    lines = [f"{'step':>4}  {'ran on':<14} {'uninterrupted':>13} {'moved':>10} {'|diff|':>9}  same batch"]
    for r in result["rows"]:
        moved = f"{r['moved_loss']:.6f}" if r["moved_loss"] is not None else "-"
        lines.append(f"{r['step']:>4}  {r['ran_on']:<14} {r['ref_loss']:>13.6f} {moved:>10} {r['abs_diff']:>9.2e}  "
                     f"{'yes' if r['same_batch'] else 'NO'}")
    lines.append(f"paused after step {result['paused_at']}; same batches: {result['same_batches']} "
                 f"(same order: {result['same_order']}); max |loss diff| {result['max_loss_diff']:.2e}; "
                 f"duplicates {result['duplicates']}, skipped {result['skipped']}")
    t = result["resume_to_first_step"]
    lines.append(f"`foundry resume` -> first training step: {t['total']:.2f} s (resumed from {t['resumed_from']})")
    lines += [f"  {name:<42} {secs:7.2f} s" for name, secs in t["phases"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-url", required=True)
    p.add_argument("--save-url", required=True, help="checkpoint folder, with {run_name}")
    p.add_argument("--write-data", action="store_true", help="write the dataset to --data-url first")
    p.add_argument("--cluster-a", default="local")
    p.add_argument("--gpus-a", type=int, default=2)
    p.add_argument("--cluster-b", default="local")
    p.add_argument("--gpus-b", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--pause-at", type=int, default=10)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--step-delay", type=float, default=0.3, help="seconds per step of the moved run (pacing)")
    p.add_argument("--secret", default=None, help="an s3 secret for the bucket (foundry create secret s3)")
    p.add_argument("--prefix", default="tiny-gpt")
    p.add_argument("--out", default="move-run-out")
    opts = p.parse_args(argv)
    try:
        require_matplotlib()  # before the minutes of the proof, not after them
    except PlotExtraMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = prove(opts)
    print(report(result))
    print(result["describe"])
    ok = result["same_batches"] and result["max_loss_diff"] < 1e-4 and not result["duplicates"] and not result["skipped"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
