"""A reader process for cache tests: `python reader_proc.py REMOTE_URL CACHE [ID_OUT]`.

Registers the logged:// test store, reads one epoch in order, writes the ids it saw to ID_OUT."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import logged_store  # noqa: E402

logged_store.register()
from foundry.streaming import StreamingDataset  # noqa: E402

ds = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], shuffle=False)
ids = [s["id"] for s in ds]
if len(sys.argv) > 3:
    Path(sys.argv[3]).write_text(" ".join(map(str, ids)))
