"""Checkpoints in an ObjectStore: upload + verify + publish, list, verify-download, prune.

Publishing order (why `latest` never points at a partial checkpoint): upload every data file,
hashing it as it is sent, verify each in the store (size from `head`; checksum from the store's
ETag: the file's md5, or the md5 of the parts' md5s sent; otherwise by reading the object back), then the manifest (verified the same way), and only
then the small `latest` pointer, in one atomic put. A kill before the pointer leaves `latest` on the
previous checkpoint; loading re-checks every file's sha256 and falls back to older complete ones.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from foundry.plugins.errors import CheckpointError, ObjectNotFoundError, StorageError
from foundry.plugins.part_digests import digesting

from .format import LATEST, MANIFEST, FileEntry, Manifest, digest_file, parse_name, parse_pointer, pointer_bytes

log = logging.getLogger("foundry.trainer.checkpoint")


def upload_files(store, name: str, local_files: list[tuple[Path, str]]) -> list[tuple[Path, FileEntry]]:
    """Upload each (local file, key), hashing it in the upload's own pass over the file
    (plugins/part_digests.py), and verify it in the store (verify_object); returns the manifest
    entries, every one verified (for `publish`). A store whose transfer hashes nothing (a local
    folder) gets the file hashed here, once."""
    out = []
    for path, key in local_files:
        with digesting(part_md5=True) as digests:
            store.put_file(f"{name}/{key}", path)
        size = path.stat().st_size
        if digests.size == size:
            # md5 of the whole file only where a store compares it: an object sent in one request
            md5 = digests.multipart_etag() if len(digests.part_md5s) == 1 else ""
            entry, parts_etag = FileEntry(key, size, digests.sha256, md5), digests.multipart_etag()
        else:
            entry, parts_etag = digest_file(path, key), None
        verify_object(store, f"{name}/{key}", entry, parts_etag=parts_etag)
        out.append((path, entry))
    return out


def verify_object(store, key: str, entry: FileEntry, parts_etag: str | None = None) -> None:
    """Check the object at `key` is `entry`: its size, then its ETag: the md5 of the whole file
    (`entry.md5`) for a plain one, `parts_etag` (what the upload computed from the parts it sent:
    PartDigests.multipart_etag) for a multipart one; anything else (another store's ETag kind, no
    digests) reads the object back and compares its sha256."""
    try:
        info = store.head(key)
    except ObjectNotFoundError:
        raise CheckpointError(f"checkpoint file {store.child_url(key)} is missing") from None
    if info.size != entry.size:
        raise CheckpointError(f"checkpoint file {store.child_url(key)} has {info.size} bytes, expected {entry.size}")
    etag = (info.etag or "").strip('"').lower()
    if len(etag) == 32 and "-" not in etag and entry.md5:
        if etag != entry.md5:
            raise CheckpointError(f"checkpoint file {store.child_url(key)} has the wrong checksum (md5)")
        return
    if parts_etag and etag == parts_etag:
        return
    with tempfile.TemporaryDirectory(prefix="foundry-verify-") as tmp:
        local = Path(tmp) / "obj"
        store.get_file(key, local)
        if digest_file(local, md5=False).sha256 != entry.sha256:
            raise CheckpointError(f"checkpoint file {store.child_url(key)} has the wrong checksum (sha256)")


def publish(store, manifest: Manifest, verified: tuple[str, ...] | list[str] = ()) -> None:
    """Verify every file of `manifest` in the store (except the keys in `verified`, which
    upload_files already checked), write the manifest, then the pointer."""
    for entry in manifest.files:
        if entry.key in verified:
            continue
        verify_object(store, f"{manifest.name}/{entry.key}", entry)
    data = manifest.to_bytes()
    key = f"{manifest.name}/{MANIFEST}"
    store.put(key, data)
    if store.get(key) != data:
        raise CheckpointError(f"checkpoint manifest {store.child_url(key)} did not read back intact")
    store.put(LATEST, pointer_bytes(manifest.name, data))


@dataclass
class CheckpointEntry:
    name: str
    epoch: int
    batch: int
    complete: bool  # has a manifest
    latest: bool
    size: int
    files: int


def read_latest(store) -> dict | None:
    try:
        return parse_pointer(store.get(LATEST))
    except ObjectNotFoundError:
        return None


def list_checkpoints(store) -> list[CheckpointEntry]:
    """Every checkpoint folder in the store (complete or not), oldest first."""
    groups: dict[str, list] = {}
    for info in store.list(""):
        head, sep, _ = info.key.partition("/")
        if sep and parse_name(head):
            groups.setdefault(head, []).append(info)
    pointer = read_latest(store)
    latest = pointer["checkpoint"] if pointer else None
    out = []
    for name, infos in groups.items():
        epoch, batch = parse_name(name)  # type: ignore[misc]
        complete = any(i.key == f"{name}/{MANIFEST}" for i in infos)
        out.append(CheckpointEntry(name, epoch, batch, complete, name == latest,
                                   sum(i.size for i in infos), len(infos)))
    return sorted(out, key=lambda e: (e.batch, e.epoch))


def read_manifest(store, name: str) -> Manifest:
    try:
        return Manifest.from_bytes(store.get(f"{name}/{MANIFEST}"), store.child_url(f"{name}/{MANIFEST}"))
    except ObjectNotFoundError:
        raise CheckpointError(f"{store.child_url(name)} is not a complete checkpoint (no {MANIFEST})") from None


def download_verified(store, name: str, dest: Path, expected_manifest_sha: str | None = None) -> Manifest:
    """Download checkpoint `name` into `dest`, checking the manifest and every file's sha256."""
    try:
        raw = store.get(f"{name}/{MANIFEST}")
    except ObjectNotFoundError:
        raise CheckpointError(f"{store.child_url(name)} is not a complete checkpoint (no {MANIFEST})") from None
    if expected_manifest_sha and hashlib.sha256(raw).hexdigest() != expected_manifest_sha:
        raise CheckpointError(f"manifest of {store.child_url(name)} does not match the `latest` pointer")
    manifest = Manifest.from_bytes(raw, store.child_url(f"{name}/{MANIFEST}"))
    dest.mkdir(parents=True, exist_ok=True)
    for entry in manifest.files:
        path = dest / entry.key
        try:
            with digesting() as digests:  # the sha256 of the bytes as they arrive, not a re-read
                store.get_file(f"{name}/{entry.key}", path)
        except ObjectNotFoundError:
            raise CheckpointError(f"checkpoint file {store.child_url(name + '/' + entry.key)} is missing") from None
        size = path.stat().st_size
        sha256 = digests.sha256 if digests.size == size else digest_file(path, entry.key, md5=False).sha256
        if (size, sha256) != (entry.size, entry.sha256):
            raise CheckpointError(f"checkpoint file {store.child_url(name + '/' + entry.key)} is corrupt "
                                  "(size or sha256 differs from the manifest)")
    return manifest


def load_candidates(store) -> list[tuple[str, str | None]]:
    """(name, expected manifest sha) to try in order: `latest`, then complete ones newest first."""
    pointer = read_latest(store)
    first = [(pointer["checkpoint"], pointer.get("manifest_sha256"))] if pointer else []
    others = [(e.name, None) for e in reversed(list_checkpoints(store))
              if e.complete and (not pointer or e.name != pointer["checkpoint"])]
    if pointer:  # never fall forward past `latest` onto a checkpoint it did not vouch for
        latest_batch = parse_name(pointer["checkpoint"])
        others = [(n, s) for n, s in others if latest_batch is None or parse_name(n)[1] <= latest_batch[1]]
    return first + others


def download_loadable(store, dest_root: Path) -> tuple[Manifest, Path] | None:
    """The newest checkpoint that verifies, downloaded under dest_root; warns about each fallback."""
    candidates = load_candidates(store)
    for i, (name, sha) in enumerate(candidates):
        dest = dest_root / name
        try:
            return download_verified(store, name, dest, sha), dest
        except (CheckpointError, StorageError) as exc:
            if i == len(candidates) - 1:  # the caller says what that means (loader.download)
                log.warning("checkpoint %s is not loadable (%s)", store.child_url(name), exc)
                continue
            log.warning("checkpoint %s is not loadable (%s); falling back to the previous one",
                        store.child_url(name), exc)
            import warnings

            warnings.warn(f"checkpoint {store.child_url(name)} is not loadable ({exc}); "
                          "falling back to the previous complete checkpoint", stacklevel=2)
    return None


def prune(store, keep: int, protect: str) -> list[str]:
    """Delete the oldest checkpoints so at most `keep` complete ones remain (never `protect`);
    incomplete leftovers older than `protect` (from a kill during upload) go too."""
    if keep is None or keep < 0:
        return []
    entries = list_checkpoints(store)
    protect_batch = parse_name(protect)[1] if parse_name(protect) else None
    complete = [e for e in entries if e.complete]
    doomed = [e.name for e in complete[: max(0, len(complete) - keep)] if e.name != protect]
    doomed += [e.name for e in entries if not e.complete and protect_batch is not None and e.batch < protect_batch]
    for name in doomed:
        # manifest first: a half-deleted checkpoint is then "incomplete", never "complete but broken"
        store.delete(f"{name}/{MANIFEST}")
        for info in list(store.list(f"{name}/")):
            store.delete(info.key)
    return doomed
