"""Notice to published `latest` behind a WAN link: bench/trainer/notice_to_latest.py's trainer (one rank,
CPU, MLP + AdamW of the given state size, SIGTERM after its 2nd step) run on a LAN node (plain veth) and
on a node behind 40 ms RTT / 200 Mbit (scripts/infra/multinode/wan.sh), saving to the bridge's S3.

    sudo .venv/bin/python bench/multinode/wan_notice.py --sizes 0.1,1 --reps 2

Brings up its own 2-node namespace network (`mnx`, 10.216.0.0/24, no Slurm, as wan_data_wait.py) with
its own SeaweedFS bound to the bridge, runs the trainer on node1 (LAN) and node2 (WAN), interleaved per
rep (order alternating), and tears it all down, also on Ctrl-C or an error. Prints a markdown table of
medians (notice_s, SIGTERM -> exit 75, step, bytes on S3) LAN vs WAN and the WAN/LAN ratio; --json for rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from wan_data_wait import ROOT, SCRIPTS, settings, s3_env, sh

sys.path.insert(0, str(ROOT / "bench" / "trainer"))
from notice_to_latest import one  # noqa: E402  (the trainer child is shared, not copied)

LINKS = {1: "LAN (node1, veth)", 2: "WAN (node2, 40 ms RTT, 200 Mbit)"}


def stored_bytes(s3, bucket: str, prefix: str) -> int:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sum(o["Size"] for page in pages for o in page.get("Contents", []))


def remove_stale_sockets(port: int) -> None:
    """up.sh's weed leaves /tmp/seaweedfs-*-PORT.sock behind (weed puts them in /tmp whatever TMPDIR says):
    remove ours (the S3 port and the ports derived from it), only where nothing listens any more."""
    ports = {port + d + g for d in (0, 100, 107, 155, 200) for g in (0, 10000)}
    for sock in Path("/tmp").glob("seaweedfs-*.sock"):
        tail = sock.stem.rsplit("-", 1)[-1]
        if not tail.isdigit() or int(tail) not in ports:
            continue
        with socket.socket(socket.AF_UNIX) as c:
            try:
                c.connect(str(sock))
                continue  # someone listens: not a leftover
            except OSError:
                sock.unlink(missing_ok=True)


@contextlib.contextmanager
def wan_network(prefix: str) -> Iterator[tuple[Path, dict[str, str], dict[str, str]]]:
    """Bring up the 2-node `mnx` namespace network with its own SeaweedFS on the bridge, a `bench`
    bucket and node2 behind 40 ms RTT / 200 Mbit; yield (work folder, multinode settings, S3 env).
    Torn down on leaving, also on Ctrl-C, an error or a SIGTERM to the driver."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    mn = {**settings(work / "mn"), "TMPDIR": str(work)}  # weed's glog files land in TMPDIR, not /tmp
    s3env = s3_env(mn)
    try:
        sh(mn, str(SCRIPTS / "up.sh"))
        import boto3

        boto3.client("s3", endpoint_url=s3env["S3_ENDPOINT_URL"], aws_access_key_id=s3env["AWS_ACCESS_KEY_ID"],
                     aws_secret_access_key=s3env["AWS_SECRET_ACCESS_KEY"],
                     region_name="us-east-1").create_bucket(Bucket="bench")
        print(sh(mn, str(SCRIPTS / "wan.sh"), "on", "2", "20", "200mbit").strip(), file=sys.stderr)
        yield work, mn, s3env
    finally:
        try:
            sh({**mn, "WIPE": "1"}, str(SCRIPTS / "down.sh"))
        finally:
            remove_stale_sockets(int(mn["MN_S3_PORT"]))
            shutil.rmtree(work, ignore_errors=True)


def node_exec(node: int) -> tuple[str, ...]:
    """A command prefix that runs the rest on namespace node `node` (lib.sh's mn_exec)."""
    return ("bash", "-c", f'. {SCRIPTS / "lib.sh"}; mn_exec {node} "$@"', "mn_exec")


def table(rows: list[dict], reps: int, loads: list[float]) -> str:
    med = statistics.median
    out = [f"1 rank on CPU per node, SeaweedFS on the bridge, {reps} reps per link, medians; 1-minute load "
           f"{min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} CPUs",
           "| state | link | step | notice -> latest (`notice_s`) | SIGTERM -> exit 75 | on S3 | MB/s (S3 bytes / notice) |",
           "|---|---|---|---|---|---|---|"]
    for gb in dict.fromkeys(r["gb"] for r in rows):
        by = {n: [r for r in rows if r["gb"] == gb and r["node"] == n] for n in LINKS}
        m = {n: {k: med(r[k] for r in rs) for k in ("step_s", "notice_s", "wall_s", "s3_bytes")} for n, rs in by.items()}
        for n, rs in by.items():
            spread = ", ".join(f"{r['notice_s']:.1f}" for r in rs)
            out.append(f"| {rs[0]['state_bytes'] / 1e9:.2f} GB | {LINKS[n]} | {m[n]['step_s']:.2f} s | "
                       f"{m[n]['notice_s']:.1f} s ({spread}) | {m[n]['wall_s']:.1f} s | {m[n]['s3_bytes'] / 1e9:.2f} GB | "
                       f"{m[n]['s3_bytes'] / 1e6 / m[n]['notice_s']:.0f} |")
        out.append(f"| | WAN/LAN | {m[2]['step_s'] / m[1]['step_s']:.2f}x | {m[2]['notice_s'] / m[1]['notice_s']:.2f}x | "
                   f"{m[2]['wall_s'] / m[1]['wall_s']:.2f}x | | |")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="0.1,1", help="GB of model + optimizer state, comma-separated")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    rows: list[dict] = []
    loads = [os.getloadavg()[0]]
    with wan_network("foundry-wan-notice-") as (work, mn, s3env):
        env = {**os.environ, **mn, **s3env, "FOUNDRY_DISABLE_PLUGIN_AUTOLOAD": "1", "OMP_NUM_THREADS": "1"}
        env.pop("FOUNDRY_METRICS_FILE", None)
        import boto3

        s3 = boto3.client("s3", endpoint_url=s3env["S3_ENDPOINT_URL"], aws_access_key_id=s3env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=s3env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        for gb in (float(s) for s in a.sizes.split(",")):
            for rep in range(a.reps):
                for node in ((1, 2) if rep % 2 == 0 else (2, 1)):
                    prefix = f"{gb}/{rep}-node{node}"
                    row = one(gb, f"s3://bench/{prefix}", work, env, node_exec(node))
                    row.update(node=node, rep=rep, s3_bytes=stored_bytes(s3, "bench", prefix + "/"),
                               load=os.getloadavg()[0])
                    loads.append(row["load"])
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(rows) if a.json else "\n" + table(rows, a.reps, loads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
