"""Read YAML a user hands us (run specs) without letting the file decide how much we build.

A few hundred bytes of nested aliases ("billion laughs") expand to billions of values once anything
walks the result (validation, json.dumps). So: refuse files over MAX_BYTES and text that is not
UTF-8, compose the node graph first (linear in the file's size; aliases stay shared), count the
values it would expand to, and only then build Python objects from the same node graph (one
parse). Safe tags only (SafeLoader, libyaml's when PyYAML has it: the pure-Python parser takes
seconds a megabyte).
"""

from __future__ import annotations

from typing import Any

import yaml

from foundry.plugins.errors import ConfigError

MAX_BYTES = 4 * 1024 * 1024          # a run spec is a page of YAML; 4 MiB is generous
MAX_VALUES = 200_000                 # values after expanding aliases (a big spec has a few thousand)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def decode_utf8(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                          hint="save the file as UTF-8") from None


def _expanded_size(root: yaml.Node, source: str, aliased: bool = True) -> int:
    """How many values `root` expands to, aliases counted every time they are used (memoized)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()     # expanded, not finished: met again below itself = a cycle
    # iterative post-order walk: a deep nesting must not hit Python's recursion limit
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if not children_done:
            if id(node) in open_nodes:
                raise ConfigError(f"{source}: the YAML contains itself (a recursive alias)")
            open_nodes.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = 1
            open_nodes.discard(id(node))
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if not children_done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(c), 1) for c in children)
        if total > MAX_VALUES and aliased:
            raise ConfigError(f"{source}: the YAML expands to more than {MAX_VALUES:,} values "
                              "(aliases used over and over?)", hint="write the file out without nested aliases")
        if total > MAX_VALUES:
            raise ConfigError(f"{source}: the YAML holds more than {MAX_VALUES:,} values",
                              hint="keep large data in a file or a bucket the job reads, not in the YAML")
        sizes[id(node)] = total
        open_nodes.discard(id(node))
    return sizes[id(root)]


def safe_load_limited(raw: bytes | str, source: str, max_bytes: int = MAX_BYTES) -> Any:
    """The YAML document in `raw` as Python data (SafeLoader), or a one-line ConfigError."""
    if len(raw) > max_bytes:
        raise ConfigError(f"{source}: {len(raw):,} bytes is too large for a Foundry YAML file (limit {max_bytes:,})",
                          hint="keep large data in a file or a bucket the job reads, not in the YAML")
    text = decode_utf8(raw, source) if isinstance(raw, bytes) else raw
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source, aliased="*" in text)   # no '*': no alias, nothing to expand
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}:{where} invalid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{source}: the YAML is nested too deeply") from None
    finally:
        loader.dispose()
