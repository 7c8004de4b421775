"""Datasets as the CLI and the TUI reach them (`ControlPlane.datasets`): the registered list
(FOUNDRY_HOME/datasets.yaml) and the reads of one dataset, each made with the dataset's stored
secret in scope (`foundry dataset add --secret`), so no face sets credentials up itself.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable

from foundry.plugins.errors import ConfigError

from . import datasets as ops
from .datasets import DatasetEntry, DatasetRegistry, DatasetSummary, Progress
from .secret_env import secret_environment
from .secrets import SecretStore


class Datasets:
    def __init__(self, registry: DatasetRegistry, secrets: SecretStore):
        self.registry, self.secrets = registry, secrets

    def list(self) -> list[DatasetEntry]:
        return self.registry.list()

    def add(self, url: str, name: str | None = None, secret: str | None = None) -> DatasetEntry:
        """Register `url`; `secret` (a stored secret) is what the TUI reads it with."""
        if secret and not self.secrets.exists(secret):
            raise ConfigError(f"no secret named {secret!r}", hint="`foundry get secrets` lists them; "
                                                                "`foundry create secret` adds one")
        return self.registry.add(url, name, secret)

    def remove(self, name_or_url: str) -> None:
        self.registry.remove(name_or_url)

    def inspect(self, url: str, secret: str | None = None) -> DatasetSummary:
        """Shards, samples, bytes, columns (index.json only), as `foundry dataset inspect`."""
        with self._credentials(secret):
            return ops.inspect_dataset(url)

    def samples(self, url: str, start: int = 0, count: int = 10, secret: str | None = None) -> list[dict]:
        """Decoded samples [start, start+count), downloading only the shards they are in."""
        with self._credentials(secret):
            return ops.read_samples(url, start, count)

    def verify(self, url: str, progress: Progress | None = None, secret: str | None = None) -> list[str]:
        """Every shard checked (hashes, sizes, headers); returns the problems."""
        with self._credentials(secret):
            return ops.verify_dataset(url, progress)

    def convert(self, src: str | Path, dst: str, compression: str | None = None,
                progress: Callable[[int, int | None], None] | None = None) -> DatasetSummary:
        """A JSONL/CSV file or an image folder converted into MDS at `dst`."""
        return ops.convert_to_mds(src, dst, compression=compression, progress=progress)

    def _credentials(self, secret: str | None) -> AbstractContextManager[None]:
        return secret_environment(self.secrets, [secret] if secret else [])
