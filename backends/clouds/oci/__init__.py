"""Oracle Cloud: OKE clusters (see oke.py)."""
