"""The views (runs, clusters, datasets, secrets), the details screens and the dialogs."""
