"""Writes the data of examples/person-tracking.yaml (deterministic):

    python examples/data/person-tracking/generate.py

Alice walks past four cameras across the US, ten seconds at each: New York,
Atlanta, Houston, Los Angeles. The tracker reports every 100 ms which camera
sees her; each camera sends 40 frames a second, one in eight with motion.
The ``pixels`` column is ``char(200)`` in the configuration: 200 bytes on
the wire whatever the file holds.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
CAMERAS = ["cam_ny", "cam_atl", "cam_hou", "cam_la"]
SEGMENT_MS = 10_000
FRAME_MS = 25
REPORT_MS = 100


def generate(out: Path, segment_ms: int = SEGMENT_MS, cameras: int = len(CAMERAS)) -> None:
    """Alice at each of the first ``cameras`` cameras for ``segment_ms``."""
    end = segment_ms * cameras
    lines = ["ts,person,camera"]
    lines += [f"{t},alice,{CAMERAS[t // segment_ms]}" for t in range(0, end, REPORT_MS)]
    (out / "tracker.csv").write_text("\n".join(lines) + "\n")
    for k, camera in enumerate(CAMERAS):
        lines = ["ts,frame,motion,pixels"]
        for i, t in enumerate(range(k + 1, end, FRAME_MS)):
            lines.append(f"{t},{i},{1 if (i * 5 + k) % 8 == 0 else 0},p{i % 10}")
        (out / f"{camera}.csv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    generate(HERE)
