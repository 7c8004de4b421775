"""Built-in compute providers: local (here), slurm, kubernetes and the clouds (subpackages)."""
