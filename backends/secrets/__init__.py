"""Built-in secret types (s3/r2, gcp, oci, env, kubeconfig, ssh), registered by `plugin`."""
