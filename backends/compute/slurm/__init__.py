"""Slurm compute provider (see provider.py; tested against a real single-node Slurm)."""

from .provider import SlurmProvider

__all__ = ["SlurmProvider"]
