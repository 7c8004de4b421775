"""Widgets grouped by area: tables (shared), runs, datasets."""
