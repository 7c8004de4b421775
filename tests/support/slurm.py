"""Fixtures: filled in by its area (see module name)."""
