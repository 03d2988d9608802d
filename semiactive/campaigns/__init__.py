"""Experiments and fault campaigns over many runs of ``cluster up``: the
nemesis (faults from outside, ``nemesis``), ``semiactive chaos``
(``chaos``), and the papers' experiments (``sweep``: overhead and recovery
per mode and batch size; ``asas``: Adaptive SAS under a step; ``mqo``:
multi-query optimisation with a pattern change)."""
