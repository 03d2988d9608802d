"""A node: the daemon that hosts one operator partition (stage replica).

- ``cql``: the continuous query language, parsed, bound and planned (pure);
- ``engine``: the operators that execute a plan, with time splitting (pure);
- ``sections``: the input section (merge, dedup, routing), operator
  section (the engine on a stage's program) and MQO section, and the row
  codec of the wire (pure);
- ``connectors``: how rows enter and leave the system (files, generators,
  JSON Lines);
- ``service``: the daemon itself, the I/O shell: gRPC servers and senders,
  the replica, source and sink roles, metrics, start-up (``semiactive node``).
"""
