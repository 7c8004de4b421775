"""Kubernetes compute provider: Indexed Job + headless Service + Secret (see provider.py)."""

from .provider import KubernetesProvider

__all__ = ["KubernetesProvider"]
