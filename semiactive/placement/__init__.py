"""Network-aware operator placement (the placement paper), pure.

Read top-down: ``network`` (nodes, links, shortest-path latencies, from a
Topology Zoo / SNDlib graph or a node-link file), ``plan`` (operators,
pinned sources and sinks, edges with data rates, ASSIGN interests),
``usage`` (u = sum of rate x latency, one transfer per stream and node
pair), then the methods: ``relaxation`` (Pietzuch's spring relaxation in a
latency cost space, the seed's Calculate), ``exact`` (tree dynamic
programming, an ILP for shared plans), ``search`` (local search on u and
the sink / sources baselines); ``solve`` picks one by name. The command is
``semiactive placement solve`` (docs/placement.md).
"""
