"""The broker sources' merge: emission independent of arrival order, and a
reader started from any checkpoint gives every later row the same seq."""

from __future__ import annotations

import random

import pytest

from semiactive.node.connectors.event_time_merge import EventTimeMerge, MergeCheckpoint

Message = tuple[int, int, int]  # partition, position, ts


def partitions(rng: random.Random, count: int, rows: int, jitter: int) -> dict[int, list[Message]]:
    """Per partition, rows with rising ts plus disorder up to ``jitter``."""
    out: dict[int, list[Message]] = {}
    for p in range(count):
        base = 0
        msgs = []
        for pos in range(rows):
            base += rng.randint(0, 3)
            msgs.append((p, pos, max(0, base - rng.randint(0, jitter))))
        out[p] = msgs
    return out


def interleave(rng: random.Random, parts: dict[int, list[Message]]) -> list[Message]:
    """Every partition's messages in order, the partitions mixed at random."""
    cursors = {p: 0 for p, msgs in parts.items() if msgs}
    out = []
    while cursors:
        p = rng.choice(sorted(cursors))
        out.append(parts[p][cursors[p]])
        cursors[p] += 1
        if cursors[p] == len(parts[p]):
            del cursors[p]
    return out


def run(
    merge: EventTimeMerge, messages: list[Message], seq: int, kill_after: int | None = None
) -> tuple[list[tuple[int, int, int, int]], list[Message], list[MergeCheckpoint]]:
    """Feed ``messages``; return (seq, ts, partition, position) emitted, the
    late ones, and a checkpoint after each emission."""
    emitted: list[tuple[int, int, int, int]] = []
    late: list[Message] = []
    checkpoints: list[MergeCheckpoint] = []
    for i, (p, pos, ts) in enumerate(messages):
        if kill_after is not None and i == kill_after:
            return emitted, late, checkpoints
        if not merge.push(p, pos, ts, (p, pos)):
            late.append((p, pos, ts))
        ready = merge.ready()
        for (key_ts, key_p, key_pos), _ in ready:
            seq += 1
            emitted.append((seq, key_ts, key_p, key_pos))
        if ready:
            checkpoints.append(merge.checkpoint(seq))
    for (key_ts, key_p, key_pos), _ in merge.flush():
        seq += 1
        emitted.append((seq, key_ts, key_p, key_pos))
    return emitted, late, checkpoints


def start(count: int) -> MergeCheckpoint:
    return MergeCheckpoint.first({p: 0 for p in range(count)})


@pytest.mark.parametrize("seed", range(40))
def test_emission_does_not_depend_on_arrival_order(seed: int) -> None:
    rng = random.Random(seed)
    count, delay = rng.randint(1, 4), rng.choice([0, 2, 5])
    parts = partitions(rng, count, 60, jitter=rng.choice([0, 3, 8]))
    first, late1, _ = run(EventTimeMerge(start(count), delay), interleave(rng, parts), 0)
    second, late2, _ = run(EventTimeMerge(start(count), delay), interleave(rng, parts), 0)
    assert first == second
    assert sorted(late1) == sorted(late2)
    assert [e[1] for e in first] == sorted(e[1] for e in first)  # non-decreasing ts
    assert len(first) + len(late1) == count * 60  # every message emitted or late


@pytest.mark.parametrize("seed", range(60))
def test_a_reader_started_from_a_checkpoint_gives_the_same_seqs(seed: int) -> None:
    rng = random.Random(1000 + seed)
    count, delay = rng.randint(1, 4), rng.choice([0, 3])
    parts = partitions(rng, count, 50, jitter=rng.choice([0, 4]))
    reference, late_ref, _ = run(EventTimeMerge(start(count), delay), interleave(rng, parts), 0)
    messages = interleave(rng, parts)
    _, _, checkpoints = run(
        EventTimeMerge(start(count), delay), messages, 0, kill_after=rng.randint(1, len(messages))
    )
    if not checkpoints:
        return
    ck = MergeCheckpoint.from_json(rng.choice(checkpoints).to_json())  # as the progress file keeps it
    again = {p: [m for m in msgs if m[1] >= ck.partitions[p].position] for p, msgs in parts.items()}
    rest, late, _ = run(EventTimeMerge(ck, delay), interleave(rng, again), ck.seq)
    assert rest == reference[ck.seq :]
    assert set(late) <= set(late_ref)


def test_a_late_row_is_rejected_only_beyond_the_delay() -> None:
    merge = EventTimeMerge(start(1), max_delay_ms=5)
    assert merge.push(0, 0, 100, ())
    assert merge.push(0, 1, 95, ())  # within 5 ms
    assert not merge.push(0, 2, 94, ())
    assert merge.watermark == 94
    assert [key for key, _ in merge.ready()] == []
    assert merge.push(0, 3, 106, ())
    assert [key for key, _ in merge.ready()] == [(95, 0, 1), (100, 0, 0)]


def test_an_idle_partition_holds_the_stream_until_the_end() -> None:
    merge = EventTimeMerge(start(2), max_delay_ms=0)
    for pos in range(3):
        merge.push(0, pos, pos * 10, ())
    assert merge.ready() == []
    assert merge.held == 3
    assert [key for key, _ in merge.flush()] == [(0, 0, 0), (10, 0, 1), (20, 0, 2)]


def test_a_checkpoint_reads_again_from_the_oldest_held_row() -> None:
    merge = EventTimeMerge(start(2), max_delay_ms=0)
    merge.push(0, 0, 5, ())
    merge.push(1, 0, 7, ())
    merge.push(0, 1, 9, ())
    assert [key for key, _ in merge.ready()] == [(5, 0, 0)]
    ck = merge.checkpoint(1)
    assert ck.last_key == (5, 0, 0)
    assert ck.partitions[0].position == 1 and ck.partitions[0].seen == 5
    assert ck.partitions[1].position == 0
