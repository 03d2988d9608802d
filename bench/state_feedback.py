"""How long a consumer's event loop stops when it acknowledges with an
operator state: the state goes ahead of the Level-1 point on the feedback of
every input stream (docs/ha.md, "Sent once"), and late in a Linear Road run
it is hundreds of MB on three streams.

    python bench/state_feedback.py [--mb 250] [--streams 3]

Serves one consumer's inbound edge over real gRPC on loopback (the data
plane's unit tests' sink server), opens
``--streams`` data streams to it as producers would, acknowledges once with
a point and a state of ``--mb`` MB, and prints how long ``ack`` took, the
event loop's longest stall until every stream had the point, and the time
until then. The producers' side runs in the same process and event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive.ha.resync import ResyncPoint, StateSnapshot
from semiactive.node.cql import plan
from semiactive.node.sections.codec import RowCodec
from semiactive.runtime.messages import point_to_pb
from semiactive.topology import Edge
from semiactive.wire import dataplane_pb2 as pb
from tests.unit.sink_server import served_sink

SCHEMA = plan.Schema((plan.Column("v", plan.INTEGER),))
CODEC = RowCodec(SCHEMA, plan.Kind.STREAM)
EDGE = Edge("up", "down", "s", SCHEMA, plan.Kind.STREAM, 0)


async def measure(megabytes: int, streams: int) -> tuple[float, float, float]:
    """Seconds ``ack`` took, the loop's longest stall, the time until every
    stream had the point."""
    async with served_sink(EDGE, CODEC) as (stub, session, _, _):
        calls = []
        for i in range(streams):
            call = stub.Push()
            hello = pb.Hello(
                edge=EDGE.id, sender=f"up-{i}", epoch=0, channel=pb.DATA, layout=CODEC.fingerprint()
            )
            await call.write(pb.Frame(hello=hello))
            await call.read()  # welcome
            calls.append(call)
        state = StateSnapshot(41, bytes(megabytes << 20))
        point = point_to_pb(ResyncPoint(45, 9, 42, {EDGE.id: 12}, ((), (2,)), 7))
        point.state_position = state.position
        stall, running = 0.0, True
        # The stall counted is the part of a tick within [started, ended]:
        # a slow tick before the ack is the machine's, not the ack's.
        started = ended = math.inf

        async def ticker() -> None:
            nonlocal stall
            tick = time.perf_counter()
            while running:
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                stall, tick = max(stall, min(now, ended) - max(tick, started)), now

        async def until_point(call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback]) -> None:
            while True:
                feedback = await call.read()
                assert isinstance(feedback, pb.Feedback), feedback
                if feedback.WhichOneof("body") == "level1":
                    return

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        session.ack(11, point, 0, state)
        ack_s = time.perf_counter() - started
        await asyncio.wait_for(asyncio.gather(*(until_point(c) for c in calls)), timeout=120)
        ended = time.perf_counter()
        total_s = ended - started
        running = False
        await ticking
        return ack_s, stall, total_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=250, help="the state's size in MB")
    parser.add_argument("--streams", type=int, default=3, help="input streams (producers)")
    args = parser.parse_args(argv)
    ack_s, stall_s, total_s = asyncio.run(measure(args.mb, args.streams))
    print(
        f"a {args.mb} MB state to {args.streams} streams: ack took {ack_s * 1000:.0f} ms, the event loop's "
        f"longest stall {stall_s * 1000:.0f} ms, every stream had the point after {total_s:.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
