"""Where a file or generator source started again goes on.

Such a source is its own log: its row ``seq`` is the file's ``seq``-th row
or the generator's tuple ``seq - 1`` (from 0), the same in every incarnation. What a source
must keep across a kill is therefore one number, the seq below which no
consumer will ever ask again (its output log's freed point): rows up to it
are not sent again, rows after it are, and the consumers drop what they
already have. :class:`SourceProgress` keeps that number in the run
directory (``sources/<name>.progress.json``, replaced atomically).

A broker source (Kafka) is not its own log: the broker is, and the row
numbers come from the source's merge of the partitions, so beside the freed
point it keeps the merge's checkpoint there (where to read each partition
again, :class:`~semiactive.node.connectors.event_time_merge.MergeCheckpoint`).

The source's row log (``sources/<name>.jsonl``, one line per row in seq
order: the reference input of a run's check) is cut back by
:func:`reopen_row_log` to its last whole line, so that the rows the new
incarnation generates again follow the kept ones exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from semiactive.runtime.atomic_file import write_json


class SourceProgress:
    """The freed point of one source, kept in ``run_dir``."""

    def __init__(self, run_dir: Path, name: str) -> None:
        self.path = run_dir / "sources" / f"{name}.progress.json"
        self.saved = 0
        self.checkpoint: Any = None  # a broker source's, as JSON
        # The run's start (unix s): a source started again by a supervisor
        # that does not know it (a container's restart policy) goes on from it.
        self.t0: float | None = None

    def load(self) -> int | None:
        """The seq a previous incarnation had freed; None for a first
        start. A damaged file counts as 0: everything is sent again, which
        the consumers drop, rather than a guess that could skip rows."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            seq = data["freed"]
        except (ValueError, KeyError, TypeError, IndexError):
            return 0
        self.checkpoint = data.get("checkpoint")
        t0 = data.get("t0")
        self.t0 = float(t0) if isinstance(t0, int | float) and not isinstance(t0, bool) and t0 > 0 else None
        self.saved = seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else 0
        return self.saved

    def save(self, freed: int, checkpoint: Any = None, t0: float | None = None) -> bool:
        """Record ``freed`` (and a broker source's ``checkpoint``, the run's
        ``t0`` there) if it moved on; say whether it did."""
        if freed <= self.saved:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record: dict[str, Any] = {"freed": freed}
        if checkpoint is not None:
            record["checkpoint"] = checkpoint
        if t0 is not None:
            record["t0"] = t0
        write_json(self.path, record)
        self.saved = freed
        return True


def reopen_row_log(path: Path, keep: int) -> tuple[IO[str], int]:
    """The row log at ``path`` cut back to at most ``keep`` whole lines
    (rows), opened for appending; and how many lines it kept. A line cut
    short by a kill, and lines after ``keep``, go: they are generated again."""
    kept = 0
    end = 0
    try:
        with path.open("rb") as handle:
            while kept < keep:
                line = handle.readline()
                if not line.endswith(b"\n"):
                    break
                kept += 1
                end += len(line)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    with path.open("r+b") as handle:
        handle.truncate(end)
    return path.open("a", buffering=1 << 16), kept
