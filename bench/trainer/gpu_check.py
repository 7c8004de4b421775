"""Issue 12's figures on a GPU machine, in one command (from the repository root):

    python bench/trainer/gpu_check.py                 # a GPU: ~86M-parameter GPT, 1.6 GB checkpoint state
    python bench/trainer/gpu_check.py --tiny --device cpu    # a smoke test of this script on CPU

Prints, as one table each:
1. the defaults: device, what precision "auto" chose (bf16 autocast / TF32), the start log line;
2. the GPT example (tied embedding/head) step time, tokens/s and MFU: strict fp32 vs the "auto"
   default, plain single process vs FSDP (world size 1, no torchrun);
3. the checkpoint stall as a ratio to a plain copy into pinned host memory, full and sharded
   layouts, first save and later saves (bench_stall.py) -- the goal is <= 1.5x;
4. with more than one GPU: the same GPT under torchrun with FSDP on every GPU (tokens/s, MFU).
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
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402


def gpt_config(tiny: bool):
    from examples.gpt.model import GPTConfig

    if tiny:
        return GPTConfig(block_size=32, n_layer=2, n_head=2, n_embd=64), 8
    return GPTConfig(block_size=512, n_layer=12, n_head=12, n_embd=768), 32  # ~86M params


def gpt_run(data: str, tmp: Path, name: str, device: str, precision: str, parallelism: str, tiny: bool,
            steps: int, warmup: int, ranks: int = 1) -> dict:
    """Train the GPT example for `steps`; medians of tokens/s and MFU after `warmup` steps."""
    from examples.gpt.train import build_trainer

    cfg, per_rank = gpt_config(tiny)
    batch = per_rank * ranks
    run_dir = tmp / f"run-{name}"
    trainer = build_trainer(data, None, run_name=f"gpu-check-{name}", max_duration=f"{steps}ba",
                            global_batch=batch, eval_interval=f"{steps * 10}ba", run_dir=str(run_dir),
                            cache_dir=str(tmp / "cache"), model_cfg=cfg, device=device, precision=precision,
                            parallelism=parallelism, progress_bar=False, console_log_interval=10**9)
    tied = trainer.raw_model.head.weight is trainer.raw_model.wte.weight
    trainer.fit()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "loss" in r and r["step"] > warmup]
    med = statistics.median
    return {"name": name, "precision": trainer.cfg.precision, "parallelism": trainer.parallelism,
            "params_m": trainer.resolved_config["model"]["parameters"] / 1e6,
            "step_ms": med(1e3 / r["throughput"] for r in rows), "tokens_per_sec": med(r["tokens_per_sec"] for r in rows),
            "mfu": med(r["mfu"] for r in rows) if all("mfu" in r for r in rows) else None,
            "loss": rows[-1]["loss"], "tied": tied and trainer.raw_model.head.weight is trainer.raw_model.wte.weight}


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n{title}\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="small sizes: check the script itself (e.g. on CPU)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--cpu-ranks", type=int, default=0, help="with --device cpu: check the torchrun part on N CPU ranks")
    a = p.parse_args()
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device here: run on a GPU machine, or pass --tiny --device cpu", file=sys.stderr)
        return 2
    steps = a.steps or (6 if a.tiny else 40)
    warmup = 2 if a.tiny else 10
    tmp = Path(tempfile.mkdtemp(prefix="foundry-gpu-check-"))
    try:
        from examples.gpt.prep import prepare
        from foundry.trainer.precision import check_precision, describe_precision

        device = torch.device(a.device)
        chosen = check_precision("auto", device)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        print(f"torch {torch.__version__}, device {device} ({name}); precision 'auto' -> "
              f"{describe_precision('auto', chosen, device)}")
        data = f"file://{tmp}/data"
        prepare(data, max_mb=0.2 if a.tiny else 8.0, block_size=gpt_config(a.tiny)[0].block_size)

        runs = [gpt_run(data, tmp, "fp32-strict", a.device, "fp32", "none", a.tiny, steps, warmup),
                gpt_run(data, tmp, "auto", a.device, "auto", "none", a.tiny, steps, warmup),
                gpt_run(data, tmp, "auto-fsdp", a.device, "auto", "fsdp", a.tiny, steps, warmup)]
        base = runs[0]["step_ms"]
        print_table(f"GPT example ({runs[0]['params_m']:.1f}M params, tied head), medians after {warmup} steps",
                    ["run", "precision", "parallelism", "step", "speed-up vs fp32", "tokens/s", "MFU", "tied"],
                    [[r["name"], r["precision"], r["parallelism"], f"{r['step_ms']:.1f} ms", f"{base / r['step_ms']:.2f}x",
                      f"{r['tokens_per_sec']:,.0f}", "n/a" if r["mfu"] is None else f"{r['mfu']:.1%}", r["tied"]]
                     for r in runs])

        width, depth = (512, 2) if a.tiny else (4096, 8)  # 134M params + AdamW: ~1.6 GB of state
        stall = subprocess.run([sys.executable, str(HERE / "bench_stall.py"), "--width", str(width), "--depth",
                                str(depth), "--saves", "4", "--device", a.device, "--json"],
                               capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", "")))
        if stall.returncode != 0:
            print(stall.stderr[-3000:], file=sys.stderr)
            return 1
        rows = json.loads(stall.stdout.strip().splitlines()[-1])
        print_table(f"checkpoint stall vs a plain copy into pinned host memory (~{rows[0]['state_mb']:.0f} MB state)",
                    ["layout", "plain copy", "first save", "ratio", "later saves", "ratio", "goal <= 1.5x"],
                    [[r["layout"], f"{r['copy_s'] * 1e3:.1f} ms", f"{r['first_s'] * 1e3:.1f} ms", f"{r['first_ratio']:.2f}x",
                      f"{r['steady_s'] * 1e3:.1f} ms", f"{r['steady_ratio']:.2f}x",
                      "met" if max(r["first_ratio"], r["steady_ratio"]) <= 1.5 else "NOT met"] for r in rows])

        gpus = torch.cuda.device_count() if device.type == "cuda" else a.cpu_ranks
        if gpus > 1:
            out = tmp / "multi.json"
            code = (f"import json, sys\nsys.path[:0] = [{str(HERE)!r}, {str(ROOT)!r}]\n"
                    "from pathlib import Path\nimport torch.distributed as d\nfrom gpu_check import gpt_run\n"
                    f"r = gpt_run({data!r}, Path({str(tmp)!r}), 'fsdp-{gpus}gpu', {a.device!r}, 'auto', 'fsdp', {a.tiny}, "
                    f"{steps}, {warmup}, ranks={gpus})\n"
                    f"if d.get_rank() == 0:\n    Path({str(out)!r}).write_text(json.dumps(r))\n")
            script = tmp / "multi.py"
            script.write_text(code)
            proc = subprocess.run([str(Path(sys.executable).parent / "torchrun"), f"--nproc_per_node={gpus}",
                                   "--standalone", str(script)], capture_output=True, text=True)
            if proc.returncode != 0 or not out.exists():
                print(proc.stdout[-2000:] + proc.stderr[-6000:], file=sys.stderr)
                return 1
            r = json.loads(out.read_text())
            print_table(f"FSDP on {gpus} {device.type} ranks (torchrun)", ["tokens/s", "MFU", "tied"],
                        [[f"{r['tokens_per_sec']:,.0f}", "n/a" if r["mfu"] is None else f"{r['mfu']:.1%}", r["tied"]]])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
