"""A node's sections, pure (ha-protocol.md): the input section (``input``:
merge of the input edges in ts order, dedup by seq, Level-0 cuts), the
operator section (``operator``: the engine on a stage's program), the MQO
section (``mqo``: shared window joins), and what they need of rows: the
wire's fixed-size record codec (``codec``), routing to partitions
(``partitions``) and ASSIGN connections (``connections``). No sockets, no
clock: ``semiactive.ha.replica`` composes them, the daemon drives it."""
