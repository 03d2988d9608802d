"""What every process of a cluster runs on, node and coordinator alike:
identities and mutual TLS (``tls``, ``authorization``), the gRPC network
seam that the simulation replaces (``network``), health checks
(``health``), clocks (``clock``), telemetry files (``events``,
``telemetry``), wire <-> protocol messages (``messages``), the metrics
endpoint (``metrics_endpoint``), the start-up glue of a process
(``process``) and atomic file writes (``atomic_file``)."""
