"""Datasets as the CLI and the TUI reach them (through ControlPlane): the registered list
(FOUNDRY_HOME/datasets.yaml) and the reads and writes of one dataset, each made with a stored
secret in scope (`foundry dataset add --secret`, `foundry dataset inspect|verify|convert --secret`),
so no face sets credentials up itself. The TUI's reads return DatasetSummary and problem lines; the
CLI's (`*_report`, `convert_files`, `tokenize`) return foundry.streaming.tools' own results.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable

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

    # --- `foundry dataset inspect | verify | convert`: the tools' own results, with a stored secret
    def inspect_report(self, url: str, samples: int = 3, allow_unsafe_types: bool = False,
                       secret: str | None = None) -> dict[str, Any]:
        """Shards, samples, bytes, columns, compression and `samples` decoded samples (a preview)."""
        from foundry.streaming.tools.inspect import inspect_dataset

        with self._credentials(secret):
            return inspect_dataset(url, samples=samples, allow_unsafe_types=allow_unsafe_types)

    def verify_report(self, url: str, workers: int = 4, progress: Progress | None = None,
                      secret: str | None = None) -> Any:
        """A VerifyReport: every shard present, of the right size, every hash and header checked."""
        from foundry.streaming.tools.verify import verify_dataset

        with self._credentials(secret):
            return verify_dataset(url, workers=workers, progress=progress)

    def convert_files(self, src: str, dst: str, *, columns: str | None = None, secret: str | None = None,
                      **options: Any) -> Any:
        """JSONL, CSV/TSV or an image folder into MDS at `dst`; `columns` is `NAME:ENCODING,...`;
        `options` are streaming.tools.convert's (compression, hashes, size_limit, workers, exist_ok,
        progress). Returns its ConvertResult."""
        from foundry.streaming.tools.convert import convert, parse_columns

        with self._credentials(secret):
            return convert(src, dst, columns=parse_columns(columns), **options)

    def tokenize(self, src: str, dst: str, tokenizer: str, concat_tokens: int, *, text: dict[str, Any],
                 secret: str | None = None, **options: Any) -> Any:
        """Text tokenized into MDS `tokens` samples at `dst`; `text` holds TokenizeOptions' fields
        (eos_text, bos_text, no_wrap, keep_remainder, text_field, split); `options` tokenize_to_mds's."""
        from foundry.streaming.tools.tokenize_text import TokenizeOptions, tokenize_to_mds

        with self._credentials(secret):
            return tokenize_to_mds(src, dst, TokenizeOptions(tokenizer, concat_tokens, **text), **options)

    def _credentials(self, secret: str | None) -> AbstractContextManager[None]:
        return secret_environment(self.secrets, [secret] if secret else [])
