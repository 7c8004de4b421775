"""The control plane: run registry, secrets, clusters, launching and the watchdog.

`ControlPlane` (see its module docstring for the full contract) is the only entry point the CLI, the
TUI and the SDK use; it returns the plain dataclasses in `models`.
"""

from .config import FoundryPaths
from .models import ClusterInfo, DryRun, Resumption, RunEvent, RunInfo, SecretInfo
from .plane import ControlPlane

__all__ = ["ControlPlane", "FoundryPaths", "RunInfo", "Resumption", "RunEvent", "ClusterInfo",
           "SecretInfo", "DryRun"]
