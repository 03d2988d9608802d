"""Multi-query optimisation of continuous queries (the MQO paper), pure.

Read top-down: ``query`` (the MASTER / WINDOW SIZE language), ``clocks``,
``similarity`` (USE bitmaps from an arrival log, the Jaccard similarity),
``grouping`` (base groups, hierarchical clustering), ``plan`` (shared join
trees per cluster), ``executor`` (shared window joins, per-query filters,
re-clustering with window-relation hand-over), ``reference`` (the
semantics, plainly, for tests). The embedded runner and the experiment are
``semiactive mqo`` / ``semiactive experiment mqo`` (docs/mqo.md).
"""
