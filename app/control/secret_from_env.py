"""Which environment variables hold a secret type's fields (`foundry create secret s3` offers
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, S3_ENDPOINT_URL, ... when they are set).

The mapping is read off the type's own `inject` (what a job receives), so a type, built in or a
plugin's, never keeps a second table: each field gets a marker value, and every variable whose
injected value is exactly one field's marker names that field. Variables a type derives (paths to
files, commands) carry no marker whole and are left out.
"""

from __future__ import annotations

import os
from typing import Mapping

from foundry.plugins.secrets import SecretType


def env_fields(stype: SecretType) -> dict[str, str]:
    """variable -> field name, for the fields a job receives unchanged in one variable."""
    marks = {f"\x01foundry-{f.name}\x01": f.name for f in stype.fields}
    try:
        injection = stype.inject("name", {name: mark for mark, name in marks.items()})
    except Exception:   # a type that parses its values (a config file) cannot say
        return {}
    return {var: marks[value] for var, value in injection.env.items()
            if value in marks and var.isidentifier()}


def env_offer(stype: SecretType, environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """field -> (variable, value) for every field the environment holds (non-empty)."""
    environ = os.environ if environ is None else environ
    return {field: (var, environ[var]) for var, field in env_fields(stype).items() if environ.get(var)}

