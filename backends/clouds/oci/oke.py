"""The `oke` provider: an Oracle Container Engine for Kubernetes cluster, driven by the kubernetes
provider. The kubeconfig is the one OKE itself generates (`ContainerEngineClient.
create_kubeconfig`), using the oci SDK (imported only when used) with ~/.oci/config or a profile.
That kubeconfig authenticates through an exec plugin (`oci ce cluster generate-token`), so the
`oci` CLI must be on PATH where Foundry runs.

```yaml
clusters:
  oke-a100:
    provider: oke
    cluster_id: ocid1.cluster.oc1.iad.aaaa...
    region: us-ashburn-1      # optional: the profile's region otherwise
    profile: DEFAULT          # optional
    config_file: ~/.oci/config   # optional
```
"""

from __future__ import annotations

from typing import Any

import yaml

from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError

from ...compute.kubernetes import KubernetesProvider


def oke_kubeconfig(text: str) -> dict[str, Any]:
    """Parse the kubeconfig OKE returns; refuse anything that is not one."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProviderError(f"oke: create_kubeconfig returned invalid YAML: {exc}") from exc
    if not isinstance(doc, dict) or not doc.get("clusters") or not doc.get("contexts"):
        raise ProviderError("oke: create_kubeconfig returned no cluster")
    return doc


class OKEProvider(KubernetesProvider):
    name = "oke"
    config_keys = frozenset({"cluster_id", "region", "profile", "config_file"})
    client_max_age = 600.0

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        super().__init__(cluster_config)
        if not str(self.raw_config.get("cluster_id", "")).startswith("ocid1.cluster."):
            raise ConfigError("oke cluster config needs `cluster_id` (ocid1.cluster....)")

    def fetch_kubeconfig_text(self) -> str:
        try:
            import oci
        except ImportError as exc:
            raise ConfigError("the oke provider needs the oci package", hint="pip install 'foundry-anywhere[oci]'") from exc
        c = self.raw_config
        try:
            config = oci.config.from_file(c.get("config_file") or oci.config.DEFAULT_LOCATION,
                                          c.get("profile") or oci.config.DEFAULT_PROFILE)
            if c.get("region"):
                config["region"] = c["region"]
            client = oci.container_engine.ContainerEngineClient(config)
            details = oci.container_engine.models.CreateClusterKubeconfigContentDetails(
                token_version="2.0.0", expiration=2592000)
            return client.create_kubeconfig(c["cluster_id"], create_cluster_kubeconfig_content_details=details).data.text
        except oci.exceptions.ConfigFileNotFound as exc:
            raise CredentialsError("oke: no OCI config file", hint="create ~/.oci/config (`oci setup config`)") from exc
        except oci.exceptions.ServiceError as exc:
            if exc.status in (401, 403, 404):
                raise CredentialsError(f"oke: {exc.code} for cluster {c['cluster_id']}") from exc
            raise ProviderError(f"oke: create_kubeconfig failed: {exc.code}") from exc

    def kubeconfig(self) -> dict[str, Any]:
        return oke_kubeconfig(self.fetch_kubeconfig_text())
