"""The proof, end to end: data and checkpoints in S3 (SeaweedFS), the tiny GPT started on `local`
with 2 processes, paused, resumed on a real Slurm cluster with 1 process (same global batch), finished;
compared with an uninterrupted run: same batches in the same order, equal losses, no sample twice
or skipped, and `foundry describe run` shows both resumptions."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "move-run" / "move_run.py"


def load_example():
    spec = importlib.util.spec_from_file_location("move_run_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def options(tmp_path, bucket_url: str, cluster_b: str, **kw) -> argparse.Namespace:
    # 1 s per step: the `foundry stop` after step 5 (a CLI process, seconds to start on a loaded
    # machine) must land before the 16th step, or the run completes unpaused
    base = dict(data_url=f"{bucket_url}/data", save_url=f"{bucket_url}/ckpt/{{run_name}}", write_data=True,
                cluster_a="local", gpus_a=2, cluster_b=cluster_b, gpus_b=1, steps=16, pause_at=5,
                global_batch=8, step_delay=1.0, secret="seaweed", prefix="gpt", out=str(tmp_path / "out"))
    base.update(kw)
    return argparse.Namespace(**base)


def check(result: dict, cluster_b: str) -> None:
    assert result["same_batches"] and result["same_order"]
    assert result["max_loss_diff"] < 1e-4
    assert result["duplicates"] == 0 and result["skipped"] == 0
    assert 0 < result["paused_at"] < result["steps"] == 16
    res = result["resumptions"]
    assert [(r["cluster"], r["devices"], r["state"]) for r in res] == [
        ("local", 2, "paused"), (cluster_b, 1, "completed")]
    # the registry holds the checkpoint's URL (from the trainer's `resumed` record), the timeline its name
    assert res[1]["resumed_from"].rsplit("/", 1)[-1] == result["resume_to_first_step"]["resumed_from"]
    assert "resumed from" in result["describe"] and cluster_b in result["describe"]
    phases = result["resume_to_first_step"]["phases"]
    assert all(v >= 0 for v in phases.values())


@pytest.mark.slow
def test_loss_plot_is_a_png_of_the_requested_size(tmp_path):
    pytest.importorskip("matplotlib")  # the [plot] extra, part of [test]
    from PIL import Image

    out = tmp_path / "loss.png"
    load_example().line_plot(str(out), {"uninterrupted": [(s, 4.0 - s / 10) for s in range(1, 17)],
                                        "paused + moved": [(s, 4.0 - s / 10) for s in range(16, 0, -1)]},
                             title="tiny GPT loss: local x2 -> hpc x1", vlines={"moved after step 5": 5.5})
    with Image.open(out) as img:
        assert (img.format, img.size) == ("PNG", (800, 480))


def test_without_matplotlib_the_driver_says_which_extra_in_one_line(monkeypatch, capsys, tmp_path):
    example = load_example()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code = example.main(["--data-url", f"file://{tmp_path}/d", "--save-url", f"file://{tmp_path}/c",
                         "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "foundry-anywhere[plot]" in err
    assert not (tmp_path / "out").exists()  # refused before any work


def create_secret(cp, server) -> None:
    cp.create_secret("seaweed", "s3", {"access_key_id": server.access_key, "secret_access_key": server.secret_key,
                                       "endpoint": server.endpoint, "region": server.region})


@pytest.mark.integration
@pytest.mark.slow
def test_move_local_to_slurm_through_s3(s3_bucket, slurm_cluster, tmp_path, cp):
    create_secret(cp, s3_bucket.server)
    config = slurm_cluster.provider_config(tmp_path / "slurm-jobs")
    config.pop("name"), config.pop("provider")
    cp.create_cluster("hpc", "slurm", config)
    example = load_example()
    result = example.prove(options(tmp_path, s3_bucket.url, "hpc"))
    print(example.report(result))
    check(result, "hpc")
    assert (tmp_path / "out" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert s3_bucket.server.secret_key not in result["describe"]


@pytest.mark.integration
@pytest.mark.slow
def test_move_local_2_to_local_1_through_s3(s3_bucket, tmp_path, cp):
    create_secret(cp, s3_bucket.server)
    example = load_example()
    result = example.prove(options(tmp_path, s3_bucket.url, "local"))
    print(example.report(result))
    check(result, "local")
