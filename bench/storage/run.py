"""Object-storage throughput: Foundry's S3 store vs boto3's default transfer manager, on SeaweedFS.

    .venv/bin/python bench/storage/run.py                 # 1 GiB file + 1,000 x 1 MiB objects, 3 reps
    .venv/bin/python bench/storage/run.py --size-mib 256 --small-count 256 --reps 5
    .venv/bin/python bench/storage/run.py --endpoint http://127.0.0.1:8333   # an already running S3

Starts SeaweedFS (`weed mini`) on loopback unless --endpoint is given. For each repetition the
two sides run interleaved (Foundry, boto3, Foundry, ...), and the table shows medians and the
ratio Foundry / boto3 (above 1: Foundry is faster). Large: one object, put_file/get_file vs
upload_file/download_file (boto3 defaults: 8 MiB parts, 10 threads). Small: N objects, Foundry
put/get vs put_object/get_object, both through the same pool of --small-workers threads. The
source file is read once right before each rep so it is in the page cache (warm) for both sides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def _server(args, workdir: Path):
    if args.endpoint:
        return None, args.endpoint, args.access_key, args.secret_key
    sys.path.insert(0, str(ROOT / "tests"))
    from support.storage_servers import start_seaweedfs

    proc, server = start_seaweedfs(workdir / "seaweedfs")
    return proc, server.endpoint, server.access_key, server.secret_key


def _warm(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(64 * MiB):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024, help="total size of each object set")
    parser.add_argument("--small-count", type=int, default=1000, help="number of small objects")
    parser.add_argument("--small-workers", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--endpoint")
    parser.add_argument("--access-key", default="foundrytestkey")
    parser.add_argument("--secret-key", default="foundrytestsecret")
    args = parser.parse_args()

    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    from foundry.plugins.manager import open_store

    with tempfile.TemporaryDirectory(prefix="foundry-bench-") as tmp:
        work = Path(tmp)
        proc, endpoint, key, secret = _server(args, work)
        try:
            client = boto3.client(
                "s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                region_name="us-east-1",
                config=Config(request_checksum_calculation="when_required",
                              response_checksum_validation="when_required", max_pool_connections=16),
            )
            bucket = f"bench-{int(time.time())}"
            client.create_bucket(Bucket=bucket)
            store = open_store(f"s3://{bucket}", {"endpoint_url": endpoint, "access_key_id": key,
                                                  "secret_access_key": secret})
            size = args.size_mib * MiB
            big = work / "big.bin"
            with open(big, "wb") as f:
                for _ in range(args.size_mib):
                    f.write(os.urandom(MiB))
            small_size = size // args.small_count
            small = [os.urandom(small_size) for _ in range(min(16, args.small_count))]
            names = [f"small/{i:05d}" for i in range(args.small_count)]
            pool = ThreadPoolExecutor(args.small_workers)

            def run_small(fn) -> None:
                list(pool.map(fn, range(args.small_count)))

            sides = {
                ("large", "upload", "foundry"): lambda: store.put_file("foundry/big.bin", big),
                ("large", "upload", "boto3"): lambda: client.upload_file(str(big), bucket, "boto3/big.bin",
                                                                         Config=TransferConfig()),
                ("large", "download", "foundry"): lambda: store.get_file("foundry/big.bin", work / "f.bin"),
                ("large", "download", "boto3"): lambda: client.download_file(bucket, "boto3/big.bin", str(work / "b.bin")),
                ("small", "upload", "foundry"): lambda: run_small(
                    lambda i: store.put(f"foundry/{names[i]}", small[i % len(small)])),
                ("small", "upload", "boto3"): lambda: run_small(
                    lambda i: client.put_object(Bucket=bucket, Key=f"boto3/{names[i]}", Body=small[i % len(small)])),
                ("small", "download", "foundry"): lambda: run_small(lambda i: store.get(f"foundry/{names[i]}")),
                ("small", "download", "boto3"): lambda: run_small(
                    lambda i: client.get_object(Bucket=bucket, Key=f"boto3/{names[i]}")["Body"].read()),
            }
            times: dict[tuple, list[float]] = {k: [] for k in sides}
            for rep in range(args.reps):
                order = ["foundry", "boto3"] if rep % 2 == 0 else ["boto3", "foundry"]
                for workload in ("large", "small"):
                    for op in ("upload", "download"):
                        for side in order:
                            if workload == "large" and op == "upload":
                                _warm(big)
                            t0 = time.perf_counter()
                            sides[(workload, op, side)]()
                            times[(workload, op, side)].append(time.perf_counter() - t0)
                            for leftover in (work / "f.bin", work / "b.bin"):
                                leftover.unlink(missing_ok=True)
                print(f"rep {rep + 1}/{args.reps} done", file=sys.stderr)
            pool.shutdown()
        finally:
            if proc is not None:
                from support.storage_servers import stop_seaweedfs

                stop_seaweedfs(proc)

    print(f"\nSeaweedFS on loopback, {args.size_mib} MiB per set, small = {args.small_count} x "
          f"{small_size // 1024} KiB ({args.small_workers} threads), {args.reps} reps, medians\n")
    print(f"| {'workload':<26} | {'Foundry MiB/s':>13} | {'boto3 MiB/s':>11} | {'ratio':>5} |")
    print(f"|{'-' * 28}|{'-' * 15}|{'-' * 13}|{'-' * 7}|")
    for workload in ("large", "small"):
        for op in ("upload", "download"):
            f = size / MiB / statistics.median(times[(workload, op, "foundry")])
            b = size / MiB / statistics.median(times[(workload, op, "boto3")])
            label = f"{workload} {op}" + (" (1 object)" if workload == "large" else f" ({args.small_count} obj)")
            print(f"| {label:<26} | {f:>13.0f} | {b:>11.0f} | {f / b:>5.2f} |")


if __name__ == "__main__":
    main()
