"""semiactive: a distributed stream processing engine whose stages stay
available through failures, with a tunable trade-off between backup
bandwidth and recovery time (Semi-Active Standby).

One import root; its packages, from the bottom layer up (the import-linter
contract in ``.importlinter`` enforces the order, docs/architecture.md
draws it):

- ``errors``, ``config``, ``wire``: what everything shares (the user-error
  base, the typed configuration, the generated protobuf messages);
- ``node.cql``, ``node.engine``: the continuous query compiler and engine
  (pure); ``mqo``, ``placement``: multi-query optimisation and
  network-aware placement (pure); ``node.sections``: a node's input,
  operator and MQO sections (pure); ``ha``: the HA protocol's state
  machines and cost model (pure); ``topology``: a configuration compiled
  into stages and edges (pure);
- ``runtime``: what every cluster process runs on (TLS, the gRPC network
  seam, telemetry files, clocks); ``node.connectors``: source and sink
  formats; ``node.service``: the node daemon; ``coordinator``: the control
  plane; ``embedded``: programs run in this process, without a cluster;
- ``admin``, ``oracle``: operator commands against a running cluster, and
  the independent checks of a run's output;
- ``launcher``: a whole cluster on this machine (``cluster up``);
- ``campaigns``, ``simulation``, ``analytics``: experiments and fault
  campaigns, the deterministic simulation, the telemetry report job;
- ``cli``: the ``semiactive`` command.

The folders ``node/``, ``ha/`` and ``coordinator/`` sit at the top of the
repository (the project's layout) and are linked into this package.
"""

import os

# A node forks to capture operator states (node/service/forked_capture.py).
# gRPC's own fork handlers restart its pollers in the child, where they
# crash (grpcio 1.85: 41 of 100 forks during RPCs); the child uses no gRPC,
# so they are off. It must be set before grpc is first imported, which
# every process of ours does after importing this package.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

__version__ = "0.1.0"
