"""The example programs of the recursive CQL paper, with the paper's typos fixed
(``resource.value`` -> ``resource.val``; the unbalanced ``)`` closing
``avg_0``), for tests, benchmarks and documentation.

Fig. 1 (automated trading) is recursive: buy_event -> resource_stream ->
resource -> buy_event. As printed in Fig. 1 it has no delay and is rejected
(unless compiled with ``insert_delays``); section 3.1 ends resource_stream
with ``<Now>`` (:data:`FIG1_DELAYED`). Fig. 7 (per-id running averages) has
nested loops; :func:`fig7` builds it with 1, 2 or 4 sub-queries and
:func:`fig7_open` its opened, non-recursive form (section 4.1).

This module is the single source of ``examples/*.cql`` for these programs
(:data:`FILES`): ``python -m semiactive.node.cql.examples examples`` rewrites them,
and a test checks that the files equal the texts here.
"""

from __future__ import annotations

import sys
from pathlib import Path

FIG1_INPUTS = """\
REGISTER STREAM market (stock_id integer, price integer)
REGISTER STREAM initial_resource (val integer)
REGISTER STREAM stock_stream (id integer, num integer, price integer)
"""

_FIG1_QUERIES = """\
REGISTER QUERY buy_event
ISTREAM(
SELECT stock.id, 1000 AS num, market.price
FROM stock, resource, market [Now]
WHERE stock.id = market.stock_id
AND stock.num = 0
AND market.price < 500
AND resource.val > market.price * 1000)
REGISTER QUERY resource
SELECT * FROM resource_stream [Rows 1]
REGISTER QUERY resource_stream
ISTREAM(
SELECT * FROM initial_resource [Now]
UNION ALL
SELECT resource.val
- buy_event.price * buy_event.num AS val
FROM resource, buy_event [Now]){delay}
REGISTER QUERY stock
SELECT * FROM stock_stream
[Partition By stock_stream.id Rows 1]
"""

FIG1 = FIG1_INPUTS + _FIG1_QUERIES.format(delay="")
FIG1_DELAYED = FIG1_INPUTS + _FIG1_QUERIES.format(delay="<Now>")


def fig7(subqueries: int = 2) -> str:
    """Fig. 7 with ``subqueries`` inner loops; sub-query ``i`` handles the
    ids with ``id % subqueries = i``."""
    parts = [
        "REGISTER STREAM input (id integer, val integer)",
        "REGISTER QUERY uni_input\nSELECT * FROM input[Now]\nUNION ALL\nSELECT * FROM all_avg_delay[Now]",
    ]
    for i in range(subqueries):
        parts.append(f"REGISTER QUERY avg_delay_{i}\nISTREAM(\nSELECT * FROM avg_{i})<Now>")
        parts.append(
            f"REGISTER QUERY avg_{i}\n"
            "SELECT * FROM uni_input\n"
            f"WHERE id % {subqueries} = {i}\n"
            "UNION ALL\n"
            "SELECT id, avg(val ) AS val\n"
            f"FROM avg_delay_{i}\n"
            "[PARTITION by id ROWS 1]\n"
            "GROUP BY id"
        )
    branches = "\nUNION ALL\n".join(f"SELECT * FROM avg_{i}" for i in range(subqueries))  # noqa: S608
    parts.append(f"REGISTER QUERY all_avg_delay\nISTREAM(\n{branches})<Now>")
    return "\n".join(parts) + "\n"


def fig7_open(subqueries: int = 2) -> str:
    """Fig. 7 with its loops opened (section 4.1): every fed-back stream is
    replaced by an input, ``dummy_all`` for all_avg_delay and ``dummy_i`` for
    avg_delay_i, each with the fed-back stream's schema. The queries stay as
    in :func:`fig7` (avg_delay_i and all_avg_delay are still computed, now
    read by nobody inside), so every operator does the same work. Fed the
    recursive run's all_avg_delay and avg_delay_i series, it produces exactly
    the recursive run's outputs."""
    dummies = ["all", *(str(i) for i in range(subqueries))]
    declared = "".join(f"REGISTER STREAM dummy_{d} (id integer, val float)\n" for d in dummies)
    text = fig7(subqueries).replace(
        "REGISTER STREAM input (id integer, val integer)\n",
        "REGISTER STREAM input (id integer, val integer)\n" + declared,
    )
    text = text.replace("SELECT * FROM all_avg_delay[Now]", "SELECT * FROM dummy_all[Now]")
    for i in range(subqueries):
        text = text.replace(f"FROM avg_delay_{i}\n[PARTITION", f"FROM dummy_{i}\n[PARTITION")
    return text


def _comment(text: str) -> str:
    return "".join(f"-- {line}".rstrip() + "\n" for line in text.strip("\n").splitlines())


_TRADING_HEADER = """
Seed 001, Fig. 1: automated trading, with the delay of section 3.1.
buy_event orders 1000 shares of a stock we hold none of when it ticks below
500 and the money (resource) covers it; resource_stream takes the cost off
the money. The loop buy_event -> resource_stream -> resource -> buy_event
passes through <Now> (1 ms): an order at t is paid for at t + 1 ms, so a
tick at t + 1 ms already sees the reduced money. Two ticks at the same
instant both see the same money (docs/recursion.md).

  semiactive query run examples/trading.cql --output buy_event \\
      --stream market=examples/data/trading-distinct/market.csv \\
      --stream initial_resource=examples/data/trading-distinct/initial_resource.csv \\
      --stream stock_stream=examples/data/trading-distinct/stock_stream.csv

(examples/data/trading-tie/ has two ticks sharing a timestamp.)
"""

_FIG7_HEADER = """
Seed 001, Fig. 7 with {n} sub-quer{ies}: running averages of val per id,
recursive. all_avg_delay is fed back into uni_input and each avg_delay_i
into avg_i, both through <Now>: nested loops (docs/recursion.md).

  semiactive query run examples/fig7-{n}.cql --stream input=input.csv

input.csv has the columns ts,id,val (the paper: id = 0..3 repeating, val
counting up from 1). examples/fig7-{n}-open.cql is the non-recursive form.
"""

_FIG7_OPEN_HEADER = """
Seed 001, Fig. 7 with {n} sub-quer{ies}, opened (section 4.1): the streams fed
back in examples/fig7-{n}.cql come from outside instead, dummy_all in place
of all_avg_delay and dummy_i in place of avg_delay_i. Given the series the
recursive query feeds back, it computes exactly the same; it has no cycle, so
the heartbeat executor runs it too (--executor hb). Record the series, then
replay them:

  semiactive query run examples/fig7-{n}.cql --stream input=input.csv > all.jsonl
{record}
  semiactive query run examples/fig7-{n}-open.cql --stream input=input.csv \\
      --stream dummy_all=all.jsonl {replay}
"""


def files() -> dict[str, str]:
    """The example files: name in examples/ -> text."""
    out = {"trading.cql": _comment(_TRADING_HEADER) + FIG1_DELAYED}
    for n in (1, 2, 4):
        record = (
            f"  semiactive query run examples/fig7-{n}.cql --stream input=input.csv "
            f"--output avg_delay_{i} > avg{i}.jsonl"
            for i in range(n)
        )
        fill = {
            "n": n,
            "ies": "y" if n == 1 else "ies",
            "record": "\n".join(record),
            "replay": " ".join(f"--stream dummy_{i}=avg{i}.jsonl" for i in range(n)),
        }
        out[f"fig7-{n}.cql"] = _comment(_FIG7_HEADER.format(**fill)) + fig7(n)
        out[f"fig7-{n}-open.cql"] = _comment(_FIG7_OPEN_HEADER.format(**fill)) + fig7_open(n)
    return out


FILES = files()


def main(argv: list[str]) -> int:
    """Write :data:`FILES` into the directory given (examples/)."""
    if len(argv) != 1:
        print("usage: python -m semiactive.node.cql.examples EXAMPLES_DIR", file=sys.stderr)
        return 2
    for name, text in FILES.items():
        (Path(argv[0]) / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
