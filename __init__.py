"""Foundry: train models on any compute, anywhere, with zero switching cost."""

__version__ = "0.1.0"
