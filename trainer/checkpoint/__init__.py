"""Checkpoints: format (names, manifest, pointer), store operations (publish, list, verify,
prune), the background saver, the loader, and the Trainer-side session. See format.py."""
