"""Regenerate the stubs: ``python -m semiactive.wire [OUT_DIR]``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTOS = sorted((ROOT / "proto" / "semiactive" / "wire").glob("*.proto"))


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc  # a development dependency

    args = [
        "protoc",
        f"-I{ROOT / 'proto'}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *map(str, PROTOS),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
