"""Cloud plugins: each cloud's managed Kubernetes (EKS, GKE, OKE) as clusters the kubernetes
provider drives, with the kubeconfig discovered through the cloud's SDK (imported lazily)."""
