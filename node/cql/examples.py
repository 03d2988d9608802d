"""The example programs of seed 001, with the paper's typos fixed
(``resource.value`` -> ``resource.val``; the unbalanced ``)`` closing
``avg_0``), for tests, benchmarks and documentation.

Fig. 1 (automated trading) is recursive: buy_event -> resource_stream ->
resource -> buy_event. As printed in Fig. 1 it has no delay and is rejected
(unless compiled with ``insert_delays``); section 3.1 ends resource_stream
with ``<Now>`` (:data:`FIG1_DELAYED`). Fig. 7 (per-id running averages) has
nested loops; :func:`fig7` builds it with 1, 2 or 4 sub-queries.
"""

from __future__ import annotations

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
