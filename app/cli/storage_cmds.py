"""`foundry ls`, `foundry cp`, `foundry rm`: objects in any store, addressed by URL or local path.

Every URL is resolved to a store (and checked) before anything is read or written, so a malformed
URL, an unknown scheme or a bad option fails with one line and exit code 2 and leaves nothing behind.
Downloads land atomically; progress bars appear only on a terminal and never with --json.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import typer

from foundry.plugins.errors import ConfigError, ObjectNotFoundError
from foundry.plugins.manager import open_store
from foundry.plugins.storage import StorageURL, check_key, list_one_level, split_parent

from .output import sink

_FILE_WORKERS = 4


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)
    app.command("cp")(cp)
    app.command("rm")(rm)


# -- resolving URLs ------------------------------------------------------------------------------


def _is_local(url: str) -> bool:
    return StorageURL.parse(url).scheme == "file"


def _folder(url: str):
    """The store rooted at `url` (objects below it are its keys)."""
    return open_store(url)


def _object(url: str) -> tuple[Any, str]:
    """(store of the parent, name) for a URL naming one object."""
    parsed = StorageURL.parse(url)
    if parsed.scheme == "file":
        path = Path(parsed.prefix)
        if not path.name:
            raise ConfigError(f"{url!r} names no file", hint="give the path of a file")
        return open_store(str(path.parent)), path.name
    parent, name = split_parent(url)
    return open_store(parent), name


def _display(url: str) -> str:
    return url if "://" in url else str(Path(url).expanduser().absolute())


# -- ls ------------------------------------------------------------------------------------------


def ls(
    url: str = typer.Argument(..., help="A URL (s3://bucket/prefix, gs://..., a local folder)."),
    recursive: bool = typer.Option(False, "-r", "--recursive", help="List every object below, not one level."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List objects below URL (one level unless -r), or the object URL names."""
    sink.json_mode = sink.json_mode or json_out
    store = _folder(url)
    rows: list[dict[str, Any]] = []
    if recursive:
        objects = list(store.list())
    else:  # a native one-level listing: a folder never pages everything below it
        listing = list_one_level(store)
        rows += [{"key": p, "size": None, "modified": None, "url": store.child_url(p)} for p in listing.prefixes]
        objects = listing.objects
    rows += [{"key": o.key, "size": o.size, "modified": _iso(o.modified), "url": store.child_url(o.key)}
             for o in objects]
    rows.sort(key=lambda row: row["key"])
    if not rows and "://" in url and StorageURL.parse(url).prefix:
        parent, name = _object(url)
        with contextlib.suppress(ObjectNotFoundError):
            info = parent.head(name)
            rows.append({"key": name, "size": info.size, "modified": _iso(info.modified), "url": parent.child_url(name)})
    sink.emit(rows, columns=["key", "size", "modified"])


def _iso(ts: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts else None


# -- cp ------------------------------------------------------------------------------------------


@dataclass
class CopyJob:
    src_store: Any
    src_key: str
    dst_store: Any
    dst_key: str
    size: int


def plan_copy(src: str, dst: str, recursive: bool) -> list[CopyJob]:
    """Resolve SRC and DST to (store, key) pairs; raises before anything is written."""
    parsed_dst = StorageURL.parse(dst)
    dst_is_dir = (dst.endswith("/") or (_is_local(dst) and Path(parsed_dst.prefix).is_dir())
                  or (parsed_dst.scheme != "file" and not parsed_dst.prefix))
    if recursive:
        folder = _folder(src)
        dst_folder = _folder(dst)
        jobs = [CopyJob(folder, o.key, dst_folder, o.key, o.size) for o in folder.list()]
        for job in jobs:  # listed names are data: all checked before the first byte is written
            check_key(job.dst_key, job.dst_store.url)
        if jobs:
            return jobs
    src_store, src_key = _object(src)
    if dst_is_dir:
        dst_store, dst_key = _folder(dst), src_key
    else:
        dst_store, dst_key = _object(dst)
    try:
        size = src_store.head(src_key).size
    except ObjectNotFoundError:
        if not recursive and list(_folder(src).list()):
            raise ConfigError(f"{src} is a folder or prefix", hint="add -r to copy everything below it") from None
        raise
    return [CopyJob(src_store, src_key, dst_store, dst_key, size)]


def _copy_one(job: CopyJob, progress) -> None:
    src_local = StorageURL.parse(job.src_store.url).scheme == "file"
    dst_local = StorageURL.parse(job.dst_store.url).scheme == "file"
    if src_local:
        path = Path(StorageURL.parse(job.src_store.url).prefix, job.src_key)
        job.dst_store.put_file(job.dst_key, path, progress=progress)
    elif dst_local:
        path = Path(StorageURL.parse(job.dst_store.url).prefix, job.dst_key)
        job.src_store.get_file(job.src_key, path, progress=progress)
    else:  # remote to remote, through a temporary file (bounded memory)
        with tempfile.TemporaryDirectory(prefix="foundry-cp-") as tmp:
            path = Path(tmp, "object")
            job.src_store.get_file(job.src_key, path)
            job.dst_store.put_file(job.dst_key, path, progress=progress)


@contextlib.contextmanager
def _progress(total: int, count: int) -> Iterator[Any]:
    if not sink.interactive:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    columns = ("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=sink.err, transient=True) as bar:
        task = bar.add_task(f"{count} file{'s' if count != 1 else ''}", total=total)
        yield lambda n: bar.advance(task, n)


def cp(
    src: str = typer.Argument(..., help="Source: a local path or a URL."),
    dst: str = typer.Argument(..., help="Destination: a local path or a URL (a trailing / means a folder)."),
    recursive: bool = typer.Option(False, "-r", "--recursive", help="Copy every object below SRC."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Copy objects between local folders and object stores, in either direction."""
    sink.json_mode = sink.json_mode or json_out
    started = time.monotonic()
    jobs = plan_copy(src, dst, recursive)
    total = sum(j.size for j in jobs)
    with _progress(total, len(jobs)) as advance:
        if len(jobs) == 1:
            _copy_one(jobs[0], advance)
        else:
            with ThreadPoolExecutor(_FILE_WORKERS, thread_name_prefix="foundry-cp") as pool:
                for future in [pool.submit(_copy_one, job, advance) for job in jobs]:
                    future.result()
    seconds = time.monotonic() - started
    summary = {"source": _display(src), "destination": _display(dst), "files": len(jobs), "bytes": total,
               "seconds": round(seconds, 3)}
    if sink.json_mode:
        sink.emit(summary)
    else:
        sink.info(f"copied {len(jobs)} file{'s' if len(jobs) != 1 else ''} ({total:,} bytes) in {seconds:.2f} s")


# -- rm ------------------------------------------------------------------------------------------


def rm(
    url: str = typer.Argument(..., help="The object (or, with -r, the prefix or folder) to delete."),
    recursive: bool = typer.Option(False, "-r", "--recursive", help="Delete every object below URL."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Delete one object, or everything below a prefix with -r."""
    sink.json_mode = sink.json_mode or json_out
    if recursive:
        store = _folder(url)
        keys = [check_key(o.key, store.url) for o in store.list()]  # before the first delete
        if hasattr(store, "delete_many"):
            store.delete_many(keys)
        else:
            with ThreadPoolExecutor(_FILE_WORKERS) as pool:
                list(pool.map(store.delete, keys))
        deleted = len(keys)
    else:
        store, key = _object(url)
        store.head(key)  # a missing object is an error, not a silent success
        store.delete(key)
        deleted = 1
    if sink.json_mode:
        sink.emit({"url": _display(url), "deleted": deleted})
    else:
        sink.info(f"deleted {deleted} object{'s' if deleted != 1 else ''}")
