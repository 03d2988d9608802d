"""What a file or generator source keeps across a kill
(node/service/roles/source_progress.py): its freed point, and its row log
cut back to whole rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from semiactive.node.service.roles.source_progress import SourceProgress, reopen_row_log


def test_the_freed_point_survives_and_only_moves_on(tmp_path: Path) -> None:
    progress = SourceProgress(tmp_path, "src")
    assert progress.load() is None  # a first start
    assert progress.save(120) and not progress.save(100) and not progress.save(120)
    again = SourceProgress(tmp_path, "src")
    assert again.load() == 120
    assert not again.save(110)  # it knows what it loaded


def test_the_run_s_start_is_kept_with_it_for_a_restart_nobody_starts(tmp_path: Path) -> None:
    progress = SourceProgress(tmp_path, "src")
    assert progress.save(10, t0=1795900000.25)
    again = SourceProgress(tmp_path, "src")
    assert again.load() == 10 and again.t0 == 1795900000.25
    assert again.save(20)  # before its Start: no t0 to keep
    third = SourceProgress(tmp_path, "src")
    assert third.load() == 20 and third.t0 is None
    for bad in ('"x"', "true", "-1", "null"):
        third.path.write_text(f'{{"freed": 5, "t0": {bad}}}')
        assert third.load() == 5 and third.t0 is None


@pytest.mark.parametrize("text", ["", "{", '{"freed": "12"}', '{"freed": -3}', '{"freed": true}', "[]"])
def test_a_damaged_progress_file_sends_everything_again(tmp_path: Path, text: str) -> None:
    progress = SourceProgress(tmp_path, "src")
    progress.path.parent.mkdir(parents=True)
    progress.path.write_text(text)
    assert progress.load() == 0


def test_the_row_log_keeps_whole_rows_up_to_the_point(tmp_path: Path) -> None:
    path = tmp_path / "src.jsonl"
    path.write_text('{"id": 0}\n{"id": 1}\n{"id": 2}\n{"id": 3}\n{"id":')  # the last cut by a kill
    handle, kept = reopen_row_log(path, 3)
    with handle:
        handle.write('{"id": 3}\n')
    assert kept == 3
    assert path.read_text() == '{"id": 0}\n{"id": 1}\n{"id": 2}\n{"id": 3}\n'
    # Fewer whole rows than the point (lost in a buffer): the source generates the rest.
    path.write_text('{"id": 0}\n{"id": 1')
    handle, kept = reopen_row_log(path, 3)
    handle.close()
    assert kept == 1 and path.read_text() == '{"id": 0}\n'


def test_a_missing_row_log_starts_empty(tmp_path: Path) -> None:
    handle, kept = reopen_row_log(tmp_path / "sources" / "src.jsonl", 50)
    handle.close()
    assert kept == 0 and (tmp_path / "sources" / "src.jsonl").read_text() == ""
