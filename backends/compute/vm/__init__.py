"""What the cloud-VM providers (ec2, gce, oci-vm) share and no cloud owns: the instance ledger
written before every request, the editable catalogue with prices, the SSH wait, the public key
given to new instances, and (base.py) the lifecycle of instances made for one resumption."""
