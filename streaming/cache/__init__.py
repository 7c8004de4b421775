"""The node-local shard cache: download once per node, verify, decompress, evict, prefetch.

Processes coordinate only through the cache directory: one file lock per shard under
`LOCAL/.foundry/locks/`, downloads into `LOCAL/.foundry/tmp/` and an atomic rename into place. A
kernel file lock dies with its process, so a SIGKILL at any point leaves nothing to clean up by
hand; stale temporary files are removed by the next download of the same shard.
"""

from .decompress_slot import lending
from .evict import Evictor, check_cache_limit, parse_bytes
from .prefetch import Prefetcher
from .schedule import UseSchedule
from .shards import ShardCache

__all__ = ["Evictor", "Prefetcher", "check_cache_limit", "ShardCache", "UseSchedule", "lending", "parse_bytes"]
