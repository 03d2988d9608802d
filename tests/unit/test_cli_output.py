"""What the command line prints beside its work: its version, and nothing
but an exit status when its reader goes away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from semiactive import __version__
from tests.processes import ROOT, semiactive


def test_version() -> None:
    result = semiactive("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"semiactive {__version__}")


def test_output_into_a_closed_pipe_ends_quietly_with_sigpipes_status(tmp_path: Path) -> None:
    """`semiactive ... | head -1`: no BrokenPipeError traceback, status 141
    as a C program killed by SIGPIPE."""
    data = tmp_path / "s.csv"
    data.write_text("ts,id,val\n" + "".join(f"{i},{i},{i % 7}\n" for i in range(100_000)))
    program = tmp_path / "q.cql"
    program.write_text("REGISTER STREAM S (id integer, val integer);\nREGISTER QUERY q AS SELECT * FROM S;\n")
    command = [sys.executable, "-m", "semiactive", "query", "run", str(program), "--stream", f"S={data}"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b'{"seq":1,')
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
