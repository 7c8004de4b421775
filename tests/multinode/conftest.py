"""Multi-node tests: runs launched through the `foundry` CLI and a run YAML on namespace Slurm clusters
(tests/support/multinode.py). Each test has its own FOUNDRY_HOME (tests/conftest.py) with the clusters
and an S3 secret registered through the CLI; the dataset is written to S3 once per session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.multinode import S3_ENDPOINT, SKIPPED, ended, foundry, run_yaml, steps, wait_status  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
DATASET_SAMPLES = 144   # 12 steps x global batch 12: the tests train exactly one epoch


def pytest_terminal_summary(terminalreporter):
    for reason in dict.fromkeys(SKIPPED):
        terminalreporter.write_line(f"!! {reason}", yellow=True, bold=True)


@pytest.fixture(scope="session")
def mn_dataset(mn_clusters, s3_server) -> dict:
    """The tiny-LM dataset in S3 (written once), with its total size in bytes."""
    bucket = s3_server.create_bucket()
    url = f"s3://{bucket}/data"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from data import write_dataset; "
            f"write_dataset(sys.argv[2], n={DATASET_SAMPLES})")
    subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "move-run"), url], check=True,
                   env={**os.environ, **s3_server.env()}, timeout=120)
    objects = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="data/")["Contents"]
    shards = {o["Key"].rsplit("/", 1)[1]: o["Size"] for o in objects if not o["Key"].endswith("index.json")}
    index = next(o["Size"] for o in objects if o["Key"].endswith("index.json"))
    return {"bucket": bucket, "url": url, "shards": shards, "bytes": sum(shards.values()), "index_bytes": index}


@pytest.fixture
def mn_home(mn3, mn2, s3_server, tmp_path) -> dict:
    """This test's FOUNDRY_HOME with clusters `mn3`, `mn2` and secret `s3` (endpoint on the bridge)."""
    for cluster in (mn3, mn2):
        opts = cluster.provider_options(tmp_path / f"jobs-{cluster.name}")
        foundry("create", "cluster", cluster.name, "--provider", "slurm",
                *[a for k, v in opts.items() for a in ("-o", f"{k}={v}")])
    foundry("create", "secret", "s3", "s3", "--access-key-id", s3_server.access_key,
            "--secret-access-key", s3_server.secret_key, "--endpoint", S3_ENDPOINT, "--region", s3_server.region)
    return {"tmp": tmp_path}




@pytest.fixture(scope="session")
def mn_reference(mn3, mn_dataset, s3_server, tmp_path_factory):
    """An uninterrupted run of the same job: local, one process."""
    home = tmp_path_factory.mktemp("ref-home")
    old = os.environ.get("FOUNDRY_HOME")
    os.environ["FOUNDRY_HOME"] = str(home)
    try:
        foundry("create", "secret", "s3", "s3", "--access-key-id", s3_server.access_key, "--secret-access-key",
                s3_server.secret_key, "--endpoint", S3_ENDPOINT, "--region", s3_server.region)
        spec = run_yaml(home / "ref.yaml", "ref", "local", 1, 1, mn_dataset, mn_dataset["bucket"], mn3)
        foundry("run", "-f", str(spec))
        run = wait_status("ref", ended, timeout=300)
        assert run["status"] == "completed", run
        return steps(home / "runs" / "ref")
    finally:
        if old is None:
            os.environ.pop("FOUNDRY_HOME", None)
        else:
            os.environ["FOUNDRY_HOME"] = old
