"""Background shard uploads for the writers: put, then confirm with `head` (size must match).

`wait()` returns only when every submitted file is confirmed in the store, so the caller can
upload index.json last, knowing every shard it names is really there.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from foundry.plugins.errors import StorageError
from foundry.plugins.storage import ProgressCallback


class ShardUploader:
    def __init__(self, store, local_dir: str, workers: int = 4, progress: ProgressCallback | None = None,
                 on_error=None):
        self.store = store
        self.local_dir = local_dir
        self.progress = progress
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="foundry-upload")
        self._futures: list[Future] = []
        self._lock = threading.Lock()
        self.order: list[str] = []  # confirmed keys, in completion order
        self.error: BaseException | None = None  # the first failure, as soon as it happens
        self.on_error = on_error

    def submit(self, basename: str, delete_after: bool = False) -> Future:
        future = self._pool.submit(self._upload, basename, delete_after)
        future.add_done_callback(self._note_failure)
        with self._lock:
            self._futures.append(future)
        return future

    def _note_failure(self, future: Future) -> None:
        if not future.cancelled() and future.exception() is not None and self.error is None:
            self.error = future.exception()
            if self.on_error is not None:
                self.on_error(self.error)

    def _upload(self, basename: str, delete_after: bool) -> None:
        path = os.path.join(self.local_dir, basename)
        size = os.path.getsize(path)
        self.store.put_file(basename, path, progress=self.progress)
        info = self.store.head(basename)
        if info.size != size:
            raise StorageError(
                f"upload of {basename} to {self.store.url} is incomplete ({info.size} of {size} bytes)",
                hint="retry the write",
            )
        with self._lock:
            self.order.append(basename)
        if delete_after:
            os.unlink(path)

    def failed(self) -> BaseException | None:
        return self.error

    def wait(self) -> None:
        """Block until every submitted upload is confirmed; re-raise the first failure."""
        with self._lock:
            futures = list(self._futures)
        for f in futures:
            f.result()

    def close(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=True, cancel_futures=cancel)
