"""Where the control plane keeps its state, resolved once, never at import time.

FOUNDRY_HOME (default: the platformdirs user data dir for "foundry") holds:
  registry.db        the run registry (SQLite, WAL)
  clusters.yaml      cluster definitions (`local` always exists, even if the file does not)
  secrets/NAME.json  one file per secret, mode 0600 (values never printed)
  runs/NAME/         per-run files: resumption job dirs with logs, metrics.jsonl
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FoundryPaths:
    home: Path

    @classmethod
    def resolve(cls, home: str | os.PathLike | None = None) -> "FoundryPaths":
        if home is None:
            home = os.environ.get("FOUNDRY_HOME")
        if not home:
            import platformdirs

            home = platformdirs.user_data_dir("foundry", appauthor=False)
        path = Path(home).expanduser().absolute()
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    @property
    def registry(self) -> Path:
        return self.home / "registry.db"

    @property
    def clusters_file(self) -> Path:
        return self.home / "clusters.yaml"

    @property
    def secrets_dir(self) -> Path:
        return self.home / "secrets"

    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"

    def run_dir(self, run_name: str) -> Path:
        from foundry.app.names import check_name

        return self.runs_dir / check_name("run", run_name)

    def resumption_dir(self, run_name: str, index: int) -> Path:
        return self.run_dir(run_name) / f"resumption-{index}"
