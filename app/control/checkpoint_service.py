"""Checkpoints in any storage URL as the CLI reaches them (`foundry checkpoint ls|inspect`): what a
save folder holds and what one checkpoint says about itself, read with a stored secret in scope
(`--secret NAME`), as the TUI reads a run's checkpoints with the run's own secrets. The work is in
foundry.trainer.checkpoint.catalog (manifests and pointers only: no torch).
"""

from __future__ import annotations

from typing import Any

from .secret_env import secret_environment
from .secrets import SecretStore


class Checkpoints:
    def __init__(self, secrets: SecretStore):
        self.secrets = secrets

    def list(self, url: str, secret: str | None = None) -> list[dict[str, Any]]:
        """The checkpoints of a save folder, oldest first (`latest` marks what a resume loads)."""
        from foundry.trainer.checkpoint.catalog import list_folder

        with secret_environment(self.secrets, [secret] if secret else []):
            return list_folder(url)

    def describe(self, url: str, verify: bool = False, secret: str | None = None) -> dict[str, Any]:
        """A checkpoint (or a save folder's latest): run, timestamp, layout, world size, files, config."""
        from foundry.trainer.checkpoint.catalog import describe

        with secret_environment(self.secrets, [secret] if secret else []):
            return describe(url, verify=verify)
