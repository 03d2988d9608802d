"""Telemetry files that a SIGKILL cannot leave half-written.

A node may be killed at any instant, also while it rewrites a summary: the
file is written beside its final name and renamed over it (atomic on one
file system), so a reader sees the old content or the new, never an empty
or truncated file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)
