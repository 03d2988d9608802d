"""The built CQL parser kept in the user's cache directory (node/cql/parser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from semiactive.node.cql import parser
from semiactive.node.cql.errors import CqlError

PROGRAM = "REGISTER STREAM s (k integer)\nREGISTER QUERY q AS ISTREAM(SELECT k FROM s [Range 5])"


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parser._lark.cache_clear()
    yield tmp_path
    parser._lark.cache_clear()


def test_a_cached_parser_parses_and_reports_errors_as_a_built_one(cache_home: Path) -> None:
    built = parser.parse(PROGRAM)
    (cached,) = (cache_home / "semiactive").iterdir()
    assert cached.stat().st_size > 1000 and cached.parent.stat().st_mode & 0o077 == 0
    written = cached.stat().st_mtime_ns
    parser._lark.cache_clear()
    assert parser.parse(PROGRAM) == built
    assert cached.stat().st_mtime_ns == written  # read, not built and written again
    with pytest.raises(CqlError, match=r"<query>:1:8: syntax error: unexpected 'SELECT'; expected one of"):
        parser.parse("SELECT SELECT")


@pytest.mark.parametrize("damage", [b"", b"not a pickle", b"\x80\x05K\x01."])
def test_a_damaged_cache_is_built_again(cache_home: Path, damage: bytes) -> None:
    parser.parse(PROGRAM)
    (cached,) = (cache_home / "semiactive").iterdir()
    cached.write_bytes(damage)
    parser._lark.cache_clear()
    assert parser.parse(PROGRAM).statements
    assert cached.stat().st_size > 1000


def test_without_a_cache_directory_it_still_parses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # a file: nothing can be made under it
    parser._lark.cache_clear()
    try:
        assert parser.parse(PROGRAM).statements
    finally:
        parser._lark.cache_clear()
