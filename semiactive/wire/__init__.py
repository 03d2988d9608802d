"""Generated protobuf and gRPC stubs for ``proto/semiactive/wire/*.proto``.

The stubs are committed; ``python -m semiactive.wire`` regenerates them and a
test checks they match the ``.proto`` sources.
"""
