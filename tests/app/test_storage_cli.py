"""`foundry ls/cp/rm` through the real entry point (`foundry.app.cli.main.main`), in process.

`main` is what the console script runs: it exits (SystemExit) with the CLI's exit code on errors.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def foundry(capsys, monkeypatch):
    from foundry.app.cli.main import main
    from foundry.app.cli.output import sink

    def run(*args: str, env: dict | None = None) -> Result:
        capsys.readouterr()
        with monkeypatch.context() as patch:
            for key, value in (env or {}).items():
                patch.setenv(key, value)
            patch.setattr(sink, "json_mode", False)
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return run


@pytest.mark.integration
def test_cp_up_ls_cp_down_rm_roundtrip(foundry, s3_bucket, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(70_000))
    up = foundry("cp", "-r", str(src), f"{s3_bucket.url}/data", "--json")
    assert up.returncode == 0, up.stderr
    summary = json.loads(up.stdout)
    assert summary["files"] == 2 and summary["bytes"] == 70_005
    assert up.stderr == ""  # no progress bar when not a terminal

    listed = foundry("--json", "ls", "-r", f"{s3_bucket.url}/data")
    assert [(r["key"], r["size"]) for r in json.loads(listed.stdout)] == [("a.txt", 5), ("sub/b.bin", 70_000)]
    top = foundry("ls", "--json", f"{s3_bucket.url}/data")
    assert [r["key"] for r in json.loads(top.stdout)] == ["a.txt", "sub/"]
    one = foundry("ls", "--json", f"{s3_bucket.url}/data/a.txt")
    assert [r["size"] for r in json.loads(one.stdout)] == [5]

    down = foundry("cp", "-r", f"{s3_bucket.url}/data", str(tmp_path / "back"))
    assert down.returncode == 0, down.stderr
    assert "copied 2 files" in down.stderr
    assert (tmp_path / "back" / "sub" / "b.bin").read_bytes() == (src / "sub" / "b.bin").read_bytes()

    single = foundry("cp", f"{s3_bucket.url}/data/a.txt", str(tmp_path / "one") + "/")
    assert single.returncode == 0 and (tmp_path / "one" / "a.txt").read_bytes() == b"alpha"
    between = foundry("cp", f"{s3_bucket.url}/data/a.txt", f"{s3_bucket.url}/copy/a.txt")
    assert between.returncode == 0, between.stderr

    assert foundry("rm", f"{s3_bucket.url}/copy/a.txt").returncode == 0
    removed = foundry("rm", "-r", "--json", f"{s3_bucket.url}/data")
    assert json.loads(removed.stdout)["deleted"] == 2
    # Nothing is left (-r lists objects; SeaweedFS's filer keeps empty folder entries, which its
    # delimiter listing still reports as prefixes, where S3 and R2 have no folders at all).
    assert json.loads(foundry("ls", "-r", "--json", s3_bucket.url).stdout) == []


def test_bad_input_is_one_line_exit_2_and_nothing_written(foundry, tmp_path):
    (tmp_path / "f.txt").write_text("x")
    dest = tmp_path / "dest"
    unknown = foundry("cp", str(tmp_path / "f.txt"), "nosuch://bucket/key")
    assert unknown.returncode == 2
    assert "unknown storage scheme 'nosuch'" in unknown.stderr
    assert "s3" in unknown.stderr and "gs" in unknown.stderr and "file" in unknown.stderr  # installed schemes
    assert "Traceback" not in unknown.stderr
    malformed = foundry("cp", "s3:///no-bucket", str(dest))
    assert malformed.returncode == 2 and "no bucket" in malformed.stderr
    oci = foundry("ls", "oci://bucket-without-namespace/x")
    assert oci.returncode == 2 and "oci://BUCKET@NAMESPACE" in oci.stderr
    assert not dest.exists()


@pytest.mark.integration
def test_missing_credentials_exit_2_nothing_written(foundry, s3_bucket, tmp_path):
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "AWS_CONFIG_FILE": str(tmp_path / "none")}
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key="k", Body=b"v")
    result = foundry("cp", f"{s3_bucket.url}/k", str(tmp_path / "out.bin"), env=env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: no credentials for s3://") and "foundry create secret s3" in lines[1]
    assert not (tmp_path / "out.bin").exists() and list(tmp_path.iterdir()) == []


def test_local_to_local_copy_and_missing_source(foundry, tmp_path):
    (tmp_path / "f.txt").write_text("hello")
    assert foundry("cp", str(tmp_path / "f.txt"), f"file://{tmp_path}/g.txt").returncode == 0
    assert (tmp_path / "g.txt").read_text() == "hello"
    missing = foundry("cp", str(tmp_path / "nope.txt"), str(tmp_path / "h.txt"))
    assert missing.returncode == 1 and "no such object" in missing.stderr
    assert not (tmp_path / "h.txt").exists()


@pytest.mark.integration
def test_progress_bar_path_on_a_terminal(foundry, s3_bucket, tmp_path, monkeypatch):
    from foundry.app.cli.output import Sink

    monkeypatch.setattr(Sink, "interactive", property(lambda self: not self.json_mode))
    (tmp_path / "f.bin").write_bytes(os.urandom(300_000))
    result = foundry("cp", str(tmp_path / "f.bin"), f"{s3_bucket.url}/f.bin")
    assert result.returncode == 0, result.stderr
    assert s3_bucket.client().head_object(Bucket=s3_bucket.name, Key="f.bin")["ContentLength"] == 300_000
