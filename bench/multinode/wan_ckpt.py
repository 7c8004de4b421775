"""Checkpoint save/restore throughput behind a WAN link: bench/trainer/ckpt_throughput.py's two sides
(Foundry's Trainer and the floor, torch.save + boto3's transfer manager) run on a LAN node (plain veth)
and on a node behind 40 ms RTT / 200 Mbit (scripts/infra/multinode/wan.sh), against the bridge's S3.

    sudo .venv/bin/python bench/multinode/wan_ckpt.py --sizes 0.1,1 --reps 1

Brings up its own 2-node namespace network (`mnx`, 10.216.0.0/24, no Slurm, as wan_notice.py) with its
own SeaweedFS bound to the bridge; for each size and layout runs floor and foundry on node1 (LAN) and
node2 (WAN), interleaved (order alternating by rep), and tears it all down, also on Ctrl-C or an error.
Prints ckpt_throughput's table with a link column; --json for rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from wan_data_wait import ROOT
from wan_notice import node_exec, wan_network

sys.path.insert(0, str(ROOT / "bench" / "trainer"))
from ckpt_throughput import run_side, shape_for, summarize, table  # noqa: E402  (one bench, two networks)

LINKS = {1: "LAN", 2: "WAN 40 ms, 200 Mbit"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="0.1,1", help="GB of model + optimizer state, comma-separated")
    p.add_argument("--layouts", default="full,sharded")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--floor-part-mib", type=int, default=16)
    p.add_argument("--floor-threads", type=int, default=16)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    here = ROOT / "bench" / "trainer"
    rows: list[dict] = []
    loads = [os.getloadavg()[0]]
    with wan_network("foundry-wan-ckpt-") as (work, mn, s3env):
        env = {**os.environ, **mn, **s3env, "FOUNDRY_DISABLE_PLUGIN_AUTOLOAD": "1",
               "FLOOR_PART_MIB": str(a.floor_part_mib), "FLOOR_THREADS": str(a.floor_threads),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")]))}
        env.pop("FOUNDRY_METRICS_FILE", None)
        for gb in (float(s) for s in a.sizes.split(",")):
            width, depth = shape_for(gb)
            for layout in a.layouts.split(","):
                got = {(n, s): [] for n in LINKS for s in ("foundry", "floor")}
                for rep in range(a.reps):
                    order = [(n, s) for n in (1, 2) for s in ("floor", "foundry")]
                    for node, side in (order if rep % 2 == 0 else order[::-1]):
                        prefix = f"bench/{gb}-{layout}/node{node}-{side}{rep}"
                        got[(node, side)].append(run_side(side, layout, 1, width, depth, prefix, work, env,
                                                          node_exec(node)))
                        loads.append(os.getloadavg()[0])
                        print(f"{gb} GB {layout} {LINKS[node]} {side} rep {rep}: {got[(node, side)][-1]}",
                              file=sys.stderr, flush=True)
                for node, link in LINKS.items():
                    rows.append({"gb": gb, "layout": layout, "ranks": 1, "link": link,
                                 "foundry": summarize(got[(node, "foundry")]), "floor": summarize(got[(node, "floor")])})
    if a.json:
        print(json.dumps(rows))
        return 0
    print(f"\nSeaweedFS on the namespace bridge, 1 rank on CPU per node, {a.reps} interleaved reps, medians; floor: "
          f"torch.save + boto3 upload_file / download_file + torch.load, {a.floor_part_mib} MiB parts, "
          f"{a.floor_threads} threads; 1-min load {min(loads):.1f}-{max(loads):.1f} "
          f"(median {statistics.median(loads):.1f}), {os.cpu_count()} CPUs")
    print("\n".join(table(rows, extra=("link",))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
