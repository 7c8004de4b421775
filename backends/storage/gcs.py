"""Google Cloud Storage: `gs://bucket/prefix` through google-cloud-storage (imported lazily).

Honours STORAGE_EMULATOR_HOST (fake-gcs-server, with anonymous credentials). Options: endpoint_url,
project, credentials_file, anonymous, timeout, attempts/retry_*, part_size, concurrency,
multipart_threshold. The library's own retries are off (retry=None): our RetryPolicy counts (docs/storage.md).
Large uploads go as parallel parts composed into the final object (GCS "parallel composite upload").
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from foundry.plugins.errors import ConfigError, FoundryError
from foundry.plugins.retry import call_with_retries
from foundry.plugins.storage import ObjectInfo, ProgressCallback, StorageURL, check_key, join_key

from . import gcs_errors
from .remote import RemoteStore
from .request_gate import RequestGate
from .sdk_check import require_sdk
from .transfer import (
    TransferConfig,
    parallel_upload_parts,
    retry_policy_from,
    run_parallel,
)

T = TypeVar("T")
_clients: dict[tuple, Any] = {}
_lock = threading.Lock()
_COMPOSE_MAX = 32


def _client(endpoint: str | None, project: str | None, credentials_file: str | None, anonymous: bool):
    key = (os.getpid(), endpoint, project, credentials_file, anonymous)
    with _lock:
        if key not in _clients:
            from google.cloud import storage

            kwargs: dict[str, Any] = {"project": project}
            if anonymous:
                from google.auth.credentials import AnonymousCredentials

                kwargs["credentials"] = AnonymousCredentials()
                kwargs["project"] = project or "foundry"
            elif credentials_file:
                from google.oauth2 import service_account

                kwargs["credentials"] = service_account.Credentials.from_service_account_file(credentials_file)
            if endpoint:
                kwargs["client_options"] = {"api_endpoint": endpoint}
            _clients[key] = storage.Client(**kwargs)
        return _clients[key]


class GCSStore(RemoteStore):
    scheme = "gs"

    def __init__(self, bucket: str, prefix: str, options: dict[str, Any] | None = None,
                 environ: dict[str, str] | None = None):
        options = options or {}
        env = os.environ if environ is None else environ
        self.bucket_name = bucket
        self.prefix = prefix.strip("/")
        self.url = f"gs://{bucket}/{self.prefix}" if self.prefix else f"gs://{bucket}"
        emulator = env.get("STORAGE_EMULATOR_HOST")
        if emulator and "://" not in emulator:
            emulator = "http://" + emulator
        self.endpoint = options.get("endpoint_url") or emulator or None
        self.anonymous = bool(options.get("anonymous", bool(emulator) and not options.get("credentials_file")))
        self.project = options.get("project") or env.get("GOOGLE_CLOUD_PROJECT") or None
        self.credentials_file = options.get("credentials_file")
        self.timeout = float(options.get("timeout", 60.0))
        self.policy = retry_policy_from(options)
        self.transfer = TransferConfig.from_options(options)
        self.download_gate = RequestGate(self.transfer.concurrency)
        self._bucket = None

    @classmethod
    def from_url(cls, url: str, options: dict[str, Any] | None = None) -> "GCSStore":
        require_sdk("google.cloud.storage", "gs", "gcp")
        parsed = StorageURL.parse(url)
        if parsed.scheme != "gs":
            raise ConfigError(f"{url!r} is not a gs:// URL")
        return cls(parsed.bucket, parsed.prefix, dict(options or {}))

    @property
    def bucket(self):
        if self._bucket is None:
            try:
                client = _client(self.endpoint, self.project, self.credentials_file, self.anonymous)
            except Exception as exc:
                raise gcs_errors.translate(exc, self.url, self.endpoint) from exc
            self._bucket = client.bucket(self.bucket_name)
        return self._bucket

    def _key(self, key: str) -> str:
        return join_key(self.prefix, check_key(key, self.url))

    def _call(self, key: str, fn: Callable[[], T]) -> T:
        url = self.child_url(key)
        try:
            return call_with_retries(fn, policy=self.policy, is_transient=gcs_errors.is_transient,
                                     on_give_up=gcs_errors.give_up(url, self.endpoint))
        except FoundryError:
            raise
        except Exception as exc:
            raise gcs_errors.translate(exc, url, self.endpoint) from exc

    def _blob(self, key: str):
        return self.bucket.blob(self._key(key))

    # -- reads ---------------------------------------------------------------------------------

    def _get_whole(self, key: str) -> bytes:
        return self._call(key, lambda: self._blob(key).download_as_bytes(retry=None, timeout=self.timeout))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""

        def fetch() -> bytes:
            from google.api_core.exceptions import RequestRangeNotSatisfiable

            try:
                return self._blob(key).download_as_bytes(start=start, end=end - 1, retry=None,
                                                         timeout=self.timeout, checksum=None)
            except RequestRangeNotSatisfiable:
                return b""

        return self._call(key, fetch)

    def _range_exact(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        from .remote import TruncatedRead

        def fetch() -> bytes:
            data = self._blob(key).download_as_bytes(start=start, end=end - 1, retry=None,
                                                     timeout=self.timeout, checksum=None)
            if len(data) != end - start:
                raise TruncatedRead(f"range {start}-{end} returned {len(data)} bytes")
            return data

        return self._call(key, fetch)

    def head(self, key: str) -> ObjectInfo:
        def reload():
            blob = self._blob(key)
            blob.reload(retry=None, timeout=self.timeout)
            return blob

        blob = self._call(key, reload)
        return ObjectInfo(key.lstrip("/"), int(blob.size or 0), blob.etag,
                          blob.updated.timestamp() if blob.updated else None)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        full_prefix, strip = self._list_prefix(prefix)

        def fetch_all() -> list:
            blobs = self.bucket.client.list_blobs(self.bucket_name, prefix=full_prefix or None,
                                                  retry=None, timeout=self.timeout)
            return [ObjectInfo(b.name[strip:], int(b.size or 0), b.etag, b.updated.timestamp() if b.updated else None)
                    for b in blobs]

        return iter(sorted(self._call(prefix, fetch_all), key=lambda o: o.key))

    def _list_level(self, full_prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        def fetch_level() -> tuple[list[str], list[ObjectInfo]]:
            pages = self.bucket.client.list_blobs(self.bucket_name, prefix=full_prefix or None, delimiter="/",
                                                  retry=None, timeout=self.timeout)
            objects = [ObjectInfo(b.name, int(b.size or 0), b.etag, b.updated.timestamp() if b.updated else None)
                       for b in pages]  # iterating every page also collects the prefixes
            return sorted(pages.prefixes), objects

        return self._call(full_prefix, fetch_level)

    # -- writes --------------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> None:
        self._call(key, lambda: self._blob(key).upload_from_string(bytes(data), retry=None, timeout=self.timeout))

    def put_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        size = Path(path).stat().st_size
        if self._put_small_file(key, path, size, progress):
            return
        staging = f"{key}.foundry-parts-{uuid.uuid4().hex[:12]}"
        written: list[str] = []

        def upload(number: int, data: bytes) -> str:
            part = f"{staging}/{number:05d}"
            self.put(part, data)
            written.append(part)
            return part

        try:
            parts = parallel_upload_parts(path, size, upload, self.transfer, progress)
            self._compose(key, parts, staging, written)
        finally:
            run_parallel(list(written), self.delete, self.transfer.concurrency)

    def _compose(self, key: str, parts: list[str], staging: str, written: list[str]) -> None:
        """Compose `parts` into `key`, 32 at a time (intermediate objects for more than 32)."""
        level = 0
        while len(parts) > _COMPOSE_MAX:
            groups = [parts[i:i + _COMPOSE_MAX] for i in range(0, len(parts), _COMPOSE_MAX)]
            names = [f"{staging}/c{level}-{n:05d}" for n in range(len(groups))]
            written.extend(names)
            run_parallel(list(zip(names, groups)), lambda ng: self._compose_one(ng[0], ng[1]), self.transfer.concurrency)
            parts, level = names, level + 1
        self._compose_one(key, parts)

    def _compose_one(self, key: str, parts: list[str]) -> None:
        sources = [self._blob(p) for p in parts]
        self._call(key, lambda: self._blob(key).compose(sources, retry=None, timeout=self.timeout))

    def delete(self, key: str) -> None:
        from google.api_core.exceptions import NotFound

        def remove() -> None:
            try:
                self._blob(key).delete(retry=None, timeout=self.timeout)
            except NotFound as exc:
                if "bucket" in str(exc).lower() and "object" not in str(exc).lower():
                    raise
        self._call(key, remove)
