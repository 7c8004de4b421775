"""`foundry dataset convert | inspect | verify` through the real entry point."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from foundry.app.cli.main import main
from foundry.streaming.format import load_index, open_shard


def foundry(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def _read_all(root):
    out = []
    for info in load_index((root / "index.json").read_bytes()):
        if info.compression:
            from foundry.streaming.format import decompress_file

            decompress_file(info.compression, root / info.remote_basename, root / info.raw_basename)
        out += list(open_shard(info, root / info.raw_basename))
    return out


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [{"id": i, "text": f"row {i}", "score": i / 4, "tags": ["x"] * (i % 3)} for i in range(500)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def test_convert_inspect_verify_jsonl(capsys, tmp_path, jsonl):
    src, rows = jsonl
    dst = tmp_path / "mds"
    code, out, err = foundry(capsys, "dataset", "convert", str(src), str(dst), "--size-limit", "4kb", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["samples"] == 500 and result["shards"] > 3 and err == ""
    assert result["columns"] == {"id": "int", "text": "str", "score": "float64", "tags": "json"}
    assert _read_all(dst) == rows

    code, out, _ = foundry(capsys, "dataset", "inspect", str(dst), "--json", "-n", "2")
    summary = json.loads(out)
    assert summary["samples"] == 500 and summary["shards"] == result["shards"]
    assert summary["hashes"] == ["xxh3_64"] and summary["compression"] == ["none"]  # the fast default
    assert [c["name"] for c in summary["columns"]] == ["id", "score", "tags", "text"]
    assert summary["samples_preview"] == rows[:2]

    code, out, _ = foundry(capsys, "dataset", "inspect", str(dst))
    assert code == 0 and "samples" in out and "sample 0:" in out

    code, out, err = foundry(capsys, "dataset", "verify", dst.as_uri(), "--json")
    assert code == 0 and json.loads(out)["ok"] is True and err == ""


@pytest.mark.subprocess
def test_parallel_csv_conversion_to_a_remote_keeps_order(capsys, tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("id,name,val\n" + "".join(f"{i},n{i},{i / 2}\n" for i in range(2000)))
    remote = tmp_path / "remote"
    code, out, err = foundry(capsys, "--json", "dataset", "convert", str(src), remote.as_uri(), "--workers", "2",
                             "--compression", "zstd", "--size-limit", "8kb")
    assert code == 0, err
    assert json.loads(out)["workers"] == 2
    shards = load_index((remote / "index.json").read_bytes())
    assert {s.remote_basename.split("/")[0] for s in shards} == {"part-00000", "part-00001"}
    assert not any(p.suffix == ".mds" for p in remote.rglob("shard.*"))
    assert [r["id"] for r in _read_all_nested(remote, shards)] == list(range(2000))
    code, _, err = foundry(capsys, "dataset", "verify", remote.as_uri())
    assert code == 0, err


def _read_all_nested(root, shards):
    from foundry.streaming.format import decompress_file

    out = []
    for info in shards:
        decompress_file(info.compression, root / info.remote_basename, root / info.raw_basename)
        out += list(open_shard(info, root / info.raw_basename))
    return out


def test_image_folder(capsys, tmp_path):
    rng = np.random.default_rng(0)
    for cls, ext in (("cat", "jpg"), ("dog", "png")):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(rng.integers(0, 255, (8, 6, 3), dtype=np.uint8)).save(tmp_path / "imgs" / cls / f"{i}.{ext}")
    code, out, err = foundry(capsys, "dataset", "convert", str(tmp_path / "imgs"), str(tmp_path / "mds"), "--json")
    assert code == 0, err
    assert json.loads(out)["columns"] == {"image": "jpeg", "label": "int", "class_name": "str"}
    samples = _read_all(tmp_path / "mds")
    assert [(s["label"], s["class_name"]) for s in samples] == [(0, "cat")] * 3 + [(1, "dog")] * 3
    assert all(s["image"].size == (6, 8) for s in samples)
    code, out, _ = foundry(capsys, "dataset", "inspect", str(tmp_path / "mds"), "--json")
    assert json.loads(out)["samples_preview"][0]["image"] == "<image RGB 6x8>"


def test_verify_names_a_corrupt_or_missing_shard(capsys, tmp_path, jsonl):
    src, _ = jsonl
    dst = tmp_path / "mds"
    assert foundry(capsys, "dataset", "convert", str(src), str(dst), "--size-limit", "4kb")[0] == 0
    shards = load_index((dst / "index.json").read_bytes())
    bad = dst / shards[1].raw_basename
    data = bytearray(bad.read_bytes())
    data[-1] ^= 0xFF
    bad.write_bytes(bytes(data))
    (dst / shards[2].raw_basename).unlink()
    code, out, err = foundry(capsys, "dataset", "verify", str(dst))
    assert code == 1
    assert f"bad shard {shards[1].raw_basename}: {shards[1].raw_basename}: xxh3_64 mismatch" in err
    assert f"bad shard {shards[2].raw_basename}" in err and "cannot fetch" in err
    code, out, _ = foundry(capsys, "dataset", "verify", str(dst), "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert sorted(b["shard"] for b in report["bad_shards"]) == sorted([shards[1].raw_basename, shards[2].raw_basename])


def test_bad_input_is_a_clean_error(capsys, tmp_path):
    code, _, err = foundry(capsys, "dataset", "convert", str(tmp_path / "nope.jsonl"), str(tmp_path / "out"))
    assert code == 2 and err.startswith("error: ")
    code, _, err = foundry(capsys, "dataset", "inspect", str(tmp_path))
    assert code == 1 and "no index.json" in err


@pytest.mark.integration
def test_parallel_convert_to_seaweedfs_then_inspect_and_verify(capsys, s3_bucket, jsonl):
    src, rows = jsonl
    url = f"{s3_bucket.url}/converted"
    code, out, err = foundry(capsys, "dataset", "convert", str(src), url, "--workers", "2", "--compression", "zstd",
                             "--size-limit", "4kb", "--json")
    assert code == 0, err
    assert json.loads(out)["samples"] == 500
    code, out, _ = foundry(capsys, "dataset", "inspect", url, "--json", "-n", "1")
    assert json.loads(out)["samples_preview"] == rows[:1]
    code, out, err = foundry(capsys, "dataset", "verify", url)
    assert code == 0, err
