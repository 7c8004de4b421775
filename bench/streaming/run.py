"""Streaming benchmark: Foundry vs mosaicml-streaming 0.13 vs litdata, in one run.

    python bench/streaming/run.py [--samples 100000] [--reps 3] [--workloads tokens,tokens-zstd,images]
        [--sides foundry,mosaic,litdata] [--modes plain,loader,loader256] [--no-cold]
        [--out bench/results/streaming.json]

Each side runs as a subprocess in its own venv (peers: .venv-peers/, see tests/support/peers.py for
mosaicml-streaming and README in this folder for litdata). Repetitions are interleaved across
sides; shard files are read once (page cache warm) right before every timed epoch, and shards a
previous epoch decompressed are deleted, so every epoch of a compressed workload decompresses;
medians are reported, with Foundry's ratio to each peer. The cold epoch reads from SeaweedFS on
loopback, or with `--wan-rtt-ms 40` from SeaweedFS across an emulated 40 ms RTT link (wan.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PEERS = REPO / ".venv-peers"
# modes that give every side the same user collate_fn (transform*: Foundry's batch_transform instead)
COLLATE_MODES = ("collate", "collate256", "transform", "transform256")


def litdata_python() -> Path:
    for root in (os.environ.get("FOUNDRY_PEERS_DIR"), PEERS):
        if root and (Path(root) / "litdata" / "bin" / "python").exists():
            return Path(root) / "litdata" / "bin" / "python"
    raise SystemExit("no litdata venv: see bench/streaming/README.md")


def mosaic_python() -> Path:
    sys.path.insert(0, str(REPO / "tests"))
    from support.peers import mosaic_python as build

    return build()


def side_cmd(side: str) -> list[str]:
    if side == "foundry":
        return [sys.executable, str(HERE / "side_foundry.py")]
    if side == "mosaic":
        return [str(mosaic_python()), "-I", str(HERE / "side_mosaic.py"), str(HERE)]
    return [str(litdata_python()), "-I", str(HERE / "side_litdata.py"), str(HERE)]


def run(side: str, *args: str, env: dict | None = None, timeout: int = 600) -> dict:
    """One measurement in a fresh subprocess; a failure or timeout is reported and gives {}."""
    try:
        return _run(side, *args, env=env, timeout=timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"!! {side} {' '.join(args)}: {str(exc)[-1500:]}", flush=True)
        return {}


def _run(side: str, *args: str, env: dict | None = None, timeout: int = 600) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-") as cwd:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        full_env.update(env or {})
        if side == "foundry":  # the bench folder, and whatever makes `import foundry` this checkout
            full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
        full_env["BENCH_SPAWNED_AT"] = repr(time.time())
        proc = subprocess.run(side_cmd(side) + list(args), capture_output=True, text=True, cwd=cwd,
                              env=full_env, timeout=timeout)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{side} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def warm(path: Path) -> None:
    """Read every file once so the timed epoch starts from the page cache."""
    for root, _d, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(16 << 20):
                    pass


def forget_decompressed(path: Path) -> None:
    """Delete shard files a previous epoch decompressed beside their compressed originals (Foundry
    and mosaicml-streaming both decompress a local-only dataset into its folder), and Foundry's
    cache state but its verified-shard stamps (what a second run on the machine finds; the first
    open of a dataset hashes each shard once, ~3.5 ms per 64 MB with xxh3 here)."""
    for entry in (path / ".foundry").glob("*"):
        if entry.name != "verified":
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
    for z in list(path.rglob("*.zstd")):
        z.with_suffix("").unlink(missing_ok=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def own_temp_folder() -> None:
    """Every side's temp files (mosaic's /tmp/NNNNNN_*_filelock, torch's, SeaweedFS's logs) go into
    one folder of this bench, removed at exit: a benchmark leaves nothing in the machine's /tmp."""
    import atexit

    folder = tempfile.mkdtemp(prefix="bench-streaming-")
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    atexit.register(shutil.rmtree, folder, True)


def even_library_pages(sides: list[str]) -> None:
    """Evict each side's native libraries from the page cache, so every venv maps them the same way.

    A mapped file's pages count in RSS by the folio, and a file written in large chunks (uv links a
    freshly unpacked wheel into the venv) sits in the page cache in large folios: touching one
    instruction maps a whole folio. Foundry's venv, made by uv minutes before, mapped 93 MB of
    libtorch_cpu.so where the pip-made litdata venv mapped 48 MB for the same imports (45 MB per
    process, ~130 MB for a DataLoader's tree). Evicted, both fault their pages back in through the
    same readahead (drop_caches showed 48 MB for both)."""
    for s in sides:
        python = Path(side_cmd(s)[0])
        for lib in python.parent.parent.glob("lib/python3*/site-packages/**/*.so*"):
            try:
                fd = os.open(lib, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workloads", default="tokens,tokens-zstd,images")
    ap.add_argument("--modes", default="plain,loader,loader256")
    ap.add_argument("--sides", default="foundry,mosaic,litdata")
    ap.add_argument("--data", default=str(REPO / ".foundry-cache" / "bench-streaming"))
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--wan-rtt-ms", type=float, default=0,
                    help="cold epoch from SeaweedFS across an emulated link of this RTT (root; wan.py)")
    ap.add_argument("--wan-rate", default="none", help="rate cap on that link (tbf, e.g. 200mbit)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "streaming.json"))
    a = ap.parse_args()
    own_temp_folder()
    sides = a.sides.split(",")
    data = Path(a.data)
    results: dict = {"samples": a.samples, "reps": a.reps, "sides": sides, "workloads": {}}
    floors = {}
    even_library_pages(sides)
    for s in sides:  # each venv's own process-tree floor (bench_common.rss_floor)
        res = run(s, "rss_floor")
        if res:
            floors[s] = res["peak_tree_rss_mb"]
    results["tree_rss_floor_mb"] = floors
    s3 = None
    if a.wan_rtt_ms:
        from wan import start_s3_across_link

        s3 = start_s3_across_link(data / "seaweed-wan", a.wan_rtt_ms, a.wan_rate)
        results["wan"] = s3["describe"]
    elif not a.no_cold:
        s3 = start_s3(data / "seaweed")
    try:
        for wl in a.workloads.split(","):
            r = results["workloads"][wl] = {s: {} for s in sides}
            dirs = {s: data / f"{wl}-{a.samples}" / s for s in sides}
            for s in sides:  # write (timed once, on a fresh folder)
                shutil.rmtree(dirs[s], ignore_errors=True)
                dirs[s].parent.mkdir(parents=True, exist_ok=True)
                res = run(s, "write", wl, str(dirs[s]), str(a.samples))
                if res:
                    r[s]["write_sps"] = a.samples / res["seconds"]
                    print(f"[{wl}] {s} write {r[s]['write_sps']:.0f}/s", flush=True)
            compressed = "-" in wl
            if "foundry" in sides and not compressed:
                for _ in range(a.reps):
                    warm(dirs["foundry"])
                    res = run("foundry", "floor", str(dirs["foundry"]))
                    if res:
                        r.setdefault("floor", []).append(res["samples"] / res["seconds"])
                    warm(dirs["foundry"])
                    res = run("foundry", "floor", str(dirs["foundry"]), "shuffled")
                    if res:
                        r.setdefault("shuffled_floor", []).append(res["samples"] / res["seconds"])
            if "foundry" in sides and compressed:
                for _ in range(a.reps):
                    res = run("foundry", "ceiling", str(dirs["foundry"]))
                    if res:
                        r.setdefault("ceiling", []).append(res["samples"] / res["seconds"])
            for mode in a.modes.split(","):
                for rep in range(a.reps):
                    for s in sides:
                        forget_decompressed(dirs[s])
                        warm(dirs[s])
                        res = run(s, "epoch", str(dirs[s]), mode)
                        if not res:
                            continue
                        r[s].setdefault(f"{mode}_sps_all", []).append(res["samples"] / res["seconds"])
                        if mode == "plain":
                            r[s].setdefault("first_all", []).append(res["first_sample_s"] + res.get("setup_s", 0))
                            r[s].setdefault("spawn_first_all", []).append(res.get("from_spawn_s"))
                            r[s].setdefault("rss_all", []).append(res["maxrss_mb"])
                            r[s].setdefault("anon_all", []).append(res.get("peak_anon_mb"))
                        else:
                            r[s].setdefault(f"{mode}_tree_rss_all", []).append(res.get("peak_tree_rss_mb"))
                            # after the first batch: the workers' start is left out, as the floor has none
                            batch = 256 if mode.endswith("256") else 32
                            r[s].setdefault(f"{mode}_steady_sps_all", []).append(
                                (res["samples"] - batch) / (res["seconds"] - res["first_sample_s"]))
                        print(f"[{wl}] {s} {mode} rep{rep} {res['samples'] / res['seconds']:.0f}/s "
                              f"rss {res['maxrss_mb']:.0f}MB load {os.getloadavg()[0]:.2f}", flush=True)
                        r.setdefault("load_all", []).append(os.getloadavg()[0])
            for rep in range(a.reps):
                for s in sides:
                    forget_decompressed(dirs[s])
                    warm(dirs[s])
                    res = run(s, "resume", str(dirs[s]))
                    if res:
                        r[s].setdefault("resume_all", []).append(res["seconds"])
            if s3 is not None:
                cold_epochs(s3, a, data, wl, dirs, r)
            for s in sides:
                for key in ("plain_sps", "loader_sps", "loader256_sps", "loader_steady_sps", "loader256_steady_sps", "first", "spawn_first", "rss", "anon",
                            "resume", "loader_tree_rss", "loader256_tree_rss", "cold_sps", "cold_first_s",
                            "cold_spawn_first_s", "cold_first32_s", "cold_first256_s", "one_shard_s",
                            *(f"{m}{k}" for m in COLLATE_MODES for k in ("_sps", "_steady_sps", "_tree_rss"))):
                    r[s][key] = median(r[s].get(f"{key}_all", []))
            r["load"] = median(r.get("load_all", []))  # 1-minute load average after each epoch
            for s in sides:
                r[s]["tree_floor"] = floors.get(s)
            for key in ("floor", "shuffled_floor", "ceiling"):
                if key in r:
                    r[f"{key}_sps"] = median(r[key])
            save(a.out, results)  # a run cut short keeps the workloads it finished
            print(table({**results, "workloads": {wl: r}}), flush=True)
    finally:
        if s3 is not None:
            s3["stop"]()
    save(a.out, results)
    print(table(results))


def cold_epochs(s3: dict, a, data: Path, wl: str, dirs: dict, r: dict) -> None:
    """Each side's copy uploaded, then `reps` epochs into an empty cache, interleaved across sides
    (and, across a WAN link, one timed GET of a shard of that copy after each)."""
    for s in dirs:
        forget_decompressed(dirs[s])
        with s3.get("unthrottled", contextlib.nullcontext)():
            upload(s3, dirs[s], f"{wl}-{a.samples}/{s}")
    for _rep in range(a.reps):
        for s in dirs:
            prefix = f"{wl}-{a.samples}/{s}"
            cache = data / "cold-cache" / wl / s
            shutil.rmtree(cache, ignore_errors=True)
            res = run(s, "epoch", f"s3://{s3['bucket']}/{prefix}", "plain", str(cache), env=s3["env"])
            if not res:
                continue
            r[s].setdefault("cold_sps_all", []).append(res["samples"] / res["seconds"])
            r[s].setdefault("cold_first_s_all", []).append(res["first_sample_s"] + res.get("setup_s", 0))
            for k in (32, 256):
                if res.get(f"first_{k}_s") is not None:
                    r[s].setdefault(f"cold_first{k}_s_all", []).append(res[f"first_{k}_s"] + res.get("setup_s", 0))
            r[s].setdefault("cold_spawn_first_s_all", []).append(res.get("from_spawn_s"))
            r[s]["cold_bytes"] = du_bytes(cache)
            r[s]["store_bytes"] = du_bytes(dirs[s])
            if "one_shard_s" in s3:
                r[s].setdefault("one_shard_s_all", []).append(s3["one_shard_s"](prefix))
            shutil.rmtree(cache, ignore_errors=True)
            print(f"[{wl}] {s} cold {r[s]['cold_sps_all'][-1]:.0f}/s, first sample {r[s]['cold_first_s_all'][-1]:.2f} s, "
                  f"{r[s]['cold_bytes'] / 1e6:.0f} MB", flush=True)


def save(out: str, results: dict) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(results, indent=1))


def du_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file() and ".foundry" not in f.parts)


def start_s3(root: Path) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from support import storage_servers as ss

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = ss.start_seaweedfs(root)
    proc, server = started if isinstance(started, tuple) else (getattr(started, "proc", None), started)
    bucket = server.create_bucket("bench")
    env = dict(server.env())
    env.setdefault("AWS_ENDPOINT_URL", server.endpoint)
    env.setdefault("S3_ENDPOINT_URL", server.endpoint)
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    env.setdefault("AWS_ALLOW_HTTP", "true")  # litdata's object_store client refuses http:// otherwise

    def stop():
        if proc is not None:
            ss.stop_seaweedfs(proc)  # and its gRPC sockets, which weed puts in /tmp
        elif hasattr(server, "stop"):
            server.stop()

    return {"bucket": bucket, "env": env, "server": server, "stop": stop}


def upload(s3: dict, folder: Path, prefix: str) -> None:
    client = s3["server"].client()
    for f in sorted(Path(folder).rglob("*")):
        if f.is_file():
            client.upload_file(str(f), s3["bucket"], f"{prefix}/{f.relative_to(folder).as_posix()}")


def table(results: dict) -> str:
    sides = results["sides"]
    peers = [s for s in sides if s != "foundry"]
    rtt = (results.get("wan") or {}).get("rtt_ms")
    at = f" at {rtt:g} ms RTT" if rtt else ""
    rows = [("write samples/s", "write_sps", True), ("epoch from cache, plain, samples/s", "plain_sps", True),
            ("epoch from cache, DataLoader(batch 32, 2 workers), samples/s", "loader_sps", True),
            ("epoch from cache, DataLoader(batch 256, 2 workers), samples/s", "loader256_sps", True),
            ("  the same after the first batch (batch 32), samples/s", "loader_steady_sps", True),
            ("  the same after the first batch (batch 256), samples/s", "loader256_steady_sps", True),
            ("DataLoader(batch 32, 2 workers), the same fine-tuning collate_fn, samples/s", "collate_sps", True),
            ("DataLoader(batch 256, 2 workers), the same fine-tuning collate_fn, samples/s", "collate256_sps", True),
            ("  Foundry: batch_transform on its worker-made batch (batch 32), samples/s", "transform_sps", True),
            ("  Foundry: batch_transform on its worker-made batch (batch 256), samples/s", "transform256_sps", True),
            (f"cold epoch{at}, samples/s" if at else "cold epoch from SeaweedFS, samples/s", "cold_sps", True),
            ("fresh process -> first sample (local), s", "first", False),
            ("  the same from the process's start (interpreter and imports too), s", "spawn_first", False),
            (f"time to first sample{at}, s" if at else "time to first sample (cold), s", "cold_first_s", False),
            ("  the same from the process's start, s", "cold_spawn_first_s", False),
            (f"time to the first 32 samples{at}, s", "cold_first32_s", False),
            (f"time to the first 256 samples{at}, s", "cold_first256_s", False),
            (f"one shard's download{at}, s", "one_shard_s", None),
            ("resume at 75% -> first sample, s", "resume", False), ("peak RSS incl. mapped shard pages (plain epoch), MB", "rss", False),
            ("peak anonymous memory (plain epoch), MB", "anon", False),
            ("peak RSS of the process tree, DataLoader batch 32, MB", "loader_tree_rss", False),
            ("peak RSS of the process tree, DataLoader batch 256, MB", "loader256_tree_rss", False),
            ("  the same for a DataLoader over nothing (the venv's floor), MB", "tree_floor", False),
            ("bytes downloaded (cold epoch), MB", "cold_bytes", False)]
    out = []
    for wl, r in results["workloads"].items():
        head = f"| {wl} | " + " | ".join(sides) + " | " + " | ".join(f"foundry/{p}" for p in peers) + " |"
        out += [head, "|" + "---|" * (1 + len(sides) + len(peers))]
        for label, key, higher in rows:
            vals = [r[s].get(key) for s in sides]
            if all(v is None for v in vals):
                continue
            scale = 1e6 if key == "cold_bytes" else 1
            cells = [("-" if v is None else (f"{v / scale:.3g}" if v < 100 else f"{v / scale:,.0f}")) for v in vals]
            ratios = []
            f = r["foundry"].get(key) if "foundry" in r else None
            for p in peers:
                v = r[p].get(key)
                if f is None or v is None or f == 0 or v == 0 or higher is None:
                    ratios.append("-")
                else:
                    ratios.append(f"{(f / v if higher else v / f):.2f}x")
            out.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
        for key, what in (("floor_sps", "raw floor (slice each sample from mmap'd shards)"),
                          ("shuffled_floor_sps", "the same in a shuffled epoch's order (as every side reads)"),
                          ("ceiling_sps", "decompression ceiling (zstd of every shard, in memory, one core)")):
            if r.get(key) and "foundry" in r:
                parts = [f"{m} {r['foundry'][m + '_sps'] / r[key]:.2f}"
                         for m in ("plain", "loader", "loader256", "loader_steady", "loader256_steady")
                         if r["foundry"].get(m + "_sps")]
                out.append(f"\n{what}: {r[key]:,.0f} samples/s; Foundry as a fraction of it: {', '.join(parts)}\n")
        if r.get("load"):
            out.append(f"median 1-minute load average after an epoch: {r['load']:.2f}\n")
        out.append("")
    out.append("ratios: foundry/peer for throughputs, peer/foundry for times, memory and bytes (>1 = Foundry better)")
    return "\n".join(out)


if __name__ == "__main__":
    main()
