"""Operator commands against a running or deployed cluster: ``status``,
``migrate``, MQO query ``registration``, ``deployment`` (``start`` and
``drain`` of a cluster something else runs) and ``certificates``."""
