"""Run specs: the YAML a user writes, validated into a RunSpec (modern and mcli's older form)."""

from .loader import apply_overrides, load_spec, normalize_legacy, parse_spec
from .schema import Compute, GitRepo, PipPackages, RunSpec, Scheduling

__all__ = ["RunSpec", "Compute", "GitRepo", "PipPackages", "Scheduling", "load_spec", "parse_spec",
           "apply_overrides", "normalize_legacy"]
