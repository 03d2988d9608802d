"""Generated code is inspectable (``query check --show-code``, tracebacks
show its lines) and every error in user input is one ``UserError`` the CLI
turns into one line and exit status 2."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from semiactive import cli
from semiactive.config import ConfigError
from semiactive.errors import UserError
from semiactive.node.connectors.sources import SourceDataError
from semiactive.node.cql import CqlError
from semiactive.node.engine import expressions
from semiactive.node.engine.generated_code import compile_generated
from semiactive.runtime.tls import TlsError

EXAMPLE = str(Path(__file__).parents[2] / "examples" / "sensor_average.cql")


def test_query_check_show_code_prints_the_generated_slices(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["query", "check", EXAMPLE, "--show-code"]) == 0
    out = capsys.readouterr().out
    assert "-- generated code of sensor_avg --" in out
    assert "def advance(watermark, r0):" in out
    assert cli.main(["query", "check", EXAMPLE]) == 0
    assert "def advance" not in capsys.readouterr().out


def test_a_traceback_through_generated_code_shows_its_line() -> None:
    divide = expressions.build("lambda e: 100 // e")
    with pytest.raises(ZeroDivisionError) as failure:
        divide(0)
    text = "".join(traceback.format_exception(failure.value))
    assert "<semiactive-expression-" in text
    assert "lambda e: 100 // e" in text


def test_the_same_source_compiles_once() -> None:
    assert compile_generated("1 + 1", "expression", "eval") is compile_generated(
        "1 + 1", "expression", "eval"
    )


@pytest.mark.parametrize("error", [CqlError, ConfigError, SourceDataError, TlsError])
def test_every_input_error_is_a_user_error(error: type[Exception]) -> None:
    assert issubclass(error, UserError)


def test_the_cli_maps_user_errors_to_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.cql"
    bad.write_text("REGISTER QUERY q AS SELECT FROM\n")
    assert cli.main(["query", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("semiactive: ") and err.count("\n") == 1
