"""Names from a remote listing never reach the file system unchecked (issue 15.1).

Real S3 keeps keys as given, so `s3://b/ds//tmp/x/victim` lists as `/tmp/x/victim` below `ds`, and
`a/../../x` stays literal. SeaweedFS and fake-gcs-server normalise such keys away, so this test's
store lists what S3 would: a folder store with two such keys added to its listing.
"""

from __future__ import annotations

import pytest

from foundry.app.cli.main import main
from foundry.backends.storage.file import FileStore
from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.manager import register_plugin, unregister_plugin
from foundry.plugins.storage import ObjectInfo, StorageURL

ESCAPING: list[str] = []


class S3LikeListing(FileStore):
    @classmethod
    def from_url(cls, url, options=None):
        return cls("/" + StorageURL.parse(url).prefix)

    def list(self, prefix=""):
        return iter(sorted([*super().list(prefix), *(ObjectInfo(k, 11) for k in ESCAPING)], key=lambda o: o.key))


class _Plugin:
    @hookimpl
    def register_storage(self, register):
        register("s3like", S3LikeListing)


@pytest.fixture
def s3like():
    name = register_plugin(_Plugin(), name="s3-like-listing")
    try:
        yield
    finally:
        unregister_plugin(name)
        ESCAPING.clear()


def _run(capsys, *args):
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    return code, capsys.readouterr().err


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_cp_and_rm_refuse_a_listed_key_that_escapes(capsys, s3like, tmp_path, kind):
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    (bucket / "ok.txt").write_text("fine")
    ESCAPING.append(str(victim) if kind == "absolute" else "sub/../../victim.txt")
    code, err = _run(capsys, "cp", "-r", f"s3like://x{bucket}", str(tmp_path / "down"))
    assert code == 2 and "escapes the store root" in err and repr(ESCAPING[0]) in err, err
    assert victim.read_text() == "do not touch" and not (tmp_path / "down").exists()
    code, err = _run(capsys, "rm", "-r", f"s3like://x{bucket}")
    assert code == 2 and "escapes the store root" in err, err
    assert (bucket / "ok.txt").exists() and victim.read_text() == "do not touch"
