"""Independent checks of what a run delivered: ``verify`` (every sink against
the engine run again in one process, and against the SQLite oracle), the
SQLite oracle of CQL (``sql_oracle``, ``sql_translate``, ``sql_exprs``),
how two outputs are compared (``diff``), and the plain semantics of MQO
queries (``mqo_reference``)."""
