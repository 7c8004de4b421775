"""Part size and concurrency for one large object, as checkpoints move it: Foundry's S3 store hashing
in the transfer (sha256 + each part's md5 on upload, sha256 on download, as trainer/checkpoint/store_ops
does) at several (part MiB, threads), next to boto3's transfer manager at 16 MiB / 16 threads.

    .venv/bin/python bench/storage/tuning.py                        # 1024 MiB, 2 reps
    .venv/bin/python bench/storage/tuning.py --size-mib 512 --configs 8x8,16x16 --reps 3

Starts SeaweedFS (`weed mini`) on loopback. Every configuration runs once per rep, in an order that
rotates by rep; the source file is read right before each upload (page cache warm for every side).
Prints MiB/s medians per configuration and the ratio to boto3.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--configs", default="8x8,16x8,16x16,32x8", help="PARTxTHREADS for Foundry's store, comma-separated")
    p.add_argument("--reps", type=int, default=2)
    a = p.parse_args()

    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    from foundry.plugins.manager import open_store
    from foundry.plugins.part_digests import digesting

    sys.path.insert(0, str(ROOT / "tests"))
    from support.storage_servers import start_seaweedfs, stop_seaweedfs

    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    with tempfile.TemporaryDirectory(prefix="foundry-bench-tuning-") as tmp:
        work = Path(tmp)
        proc, server = start_seaweedfs(work / "weed")
        loads = [os.getloadavg()[0]]
        try:
            creds = {"endpoint_url": server.endpoint, "access_key_id": server.access_key,
                     "secret_access_key": server.secret_key}
            bucket = server.create_bucket("tuning")
            client = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=server.access_key,
                                  aws_secret_access_key=server.secret_key, region_name="us-east-1",
                                  config=Config(max_pool_connections=32))
            boto_cfg = TransferConfig(multipart_threshold=16 * MiB, multipart_chunksize=16 * MiB, max_concurrency=16)
            big = work / "big.bin"
            with open(big, "wb") as f:
                for _ in range(a.size_mib):
                    f.write(os.urandom(MiB))

            def warm():
                with open(big, "rb") as f:
                    while f.read(64 * MiB):
                        pass

            def foundry(part, threads):
                store = open_store(f"s3://{bucket}/f{part}x{threads}",
                                   {**creds, "part_size": part * MiB, "concurrency": threads})

                def up():
                    with digesting(part_md5=True):
                        store.put_file("big.bin", big)

                def down():
                    with digesting():
                        store.get_file("big.bin", work / "down.bin")
                return up, down

            sides = {f"foundry {p} MiB x {t}": foundry(p, t) for p, t in configs}
            sides["boto3 16 MiB x 16"] = (
                lambda: client.upload_file(str(big), bucket, "boto3/big.bin", Config=boto_cfg),
                lambda: client.download_file(bucket, "boto3/big.bin", str(work / "down.bin"), Config=boto_cfg))
            times = {name: ([], []) for name in sides}
            names = list(sides)
            for rep in range(a.reps):
                order = names[rep % len(names):] + names[:rep % len(names)]
                for name in order:
                    up, down = sides[name]
                    warm()
                    t0 = time.perf_counter()
                    up()
                    t1 = time.perf_counter()
                    down()
                    t2 = time.perf_counter()
                    (work / "down.bin").unlink(missing_ok=True)
                    times[name][0].append(t1 - t0)
                    times[name][1].append(t2 - t1)
                    loads.append(os.getloadavg()[0])
                    print(f"rep {rep} {name}: up {t1 - t0:.2f} s, down {t2 - t1:.2f} s", file=sys.stderr, flush=True)
        finally:
            stop_seaweedfs(proc)
    base = {k: a.size_mib / statistics.median(times["boto3 16 MiB x 16"][i]) for i, k in enumerate(("up", "down"))}
    print(f"\nSeaweedFS on loopback, one {a.size_mib} MiB object, {a.reps} reps, medians; 1-min load "
          f"{min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} CPUs")
    print("| client | upload MiB/s | / boto3 | download MiB/s | / boto3 |")
    print("|---|---|---|---|---|")
    for name, (ups, downs) in times.items():
        u, d = a.size_mib / statistics.median(ups), a.size_mib / statistics.median(downs)
        print(f"| {name} | {u:.0f} | {u / base['up']:.2f} | {d:.0f} | {d / base['down']:.2f} |")


if __name__ == "__main__":
    main()
