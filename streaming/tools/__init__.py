"""Tools over datasets, apart from the runtime: convert sources to MDS, inspect, verify, upload shards.

The `foundry dataset` commands call these; a training job needs none of them.
"""
