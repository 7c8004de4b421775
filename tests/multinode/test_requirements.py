"""Without root the multi-node group skips with its reason (and repeats it in the summary); with
FOUNDRY_REQUIRE_INTEGRATION=1 (CI) it fails instead of skipping."""

from __future__ import annotations

import pytest

from support import multinode


def test_no_root_is_a_loud_skip_with_the_reason(monkeypatch):
    monkeypatch.setattr(multinode.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(multinode, "SKIPPED", [])     # a simulated skip: not in this session's summary
    monkeypatch.delenv("FOUNDRY_REQUIRE_INTEGRATION", raising=False)
    reason = multinode.missing_requirements()
    assert "root" in reason
    with pytest.raises(pytest.skip.Exception, match="multi-node tests skipped: .*root"):
        multinode._skip(reason)
    assert multinode.SKIPPED[-1].startswith("multi-node tests skipped")
    monkeypatch.setenv("FOUNDRY_REQUIRE_INTEGRATION", "1")
    with pytest.raises(pytest.fail.Exception):
        multinode._skip(reason)
