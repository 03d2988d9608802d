"""The node daemon, the I/O shell around the pure sections and HA state
machines: ``main`` (``semiactive node``: start-up), ``daemon``
(:class:`NodeDaemon`: the gRPC servers and the roles it hosts),
``transport`` (the data-plane servicer: pushes, acks, heartbeats),
``outbound`` (senders to consumers), ``roles`` (replica, source, sink),
``metrics`` (Prometheus), ``forked_capture`` (state snapshots taken in a
forked child), ``peers`` and ``coordinator_link``."""
