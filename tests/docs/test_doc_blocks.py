"""Docs that execute: every ```python and ```bash/```sh/```shell block of README.md and docs/*.md runs
here, in a fresh interpreter or shell with its own working folder and FOUNDRY_HOME.

A block that cannot run as written (it needs credentials, a cluster, a placeholder) carries a marker
on the line before its fence, with the reason; its Python names are still checked, so a skipped
block cannot call a name it never imported:

    <!-- doc-test: skip="needs R2 credentials" placeholders="samples, MyStore" -->

`placeholders` lists the names the reader is meant to supply. Docs are found when the tests are
collected, so a new doc joins by itself; a doc without runnable blocks adds nothing.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LANGUAGES = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "shell": "shell"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_MARKER = re.compile(r"<!--\s*doc-test:(?P<body>.*?)-->")
_ATTR = re.compile(r'(\w+)="([^"]*)"')


@dataclass
class Block:
    doc: str            # path relative to the repository
    line: int           # the fence's line number (1-based)
    kind: str           # "python" or "shell"
    source: str
    skip: str | None = None
    placeholders: set[str] = field(default_factory=set)

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))


def parse_blocks(text: str, doc: str) -> list[Block]:
    """The runnable blocks of one Markdown text; other fences (yaml, toml, output) are left alone."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if lang not in LANGUAGES:
            continue
        attrs = {}
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.search(prev)
        if marker:
            attrs = dict(_ATTR.findall(marker.group("body")))
        names = {n.strip() for n in attrs.get("placeholders", "").split(",") if n.strip()}
        blocks.append(Block(doc, start + 1, LANGUAGES[lang], "\n".join(body) + "\n", attrs.get("skip"), names))
    return blocks


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in parse_blocks(path.read_text(), str(path.relative_to(REPO)))]


def undefined_names(source: str) -> set[str]:
    """Names a Python block reads but never binds (imports, assignments, defs, loop targets, ...)."""
    tree = ast.parse(source)
    bound = set(dir(builtins))
    loaded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound


BLOCKS = all_blocks()


# A block that runs starts a process (python -c / bash); a skipped one is only checked here.
@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=() if b.skip is not None else pytest.mark.subprocess)
                                   for b in BLOCKS])
def test_doc_block(block: Block, tmp_path):
    if block.kind == "python":
        missing = undefined_names(block.source) - block.placeholders
        assert not missing, f"{block.id}: the block uses {sorted(missing)} without importing or defining them"
    if block.skip is not None:
        pytest.skip(f"doc block {block.id}: {block.skip}")
    cmd = [sys.executable, "-c", block.source] if block.kind == "python" else ["bash", "-euo", "pipefail", "-c", block.source]
    # A short TMPDIR of its own: worker processes put unix sockets there (paths of at most 107 bytes).
    with tempfile.TemporaryDirectory(prefix="fdoc-") as tmp:
        env = {**os.environ, "FOUNDRY_HOME": str(tmp_path / "foundry-home"), "TMPDIR": tmp,
               "FOUNDRY_REPO": str(REPO), "FOUNDRY_DISABLE_PLUGIN_AUTOLOAD": "1"}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{block.id} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_collector_reads_markers_and_skips_other_fences():
    text = ('intro\n\n```yaml\nname: x\n```\n\n<!-- doc-test: skip="needs R2" placeholders="a, b" -->\n'
            '```python\nprint(a, b)\n```\n\n    ```bash\n    echo hi\n    ```\n')
    blocks = parse_blocks(text, "doc.md")
    assert [(b.kind, b.line, b.skip, b.placeholders) for b in blocks] == [
        ("python", 8, "needs R2", {"a", "b"}), ("shell", 12, None, set())]
    assert blocks[1].source == "echo hi\n"
    assert parse_blocks("# no code here\n", "empty.md") == []


def test_undefined_names_catches_a_missing_import():
    src = "from m import get_logs\nfor line in follow_run_logs(run): print(line)\n"
    assert undefined_names(src) == {"follow_run_logs", "run"}
