"""Secret types: the credential kinds a plugin contributes through `register_secret_types`.

A SecretType names its fields and says how a stored secret reaches a job: as environment
variables, as files mounted at a path (with the variable that points at them), or both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class SecretField:
    name: str
    help: str
    required: bool = True
    secret: bool = True          # masked everywhere; False for endpoints, regions, usernames
    from_file: bool = False      # the CLI reads the value from a path (keys, kubeconfigs)


@dataclass(frozen=True)
class SecretInjection:
    env: dict[str, str] = field(default_factory=dict)     # variable -> value
    files: dict[str, bytes] = field(default_factory=dict)  # path inside the job -> content


@dataclass(frozen=True)
class SecretType:
    kind: str
    description: str
    fields: tuple[SecretField, ...]
    # (secret name, field values) -> what the job receives
    inject: Callable[[str, dict[str, str]], SecretInjection]
