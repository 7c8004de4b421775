"""The main job on the embedded default. Placeholder until the trainer lands: a storage round trip."""

import os
import sys
from pathlib import Path

from foundry.plugins.manager import open_store


def main() -> int:
    home = Path(os.environ.get("FOUNDRY_HOME", Path.home() / ".local/share/foundry"))
    store = open_store(str(home / "storage" / "demo"))
    store.put("hello.txt", b"hello from foundry\n")
    print(f"wrote {store.child_url('hello.txt')}: {store.get('hello.txt').decode().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
