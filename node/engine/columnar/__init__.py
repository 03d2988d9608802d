"""Columnar execution: a program's queries over column batches (numpy).

The row engine (:mod:`semiactive.node.engine.engine`) stays the reference;
this package runs the queries whose every operator has a vectorized form
and says, for the others, why not (:func:`shape.recognize`).
"""
