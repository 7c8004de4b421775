"""Names from data never reach the file system unchecked (issue 15.1): an index.json whose shard
names are absolute or climb out with `..` is refused by the loader, `dataset verify` and
`dataset inspect`, with one line naming the dataset and the entry, and nothing outside is touched."""

from __future__ import annotations

import json
import os

import pytest

from foundry.app.cli.main import main
from foundry.plugins.errors import DataError
from foundry.streaming import StreamingDataset
from foundry.streaming.format import load_index

from conftest import write_dataset

VICTIM = b"do not touch\n"


def _snapshot(root) -> dict[str, tuple[int, bytes]]:
    """Every file under root but Foundry's own home (the CLI opens its registry there)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (dirpath == str(root) and d == "foundry-home")]
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = (os.stat(path).st_mtime_ns, f.read())
    return out


@pytest.fixture(params=["absolute", "dotdot", "zip-absolute"])
def poisoned(request, tmp_path, monkeypatch):
    """A dataset whose index names tmp_path/victim.bin, plus the files outside it to watch."""
    compression = "zstd" if request.param.startswith("zip") else None
    ds = write_dataset(tmp_path / "ds", 20, 10, compression=compression)
    victim = tmp_path / "victim.bin"
    victim.write_bytes(VICTIM)
    index = json.loads((ds / "index.json").read_text())
    entry = index["shards"][1]
    key = "zip_data" if compression else "raw_data"
    entry[key]["basename"] = str(victim) if "absolute" in request.param else "../victim.bin"
    (ds / "index.json").write_text(json.dumps(index, sort_keys=True))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return ds, victim, entry[key]["basename"]


def _assert_untouched(tmp_path, before) -> None:
    after = _snapshot(tmp_path)
    assert after == before, sorted(set(after) ^ set(before))


def test_load_index_refuses_the_entry_and_names_the_dataset(poisoned):
    ds, _, bad = poisoned
    with pytest.raises(DataError) as err:
        load_index((ds / "index.json").read_bytes(), source=str(ds))
    assert f"{ds}/index.json shard 1" in err.value.message and repr(bad) in err.value.message
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["", ".", "a/./b", "a//b", ".hidden", "a/.foundry/x", "a\\b", "x\ny", "index.json"])
def test_other_unsafe_names_are_refused(name):
    entry = {"column_encodings": ["int"], "column_names": ["a"], "column_sizes": [8], "compression": None,
             "format": "mds", "hashes": [], "samples": 1, "size_limit": None, "version": 2,
             "raw_data": {"basename": name, "bytes": 10, "hashes": {}}, "zip_data": None}
    with pytest.raises(DataError, match="not a plain relative path"):
        load_index({"version": 2, "shards": [entry]})


def test_merged_indexes_keep_their_sub_folders():
    entry = {"column_encodings": ["int"], "column_names": ["a"], "column_sizes": [8], "compression": None,
             "format": "mds", "hashes": [], "samples": 1, "size_limit": None, "version": 2,
             "raw_data": {"basename": "part-00001/shard.00000.mds", "bytes": 10, "hashes": {}}, "zip_data": None}
    assert load_index({"version": 2, "shards": [entry]})[0].raw_basename == "part-00001/shard.00000.mds"


@pytest.mark.parametrize("remote", [True, False], ids=["remote+cache", "local-only"])
def test_loader_refuses_before_writing(poisoned, tmp_path, remote):
    ds, victim, bad = poisoned
    before = _snapshot(tmp_path)
    kwargs = {"remote": str(ds), "local": str(tmp_path / "cache")} if remote else {"local": str(ds)}
    with pytest.raises(DataError, match="not a plain relative path") as err:
        StreamingDataset(**kwargs, batch_size=2)
    assert repr(bad) in err.value.message and str(ds) in err.value.message
    # the fetched index.json is the one thing the loader may have written, inside its cache folder
    _assert_untouched(tmp_path, {**before, **({"cache/index.json": _snapshot(tmp_path)["cache/index.json"]}
                                              if remote else {})})
    assert victim.read_bytes() == VICTIM


@pytest.mark.parametrize("command", ["verify", "inspect"])
def test_dataset_commands_refuse_with_one_line_and_exit_2(poisoned, tmp_path, capsys, command):
    ds, victim, bad = poisoned
    before = _snapshot(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["dataset", command, str(ds)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2
    assert len(err.splitlines()) <= 2 and repr(bad) in err and str(ds) in err, err  # message (+ hint line)
    _assert_untouched(tmp_path, before)
    assert victim.read_bytes() == VICTIM


@pytest.mark.integration
@pytest.mark.parametrize("command", ["loader", "verify", "inspect"])
def test_an_index_on_s3_is_refused_the_same_way(poisoned, tmp_path, s3_bucket, capsys, command):
    ds, victim, bad = poisoned
    client = s3_bucket.client()
    for path in ds.iterdir():
        client.put_object(Bucket=s3_bucket.name, Key=f"ds/{path.name}", Body=path.read_bytes())
    url = f"{s3_bucket.url}/ds"
    before = _snapshot(tmp_path)
    if command == "loader":
        with pytest.raises(DataError, match="not a plain relative path"):
            StreamingDataset(remote=url, local=str(tmp_path / "cache"), batch_size=2)
        before["cache/index.json"] = _snapshot(tmp_path)["cache/index.json"]
    else:
        with pytest.raises(SystemExit) as exit_:
            main(["dataset", command, url])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and repr(bad) in err and f"{url}/index.json" in err, err
    _assert_untouched(tmp_path, before)
    assert victim.read_bytes() == VICTIM
