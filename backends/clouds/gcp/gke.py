"""The `gke` provider: a Google Kubernetes Engine cluster driven by the kubernetes provider.

The kubeconfig comes from the Container API (`GET container.googleapis.com/v1/projects/P/
locations/L/clusters/C`: endpoint and CA) and an OAuth access token from Application Default
Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, metadata server), via google-auth, imported
only when used.

```yaml
clusters:
  gke-h100:
    provider: gke
    project: my-project
    location: us-central1     # region or zone
    cluster_name: training
```
"""

from __future__ import annotations

from typing import Any

from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError

from ...compute.kubernetes import KubernetesProvider

API = "https://container.googleapis.com/v1"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def gke_kubeconfig(cluster: dict[str, Any], token: str) -> dict[str, Any]:
    """A kubeconfig dict from the Container API's Cluster resource and an access token."""
    name = cluster["name"]
    endpoint = cluster.get("endpoint")
    ca = (cluster.get("masterAuth") or {}).get("clusterCaCertificate")
    if not endpoint or not ca:
        raise ProviderError(f"gke: cluster {name} has no endpoint yet (status {cluster.get('status')})")
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }


class GKEProvider(KubernetesProvider):
    name = "gke"
    config_keys = frozenset({"project", "location", "cluster_name"})
    client_max_age = 1800.0   # access tokens live an hour

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        super().__init__(cluster_config)
        for key in ("project", "location", "cluster_name"):
            if not self.raw_config.get(key):
                raise ConfigError(f"gke cluster config needs `{key}`")

    def cluster_url(self) -> str:
        c = self.raw_config
        return f"{API}/projects/{c['project']}/locations/{c['location']}/clusters/{c['cluster_name']}"

    def credentials(self):
        try:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError
        except ImportError as exc:
            raise ConfigError("the gke provider needs google-auth", hint="pip install 'foundry-anywhere[gcp]'") from exc
        try:
            creds, _ = google.auth.default(scopes=SCOPES)
        except DefaultCredentialsError as exc:
            raise CredentialsError("gke: no Google credentials found",
                                   hint="set GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`") from exc
        return creds

    def session(self, creds):
        from google.auth.transport.requests import AuthorizedSession

        return AuthorizedSession(creds)

    def kubeconfig(self) -> dict[str, Any]:
        creds = self.credentials()
        resp = self.session(creds).get(self.cluster_url(), timeout=30)
        if resp.status_code in (401, 403):
            raise CredentialsError(f"gke: access to {self.raw_config['cluster_name']} refused ({resp.status_code})")
        if resp.status_code == 404:
            raise ConfigError(f"gke: no cluster {self.raw_config['cluster_name']!r} in "
                              f"{self.raw_config['project']}/{self.raw_config['location']}")
        if resp.status_code != 200:
            raise ProviderError(f"gke: Container API answered {resp.status_code}")
        if not getattr(creds, "token", None) or not getattr(creds, "valid", True):
            from google.auth.transport.requests import Request

            creds.refresh(Request())
        return gke_kubeconfig(resp.json(), creds.token)
