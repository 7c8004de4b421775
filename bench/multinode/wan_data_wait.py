"""Does prefetch keep the training loop fed over a WAN link? Data wait per step, streaming from S3 on a
LAN node vs a node behind 40 ms RTT / 200 Mbit (scripts/infra/multinode/wan.sh), cold cache each time.

    sudo .venv/bin/python bench/multinode/wan_data_wait.py [--samples 3000] [--reps 3] [--step-ms 50]

Brings up its own 2-node namespace network (no Slurm) with its own SeaweedFS bound to the bridge,
writes the dataset once, runs the probe on node1 (LAN) and node2 (WAN), interleaved, and tears it all
down. Prints median / p95 / max wait per step and the total wait as a share of the step time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "infra" / "multinode"
PROBE = Path(__file__).with_name("data_wait_probe.py")
KEY, SECRET = "benchkey", "benchsecret"


def settings(root: Path) -> dict[str, str]:
    return {"MN_NODES": "2", "MN_NS_PREFIX": "mnx", "MN_NET": "10.216.0", "MN_BRIDGE": "mnxbr",
            "MN_VETH_PREFIX": "mnxv", "MN_TAP_PREFIX": "mnxw", "MN_ROOT": str(root), "MN_RUN": "/run/foundry-mnx",
            "MN_SLURM": "0", "MN_S3": "own", "MN_S3_PORT": "25333", "MN_S3_ACCESS_KEY": KEY,
            "MN_S3_SECRET_KEY": SECRET, "MN_WEED": str(Path(sys.executable).parent / "weed")}


def s3_env(mn: dict[str, str]) -> dict[str, str]:
    """What a client on a node (or the host) needs for the bridge's SeaweedFS."""
    return {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
            "S3_ENDPOINT_URL": f"http://{mn['MN_NET']}.254:{mn['MN_S3_PORT']}"}


def sh(env: dict, *args: str) -> str:
    return subprocess.run(["bash", *args], env={**os.environ, **env}, check=True, capture_output=True,
                          text=True, timeout=600).stdout


def write_dataset(url: str, samples: int, env: dict) -> None:
    code = f"""
import numpy as np
from foundry.streaming import MDSWriter
rng = np.random.default_rng(0)
with MDSWriter(out={url!r}, columns={{"id": "int", "tokens": "ndarray:int32"}}, size_limit=1 << 20) as w:
    for i in range({samples}):
        w.write({{"id": i, "tokens": rng.integers(0, 50000, 1024, dtype=np.int32)}})
"""
    subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, check=True, timeout=600)


def probe(mn: dict, s3env: dict, node: int, url: str, cache: str, step_s: float, batch: int, pre: str) -> dict:
    lib = SCRIPTS / "lib.sh"
    cmd = (f'. {lib}; mn_exec {node} env ' + " ".join(f"{k}={v}" for k, v in s3env.items())
           + f' PYTHONPATH={os.environ.get("PYTHONPATH", "")} {sys.executable} {PROBE} {url} {cache} {step_s} {batch} {pre}')
    out = subprocess.run(["bash", "-c", cmd], env={**os.environ, **mn}, check=True, capture_output=True, text=True,
                         timeout=900).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=3000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--step-ms", type=float, default=50)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--predownload", default="default", help="samples fetched ahead ('default' or a number)")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="foundry-wan-bench-"))
    mn = settings(work / "mn")
    s3env = s3_env(mn)
    try:
        sh(mn, str(SCRIPTS / "up.sh"))
        import boto3

        boto3.client("s3", endpoint_url=s3env["S3_ENDPOINT_URL"], aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                     region_name="us-east-1").create_bucket(Bucket="bench")
        url = "s3://bench/ds"
        write_dataset(url, a.samples, s3env)
        print(sh(mn, str(SCRIPTS / "wan.sh"), "on", "2", "20", "200mbit").strip())
        results: dict[str, list[dict]] = {"LAN (node1, veth)": [], "WAN (node2, 40 ms RTT, 200 Mbit)": []}
        for rep in range(a.reps):
            for (label, runs), node in zip(results.items(), (1, 2)):
                cache = str(work / f"cache-{node}-{rep}")
                runs.append(probe(mn, s3env, node, url, cache, a.step_ms / 1000, a.batch, a.predownload))
        print(f"\n{a.samples} samples x 4 KiB, ~1 MiB shards, batch {a.batch}, {a.step_ms:.0f} ms compute per step, "
              f"predownload {a.predownload}, cold cache, {a.reps} reps (medians over reps)")
        print(f"{'link':<36} {'steps':>5} {'median ms':>9} {'p95 ms':>7} {'max ms':>7} {'first batch s':>13} "
              f"{'wait/step time':>14}")
        for label, runs in results.items():
            med = statistics.median(statistics.median(r["waits"]) for r in runs) * 1000
            p95 = statistics.median(sorted(r["waits"])[int(0.95 * len(r["waits"]))] for r in runs) * 1000
            mx = statistics.median(max(r["waits"]) for r in runs) * 1000
            first = statistics.median(r["first_batch_s"] for r in runs)
            share = statistics.median(sum(r["waits"][1:]) / (len(r["waits"]) * a.step_ms / 1000) for r in runs)
            print(f"{label:<36} {runs[0]['steps']:>5} {med:>9.2f} {p95:>7.1f} {mx:>7.0f} {first:>13.2f} {share:>13.1%}")
        (ROOT / "bench" / "results").mkdir(exist_ok=True)
        (ROOT / "bench" / "results" / "wan_data_wait.json").write_text(json.dumps(results))
    finally:
        sh({**mn, "WIPE": "1"}, str(SCRIPTS / "down.sh"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
