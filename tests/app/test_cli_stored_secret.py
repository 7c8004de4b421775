"""`foundry dataset inspect|verify|convert --secret NAME` and `foundry checkpoint ls|inspect --secret NAME`
read (and write) a private bucket with a stored secret, as the TUI does, with no credentials in the
environment; without the secret the same command says it has no credentials (SeaweedFS)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CREDENTIAL_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN",
                   "S3_ENDPOINT_URL")


@pytest.fixture
def private_bucket(s3_server, monkeypatch, tmp_path):
    """A fresh bucket holding an MDS dataset and a save folder, written with the server's keys, which
    are then removed from the environment (they live only in the stored secret `seaweed`)."""
    import torch

    from foundry.streaming import MDSWriter
    from foundry.trainer import Trainer

    bucket = f"s3://{s3_server.create_bucket()}"
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    with MDSWriter(out=f"{bucket}/reviews", columns={"text": "str", "n": "int"}) as writer:
        for i in range(40):
            writer.write({"text": f"review {i}", "n": i})
    torch.manual_seed(0)
    data = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(2)]
    Trainer(run_name="private", model=torch.nn.Linear(4, 1), train_dataloader=data, max_duration="2ba",
            loss_fn=torch.nn.functional.mse_loss, save_folder=f"{bucket}/ckpt", save_interval="2ba",
            run_dir=str(tmp_path / "run"), device="cpu", progress_bar=False).fit()
    for key in CREDENTIAL_VARS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    return bucket


def test_dataset_commands_read_and_write_with_a_stored_secret(cp, cli, s3_server, private_bucket, tmp_path):
    data = f"{private_bucket}/reviews"
    code, _, err = cli("dataset", "inspect", data)
    assert code != 0 and "credentials" in err
    code, _, err = cli("dataset", "inspect", data, "--secret", "seaweed")
    assert code == 2 and "no secret named 'seaweed'" in err
    cp.create_secret("seaweed", "s3", {"access_key_id": s3_server.access_key,
                                       "secret_access_key": s3_server.secret_key, "endpoint": s3_server.endpoint})

    code, out, err = cli("dataset", "inspect", data, "--secret", "seaweed", "--json", "-n", "1")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["samples"] == 40 and summary["samples_preview"] == [{"text": "review 0", "n": 0}]
    code, out, err = cli("dataset", "verify", data, "--secret", "seaweed", "--json")
    assert code == 0 and json.loads(out)["ok"], err

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(10)))
    code, out, err = cli("dataset", "convert", str(rows), f"{private_bucket}/converted", "--secret", "seaweed", "--json")
    assert code == 0 and json.loads(out)["samples"] == 10, err
    code, out, err = cli("dataset", "inspect", f"{private_bucket}/converted", "--secret", "seaweed", "--json")
    assert code == 0 and json.loads(out)["samples"] == 10, err
    assert not any(s3_server.secret_key in text for text in (out, err))


def test_checkpoint_commands_read_with_a_stored_secret(cp, cli, s3_server, private_bucket):
    folder = f"{private_bucket}/ckpt"
    code, _, err = cli("checkpoint", "ls", folder)
    assert code != 0 and "credentials" in err
    cp.create_secret("seaweed", "s3", {"access_key_id": s3_server.access_key,
                                       "secret_access_key": s3_server.secret_key, "endpoint": s3_server.endpoint})
    code, out, err = cli("--json", "checkpoint", "ls", folder, "--secret", "seaweed")
    assert code == 0, err
    listed = json.loads(out)
    assert [(r["batch"], r["latest"], r["complete"]) for r in listed] == [(2, True, True)]
    code, out, err = cli("--json", "checkpoint", "inspect", folder, "--secret", "seaweed", "--verify")
    assert code == 0, err
    assert json.loads(out)["run_name"] == "private"
