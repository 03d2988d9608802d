"""The committed gRPC stubs are what ``python -m semiactive.wire`` makes of
``proto/``: change a .proto, regenerate (``make proto``), commit both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT

COMMITTED = ROOT / "semiactive" / "wire"


def test_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "semiactive.wire", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    generated = {p.name: p for p in (tmp_path / "semiactive" / "wire").iterdir()}
    protos = sorted(p.stem for p in (ROOT / "proto" / "semiactive" / "wire").glob("*.proto"))
    assert protos, "no .proto files found"
    expected = {f"{stem}{suffix}" for stem in protos for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")}
    assert set(generated) == expected
    stale = [
        name for name, path in sorted(generated.items()) if path.read_text() != (COMMITTED / name).read_text()
    ]
    assert not stale, f"stale stubs (run `make proto`): {', '.join(stale)}"
    committed = {p.name for p in COMMITTED.glob("*_pb2*.py*")}
    assert committed == expected, f"stubs without a .proto: {sorted(committed - expected)}"
