from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Channel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANNEL_UNSPECIFIED: _ClassVar[Channel]
    DATA: _ClassVar[Channel]
    BACKUP: _ClassVar[Channel]
CHANNEL_UNSPECIFIED: Channel
DATA: Channel
BACKUP: Channel

class IngestBatch(_message.Message):
    __slots__ = ("rows", "watermark", "end_of_stream")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    END_OF_STREAM_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedScalarFieldContainer[str]
    watermark: int
    end_of_stream: bool
    def __init__(self, rows: _Optional[_Iterable[str]] = ..., watermark: _Optional[int] = ..., end_of_stream: _Optional[bool] = ...) -> None: ...

class IngestReply(_message.Message):
    __slots__ = ("accepted", "last_seq")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    last_seq: int
    def __init__(self, accepted: _Optional[int] = ..., last_seq: _Optional[int] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Hello(_message.Message):
    __slots__ = ("edge", "sender", "epoch", "channel", "layout")
    EDGE_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    edge: str
    sender: str
    epoch: int
    channel: Channel
    layout: str
    def __init__(self, edge: _Optional[str] = ..., sender: _Optional[str] = ..., epoch: _Optional[int] = ..., channel: _Optional[_Union[Channel, str]] = ..., layout: _Optional[str] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("first_seq", "count", "rows", "watermark", "end_of_stream", "elided_ts", "owned", "entered_unix")
    FIRST_SEQ_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    END_OF_STREAM_FIELD_NUMBER: _ClassVar[int]
    ELIDED_TS_FIELD_NUMBER: _ClassVar[int]
    OWNED_FIELD_NUMBER: _ClassVar[int]
    ENTERED_UNIX_FIELD_NUMBER: _ClassVar[int]
    first_seq: int
    count: int
    rows: bytes
    watermark: int
    end_of_stream: bool
    elided_ts: _containers.RepeatedScalarFieldContainer[int]
    owned: bytes
    entered_unix: float
    def __init__(self, first_seq: _Optional[int] = ..., count: _Optional[int] = ..., rows: _Optional[bytes] = ..., watermark: _Optional[int] = ..., end_of_stream: _Optional[bool] = ..., elided_ts: _Optional[_Iterable[int]] = ..., owned: _Optional[bytes] = ..., entered_unix: _Optional[float] = ...) -> None: ...

class ResyncPoint(_message.Message):
    __slots__ = ("position", "out_seq", "cut_position", "edge_cut", "counters", "time", "state_position")
    class EdgeCutEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    POSITION_FIELD_NUMBER: _ClassVar[int]
    OUT_SEQ_FIELD_NUMBER: _ClassVar[int]
    CUT_POSITION_FIELD_NUMBER: _ClassVar[int]
    EDGE_CUT_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_POSITION_FIELD_NUMBER: _ClassVar[int]
    position: int
    out_seq: int
    cut_position: int
    edge_cut: _containers.ScalarMap[str, int]
    counters: _containers.RepeatedCompositeFieldContainer[Counters]
    time: int
    state_position: int
    def __init__(self, position: _Optional[int] = ..., out_seq: _Optional[int] = ..., cut_position: _Optional[int] = ..., edge_cut: _Optional[_Mapping[str, int]] = ..., counters: _Optional[_Iterable[_Union[Counters, _Mapping]]] = ..., time: _Optional[int] = ..., state_position: _Optional[int] = ...) -> None: ...

class StateChunk(_message.Message):
    __slots__ = ("position", "total", "offset", "data")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    position: int
    total: int
    offset: int
    data: bytes
    def __init__(self, position: _Optional[int] = ..., total: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class Counters(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("hello", "batch", "resync", "state", "pressure")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    RESYNC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PRESSURE_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    batch: Batch
    resync: ResyncPoint
    state: StateChunk
    pressure: Pressure
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., batch: _Optional[_Union[Batch, _Mapping]] = ..., resync: _Optional[_Union[ResyncPoint, _Mapping]] = ..., state: _Optional[_Union[StateChunk, _Mapping]] = ..., pressure: _Optional[_Union[Pressure, _Mapping]] = ...) -> None: ...

class Pressure(_message.Message):
    __slots__ = ("from_seq", "through_seq")
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQ_FIELD_NUMBER: _ClassVar[int]
    from_seq: int
    through_seq: int
    def __init__(self, from_seq: _Optional[int] = ..., through_seq: _Optional[int] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("next_seq", "idle_from")
    NEXT_SEQ_FIELD_NUMBER: _ClassVar[int]
    IDLE_FROM_FIELD_NUMBER: _ClassVar[int]
    next_seq: int
    idle_from: int
    def __init__(self, next_seq: _Optional[int] = ..., idle_from: _Optional[int] = ...) -> None: ...

class Interest(_message.Message):
    __slots__ = ("idle_from",)
    IDLE_FROM_FIELD_NUMBER: _ClassVar[int]
    idle_from: int
    def __init__(self, idle_from: _Optional[int] = ...) -> None: ...

class Level0(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class Level1(_message.Message):
    __slots__ = ("point", "epoch")
    POINT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    point: ResyncPoint
    epoch: int
    def __init__(self, point: _Optional[_Union[ResyncPoint, _Mapping]] = ..., epoch: _Optional[int] = ...) -> None: ...

class Feedback(_message.Message):
    __slots__ = ("welcome", "level0", "level1", "interest", "state")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    LEVEL0_FIELD_NUMBER: _ClassVar[int]
    LEVEL1_FIELD_NUMBER: _ClassVar[int]
    INTEREST_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    level0: Level0
    level1: Level1
    interest: Interest
    state: StateChunk
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., level0: _Optional[_Union[Level0, _Mapping]] = ..., level1: _Optional[_Union[Level1, _Mapping]] = ..., interest: _Optional[_Union[Interest, _Mapping]] = ..., state: _Optional[_Union[StateChunk, _Mapping]] = ...) -> None: ...

class AckNotice(_message.Message):
    __slots__ = ("edge", "sender", "epoch", "seq", "point", "state")
    EDGE_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    POINT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    edge: str
    sender: str
    epoch: int
    seq: int
    point: ResyncPoint
    state: StateChunk
    def __init__(self, edge: _Optional[str] = ..., sender: _Optional[str] = ..., epoch: _Optional[int] = ..., seq: _Optional[int] = ..., point: _Optional[_Union[ResyncPoint, _Mapping]] = ..., state: _Optional[_Union[StateChunk, _Mapping]] = ...) -> None: ...
