"""Where the source checkout is, for the commands that use its examples/ and
bench/ (the demo, the papers' experiments, ``semiactive bench``). An
installed wheel has neither; those commands say so."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BENCH = ROOT / "bench"
