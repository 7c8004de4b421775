"""The control plane: run registry, secrets, clusters, datasets, launching and the watchdog.

`ControlPlane` (see plane.py for the full contract) is the only entry point the CLI, the TUI and the
SDK use: they import this package and nothing below it (an import-linter contract in pyproject.toml).
What they get back is re-exported here: the plain dataclasses in `models`, the views of a run
(`RunProgress`, `CheckpointRow`) and of a dataset (`DatasetEntry`, `DatasetSummary`), and a few pure
functions that format what the facade returned.
"""

from .aws_files import s3_values_from_aws_files
from .config import FoundryPaths
from .datasets import DatasetEntry, DatasetSummary
from .egress import cost_line as egress_cost_line
from .egress import rows as egress_rows
from .request_cost import request_line
from .run_cost import cost_line as run_cost_line
from .models import (ACTIVE_STATUSES, RESUMABLE_STATUSES, ClusterInfo, DryRun, Resumption, RunEvent, RunInfo,
                     SecretInfo)
from .plane import ControlPlane
from .recovery import Ledger, LedgerEntry
from .watchdogs import WatchdogInfo
from .run_views import CheckpointRow, RunProgress, steps_by_resumption
from .secret_env import secret_environment
from .secret_from_env import env_fields, env_offer
from .verify import verify_resume  # `foundry verify-resume`: runs the user's training itself, no registry

__all__ = ["ControlPlane", "FoundryPaths", "RunInfo", "Resumption", "RunEvent", "ClusterInfo",
           "SecretInfo", "DryRun", "ACTIVE_STATUSES", "RESUMABLE_STATUSES", "RunProgress", "CheckpointRow",
           "steps_by_resumption", "Ledger", "LedgerEntry", "WatchdogInfo", "DatasetEntry", "DatasetSummary", "egress_rows", "egress_cost_line",
           "request_line", "run_cost_line",
           "s3_values_from_aws_files", "verify_resume", "secret_environment", "env_fields", "env_offer"]
