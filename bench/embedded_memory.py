"""Peak memory and speed of ``semiactive query run`` as the input grows 10x
(issue 16, streaming embedded mode): fed in slices (the default) and, for
comparison, the whole input as one slice (how it ran before).

    python bench/embedded_memory.py [--rows 30000] [--skip-whole]

Each run is a child process (its peak RSS from ``wait4``) over a generated
CSV: a windowed aggregate over one stream, and a window join of two.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERIES = {
    "aggregate": (
        "REGISTER STREAM S (k integer, v integer)\nREGISTER STREAM T (k integer, w integer)\n"
        "REGISTER QUERY q AS ISTREAM(SELECT k, SUM(v) AS total, COUNT(*) AS n "
        "FROM S [Range 1 second] GROUP BY k)\n"
    ),
    "join": (
        "REGISTER STREAM S (k integer, v integer)\nREGISTER STREAM T (k integer, w integer)\n"
        "REGISTER QUERY q AS ISTREAM(SELECT S.k, v, w FROM S [Range 100], T [Rows 1] WHERE S.k = T.k)\n"
    ),
}

CHILD = """
import sys
from semiactive.embedded import query
files, slice_rows = sys.argv[3:], int(sys.argv[2])
with open("/dev/null", "w") as out:
    query.run(sys.argv[1], files, output=None, executor="dts", run_limit=100, out=out, slice_rows=slice_rows)
"""


def generate(folder: Path, rows: int) -> list[str]:
    s, t = folder / f"S{rows}.csv", folder / f"T{rows}.csv"
    with s.open("w") as f:
        f.write("ts,k,v\n")
        f.writelines(f"{i},{i % 50},{i % 7}\n" for i in range(rows))
    with t.open("w") as f:
        f.write("ts,k,w\n")
        f.writelines(f"{i * 10},{i % 50},{i % 11}\n" for i in range(rows // 10))
    return [f"S={s}", f"T={t}"]


def measure(cql: Path, streams: list[str], slice_rows: int) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one run."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(cql), str(slice_rows), *streams])
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the run over {streams} failed")
    return usage.ru_maxrss / 1024, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=30_000, help="rows of S in the small run (large: 10x)")
    parser.add_argument("--skip-whole", action="store_true", help="do not run the one-slice comparison")
    args = parser.parse_args()
    modes = [("slices", 10_000)] + ([] if args.skip_whole else [("one slice", 0)])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"{'query':<10} {'mode':<10} {'rows':>9} {'peak MB':>9} {'s':>7} {'rows/s':>9}")
        for name, text in QUERIES.items():
            cql = folder / f"{name}.cql"
            cql.write_text(text)
            for rows in (args.rows, args.rows * 10):
                streams = generate(folder, rows)
                total = rows + rows // 10
                for mode, slice_rows in modes:
                    peak, seconds = measure(cql, streams, slice_rows)
                    rate = total / seconds
                    row = f"{name:<10} {mode:<10} {total:>9} {peak:>9.1f} {seconds:>7.2f} {rate:>9.0f}"
                    print(row, flush=True)


if __name__ == "__main__":
    main()
