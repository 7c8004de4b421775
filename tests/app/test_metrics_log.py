"""metrics.jsonl parsed incrementally gives what parsing the whole file gives, at every point."""

import json
import os

from foundry.app.control.metrics_log import read_metrics
from foundry.app.control.run_views import summarize


def _full_parse(path):
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows


def test_matches_a_full_parse_as_the_file_grows(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert read_metrics(path) == []
    rows = [{"step": 1, "max_steps": 50, "loss": 3.0}, {"step": 1, "eval/loss": 2.0},
            {"step": 2, "loss": 2.5, "throughput": 4.0}, {"step": 3, "loss": None}]
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
            f.flush()
            assert read_metrics(path) == _full_parse(path)
        f.write('{"step": 4, "lo')   # half-written: left out until it is whole
        f.flush()
        assert read_metrics(path) == rows
        f.write('ss": 1.5}')         # whole but without its newline: counted, and read again next time
        f.flush()
        assert read_metrics(path)[-1] == {"step": 4, "loss": 1.5}
        f.write("\n")
    assert read_metrics(path) == _full_parse(path)
    progress = summarize(read_metrics(path))
    assert (progress.step, progress.max_steps, progress.loss, progress.throughput) == (4, 50, 1.5, 4.0)


def test_a_replaced_file_is_read_from_the_start(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 9, "loss": 1.0}) + "\n")
    assert read_metrics(path) == [{"step": 9, "loss": 1.0}]
    os.unlink(path)
    path.write_text(json.dumps({"step": 1}) + "\n")
    assert read_metrics(path) == [{"step": 1}]
