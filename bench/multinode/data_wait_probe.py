"""One node's view: stream a dataset from S3 with Foundry's StreamingDataset and time how long each
training step waits for its batch (the rest of the step is a fixed simulated compute time).

    python data_wait_probe.py URL CACHE_DIR STEP_S BATCH PREDOWNLOAD   -> one JSON line on stdout
"""

import json
import socket
import sys
import time

from foundry.streaming import StreamingDataLoader, StreamingDataset


def main() -> None:
    url, cache, step_s, batch, predownload = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    t0 = time.perf_counter()
    ds = StreamingDataset(remote=url, local=cache, shuffle=True, shuffle_seed=1, batch_size=batch,
                          predownload=None if predownload == "default" else int(predownload))
    loader = StreamingDataLoader(ds, batch_size=batch, num_workers=0)
    waits, it = [], iter(loader)
    first = None
    while True:
        start = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        waits.append(time.perf_counter() - start)
        first = first or time.perf_counter() - t0
        time.sleep(step_s)                       # the model's forward/backward
    print(json.dumps({"node": socket.gethostname(), "steps": len(waits), "waits": waits, "first_batch_s": first,
                      "total_s": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
