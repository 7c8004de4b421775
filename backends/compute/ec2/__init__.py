"""The `ec2` compute provider: EC2 instances made for one resumption, run over the `ssh` provider,
terminated when it ends; every instance recorded in a ledger before it is asked for."""

from .provider import Ec2Provider

__all__ = ["Ec2Provider"]
