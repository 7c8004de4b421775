"""Oracle Cloud Object Storage: `oci://bucket@namespace/prefix` through the oci SDK (imported lazily).

Credentials: the options `config_file` / `profile` (default ~/.oci/config, DEFAULT), or explicit
`user`, `tenancy`, `fingerprint`, `key_file` or `key_content`, `region`. `endpoint_url` overrides
the regional endpoint. The SDK's own retries are off; our RetryPolicy counts (docs/storage.md).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from foundry.plugins.errors import ConfigError, CredentialsError, FoundryError
from foundry.plugins.retry import call_with_retries
from foundry.plugins.storage import ObjectInfo, ProgressCallback, StorageURL, check_key, join_key

from . import oci_errors
from .remote import RemoteStore, TruncatedRead
from .request_gate import RequestGate
from .sdk_check import require_sdk
from .transfer import TransferConfig, parallel_upload_parts, retry_policy_from

T = TypeVar("T")
_clients: dict[tuple, Any] = {}
_lock = threading.Lock()
_CONFIG_KEYS = ("user", "tenancy", "fingerprint", "key_file", "key_content", "region", "pass_phrase")


def _client(config_items: tuple, endpoint: str | None, timeout: tuple[float, float]):
    key = (os.getpid(), config_items, endpoint, timeout)
    with _lock:
        if key not in _clients:
            import oci

            config = dict(config_items)
            oci.config.validate_config(config)
            kwargs: dict[str, Any] = {"retry_strategy": oci.retry.NoneRetryStrategy(), "timeout": timeout}
            if endpoint:
                kwargs["service_endpoint"] = endpoint
            _clients[key] = oci.object_storage.ObjectStorageClient(config, **kwargs)
        return _clients[key]


class OCIStore(RemoteStore):
    scheme = "oci"

    def __init__(self, bucket: str, namespace: str, prefix: str, options: dict[str, Any] | None = None):
        self.options = dict(options or {})
        self.bucket = bucket
        self.namespace = namespace
        self.prefix = prefix.strip("/")
        root = f"oci://{bucket}@{namespace}"
        self.url = f"{root}/{self.prefix}" if self.prefix else root
        self.endpoint = self.options.get("endpoint_url")
        self.timeout = (float(self.options.get("connect_timeout", 10.0)), float(self.options.get("read_timeout", 60.0)))
        self.policy = retry_policy_from(self.options)
        self.transfer = TransferConfig.from_options(self.options)
        self.download_gate = RequestGate(self.transfer.concurrency)
        self._client = None

    @classmethod
    def from_url(cls, url: str, options: dict[str, Any] | None = None) -> "OCIStore":
        require_sdk("oci", "oci", "oci")
        parsed = StorageURL.parse(url)
        bucket, at, namespace = parsed.bucket.partition("@")
        if parsed.scheme != "oci" or not at or not bucket or not namespace:
            raise ConfigError(f"malformed OCI URL {url!r}", hint="expected oci://BUCKET@NAMESPACE/KEY")
        return cls(bucket, namespace, parsed.prefix, options)

    @property
    def client(self):
        if self._client is None:
            try:
                self._client = _client(self._config_items(), self.endpoint, self.timeout)
            except FoundryError:
                raise
            except Exception as exc:
                raise oci_errors.translate(exc, self.url) from exc
        return self._client

    def _config_items(self) -> tuple:
        explicit = {k: self.options[k] for k in _CONFIG_KEYS if self.options.get(k)}
        if {"user", "tenancy", "fingerprint", "region"} <= explicit.keys():
            return tuple(sorted(explicit.items()))
        import oci

        path = self.options.get("config_file") or os.path.expanduser("~/.oci/config")
        profile = self.options.get("profile") or "DEFAULT"
        if not Path(path).exists():
            raise CredentialsError(f"no credentials for {self.url}: {path} does not exist", hint=oci_errors.CREDENTIALS_HINT)
        config = oci.config.from_file(path, profile)
        config.update(explicit)
        return tuple(sorted((k, v) for k, v in config.items() if isinstance(v, (str, int, float, bool))))

    def _key(self, key: str) -> str:
        return join_key(self.prefix, check_key(key, self.url))

    def _call(self, key: str, fn: Callable[[], T]) -> T:
        url = self.child_url(key)
        try:
            return call_with_retries(fn, policy=self.policy, is_transient=oci_errors.is_transient,
                                     on_give_up=oci_errors.give_up(url))
        except FoundryError:
            raise
        except Exception as exc:
            raise oci_errors.translate(exc, url) from exc

    def _read(self, response, expected: int | None = None) -> bytes:
        data = response.data.content
        length = response.headers.get("content-length")
        if expected is None and length is not None:
            expected = int(length)
        if expected is not None and len(data) != expected:
            raise TruncatedRead(f"got {len(data)} of {expected} bytes")
        return data

    # -- reads ---------------------------------------------------------------------------------

    def _get_whole(self, key: str) -> bytes:
        full = self._key(key)
        return self._call(key, lambda: self._read(self.client.get_object(self.namespace, self.bucket, full)))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        full = self._key(key)

        def fetch() -> bytes:
            from oci.exceptions import ServiceError

            try:
                response = self.client.get_object(self.namespace, self.bucket, full, range=f"bytes={start}-{end - 1}")
            except ServiceError as exc:
                if exc.status == 416:
                    return b""
                raise
            return self._read(response)

        return self._call(key, fetch)

    def _range_exact(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        full = self._key(key)
        conditional = {"if_match": etag} if etag else {}
        return self._call(key, lambda: self._read(self.client.get_object(
            self.namespace, self.bucket, full, range=f"bytes={start}-{end - 1}", **conditional), end - start))

    def head(self, key: str) -> ObjectInfo:
        full = self._key(key)
        response = self._call(key, lambda: self.client.head_object(self.namespace, self.bucket, full))
        headers = response.headers
        return ObjectInfo(key.lstrip("/"), int(headers.get("content-length", 0)), headers.get("etag"), None)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        full_prefix, strip = self._list_prefix(prefix)
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"prefix": full_prefix or None, "fields": "name,size,etag,timeModified"}
            if start:
                kwargs["start"] = start
            page = self._call(prefix, lambda: self.client.list_objects(self.namespace, self.bucket, **kwargs)).data
            for obj in page.objects or []:
                modified = obj.time_modified.timestamp() if obj.time_modified else None
                yield ObjectInfo(obj.name[strip:], int(obj.size or 0), obj.etag, modified)
            start = page.next_start_with
            if not start:
                return

    def _list_level(self, full_prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        prefixes: list[str] = []
        objects: list[ObjectInfo] = []
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"prefix": full_prefix or None, "delimiter": "/",
                                      "fields": "name,size,etag,timeModified"}
            if start:
                kwargs["start"] = start
            page = self._call(full_prefix, lambda: self.client.list_objects(self.namespace, self.bucket, **kwargs)).data
            prefixes += page.prefixes or []
            for obj in page.objects or []:
                modified = obj.time_modified.timestamp() if obj.time_modified else None
                objects.append(ObjectInfo(obj.name, int(obj.size or 0), obj.etag, modified))
            start = page.next_start_with
            if not start:
                return prefixes, objects

    # -- writes --------------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> None:
        full = self._key(key)
        self._call(key, lambda: self.client.put_object(self.namespace, self.bucket, full, bytes(data)))

    def put_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        size = Path(path).stat().st_size
        if self._put_small_file(key, path, size, progress):
            return
        from oci.object_storage import models

        full = self._key(key)
        created = self._call(key, lambda: self.client.create_multipart_upload(
            self.namespace, self.bucket, models.CreateMultipartUploadDetails(object=full)))
        upload_id = created.data.upload_id

        def upload(number: int, data: bytes):
            response = self._call(key, lambda: self.client.upload_part(
                self.namespace, self.bucket, full, upload_id, number, data))
            return models.CommitMultipartUploadPartDetails(part_num=number, etag=response.headers.get("etag"))

        try:
            parts = parallel_upload_parts(path, size, upload, self.transfer, progress)
            details = models.CommitMultipartUploadDetails(parts_to_commit=parts)
            self._call(key, lambda: self.client.commit_multipart_upload(self.namespace, self.bucket, full, upload_id, details))
        except BaseException:
            try:
                self.client.abort_multipart_upload(self.namespace, self.bucket, full, upload_id)
            except Exception:
                pass
            raise

    def delete(self, key: str) -> None:
        full = self._key(key)

        def remove() -> None:
            from oci.exceptions import ServiceError

            try:
                self.client.delete_object(self.namespace, self.bucket, full)
            except ServiceError as exc:
                if exc.status != 404 or exc.code != "ObjectNotFound":
                    raise

        self._call(key, remove)
