"""AWS: EKS clusters (see eks.py)."""
