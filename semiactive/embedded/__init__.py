"""Programs run in this process, without a cluster: CQL (``query``:
``semiactive query check|run``) and MQO queries (``mqo``: ``semiactive mqo
run``)."""
