"""The node daemon: its input, operator and output sections, the query
engine at the operator section's core, and the gRPC shell around them."""

import os

# A node forks to capture operator states (node/forked_capture.py). gRPC's
# own fork handlers restart its pollers in the child, where they crash
# (grpcio 1.85: 41 of 100 forks during RPCs); the child uses no gRPC,
# so they are off. It must be set before grpc is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
