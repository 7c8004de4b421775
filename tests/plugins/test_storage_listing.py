"""The one-level listing fallback: a store with only a recursive `list` still gets `foundry ls`."""

from __future__ import annotations

from foundry.plugins.storage import Listing, ObjectInfo, fold_listing, folder_prefix, list_one_level


class RecursiveOnlyStore:
    """A third-party store written before list_dir existed (no BaseObjectStore)."""

    url = "mine://bucket"

    def __init__(self, keys):
        self.keys = sorted(keys)
        self.prefixes_asked: list[str] = []

    def list(self, prefix=""):
        self.prefixes_asked.append(prefix)
        return iter(ObjectInfo(k, len(k)) for k in self.keys if k.startswith(prefix))


def test_folder_prefix_normalises():
    assert [folder_prefix(p) for p in ("", "/", "a", "a/", "/a/b/")] == ["", "", "a/", "a/", "a/b/"]


def test_fallback_folds_the_recursive_listing():
    store = RecursiveOnlyStore(["z.txt", "a/1", "a/b/2", "a/b/3", "ab"])
    assert list_one_level(store) == Listing(["a/"], [ObjectInfo("ab", 2), ObjectInfo("z.txt", 5)])
    inner = list_one_level(store, "a")
    assert inner.prefixes == ["a/b/"] and [o.key for o in inner.objects] == ["a/1"]
    assert store.prefixes_asked == ["", "a/"]  # "a" never matches "ab"


def test_fold_of_nothing_is_empty():
    assert fold_listing([], "x/") == Listing([], [])
