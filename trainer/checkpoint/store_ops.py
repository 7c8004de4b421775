"""Checkpoints in an ObjectStore: upload + verify + publish, list, verify-download, prune.

Publishing order (why `latest` never points at a partial checkpoint): upload every data file,
verify each in the store (size from `head`; checksum from the store's MD5 ETag when it has a plain
one, otherwise by reading the object back), then the manifest (verified the same way), and only
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

from .format import LATEST, MANIFEST, FileEntry, Manifest, digest_file, parse_name, parse_pointer, pointer_bytes

log = logging.getLogger("foundry.trainer.checkpoint")


def upload_files(store, name: str, local_files: list[tuple[Path, FileEntry]]) -> list[str]:
    """Upload and verify each file (see verify_object: against the local file, no read-back when
    the store's ETag can be recomputed from it); returns the keys verified, for `publish`."""
    for path, entry in local_files:
        store.put_file(f"{name}/{entry.key}", path)
        verify_object(store, f"{name}/{entry.key}", entry, local=path)
    return [entry.key for _, entry in local_files]


def multipart_etag(path: Path, size: int, part_size: int) -> tuple[str, str]:
    """(S3's ETag of a multipart upload of `path` in `part_size` parts: md5 of the parts' md5s
    and "-N"; the md5 of the whole file), in one read."""
    digests, whole = [], hashlib.md5()
    with open(path, "rb") as f:
        for _ in range(0, size, part_size):
            part, left = hashlib.md5(), part_size
            while left and (chunk := f.read(min(left, 4 << 20))):
                part.update(chunk)
                whole.update(chunk)
                left -= len(chunk)
            digests.append(part.digest())
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}", whole.hexdigest()


def _matches_local_parts(store, etag: str, entry: FileEntry, local: Path | None) -> bool:
    """True when `etag` is the multipart ETag of `local` uploaded in the store's part size and
    `local` is the file `entry` describes (same size and md5). Anything else (another store's
    ETag kind, another part size, no local file): False, and the caller reads the object back."""
    transfer = getattr(store, "transfer", None)
    count = etag.rpartition("-")[2]
    if local is None or transfer is None or not count.isdigit() or len(etag.partition("-")[0]) != 32:
        return False
    part_size = transfer.part_size_for(entry.size)
    if int(count) != -(-entry.size // part_size) or not local.is_file() or local.stat().st_size != entry.size:
        return False
    parts, whole = multipart_etag(local, entry.size, part_size)
    return parts == etag and whole == entry.md5  # and the local file is still what the manifest says


def verify_object(store, key: str, entry: FileEntry, local: Path | None = None) -> None:
    """Check the object at `key` is `entry`: its size, then its MD5 ETag; a multipart ETag is
    recomputed from `local` (the file just uploaded) when there is one, else the object is read
    back and its sha256 compared."""
    try:
        info = store.head(key)
    except ObjectNotFoundError:
        raise CheckpointError(f"checkpoint file {store.child_url(key)} is missing") from None
    if info.size != entry.size:
        raise CheckpointError(f"checkpoint file {store.child_url(key)} has {info.size} bytes, expected {entry.size}")
    etag = (info.etag or "").strip('"').lower()
    if len(etag) == 32 and "-" not in etag:
        if etag != entry.md5:
            raise CheckpointError(f"checkpoint file {store.child_url(key)} has the wrong checksum (md5)")
        return
    if _matches_local_parts(store, etag, entry, local):
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
            store.get_file(f"{name}/{entry.key}", path)
        except ObjectNotFoundError:
            raise CheckpointError(f"checkpoint file {store.child_url(name + '/' + entry.key)} is missing") from None
        got = digest_file(path, entry.key, md5=False)
        if (got.size, got.sha256) != (entry.size, entry.sha256):
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
