"""Google Cloud: GKE clusters (see gke.py)."""
