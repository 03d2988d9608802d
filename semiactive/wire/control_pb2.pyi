from semiactive.wire import dataplane_pb2 as _dataplane_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StartRequest(_message.Message):
    __slots__ = ("t0_unix",)
    T0_UNIX_FIELD_NUMBER: _ClassVar[int]
    t0_unix: float
    def __init__(self, t0_unix: _Optional[float] = ...) -> None: ...

class StopRequest(_message.Message):
    __slots__ = ("exit", "now")
    EXIT_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    exit: bool
    now: bool
    def __init__(self, exit: _Optional[bool] = ..., now: _Optional[bool] = ...) -> None: ...

class EdgeStatus(_message.Message):
    __slots__ = ("edge", "peer", "seq", "acked", "watermark", "end_of_stream", "retained", "batch_size", "backup_batches", "backup_rows", "backup_bytes", "data_rows", "data_bytes", "cuts", "uncut_rows", "received_rows", "receive_s", "connected")
    EDGE_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    END_OF_STREAM_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    BACKUP_BATCHES_FIELD_NUMBER: _ClassVar[int]
    BACKUP_ROWS_FIELD_NUMBER: _ClassVar[int]
    BACKUP_BYTES_FIELD_NUMBER: _ClassVar[int]
    DATA_ROWS_FIELD_NUMBER: _ClassVar[int]
    DATA_BYTES_FIELD_NUMBER: _ClassVar[int]
    CUTS_FIELD_NUMBER: _ClassVar[int]
    UNCUT_ROWS_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_ROWS_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_S_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    edge: str
    peer: str
    seq: int
    acked: int
    watermark: int
    end_of_stream: bool
    retained: int
    batch_size: int
    backup_batches: int
    backup_rows: int
    backup_bytes: int
    data_rows: int
    data_bytes: int
    cuts: int
    uncut_rows: int
    received_rows: int
    receive_s: float
    connected: bool
    def __init__(self, edge: _Optional[str] = ..., peer: _Optional[str] = ..., seq: _Optional[int] = ..., acked: _Optional[int] = ..., watermark: _Optional[int] = ..., end_of_stream: _Optional[bool] = ..., retained: _Optional[int] = ..., batch_size: _Optional[int] = ..., backup_batches: _Optional[int] = ..., backup_rows: _Optional[int] = ..., backup_bytes: _Optional[int] = ..., data_rows: _Optional[int] = ..., data_bytes: _Optional[int] = ..., cuts: _Optional[int] = ..., uncut_rows: _Optional[int] = ..., received_rows: _Optional[int] = ..., receive_s: _Optional[float] = ..., connected: _Optional[bool] = ...) -> None: ...

class NodeStatus(_message.Message):
    __slots__ = ("name", "role", "stage", "epoch", "finished", "inputs", "outputs", "tuples_in", "tuples_out", "uptime_s", "state", "views", "resyncs", "operator_rows", "operator_busy_s", "input_backlog", "latency_rows", "latency_sum_s", "outage", "rejected")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    TUPLES_IN_FIELD_NUMBER: _ClassVar[int]
    TUPLES_OUT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    RESYNCS_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_ROWS_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_BUSY_S_FIELD_NUMBER: _ClassVar[int]
    INPUT_BACKLOG_FIELD_NUMBER: _ClassVar[int]
    LATENCY_ROWS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_SUM_S_FIELD_NUMBER: _ClassVar[int]
    OUTAGE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    stage: str
    epoch: int
    finished: bool
    inputs: _containers.RepeatedCompositeFieldContainer[EdgeStatus]
    outputs: _containers.RepeatedCompositeFieldContainer[EdgeStatus]
    tuples_in: int
    tuples_out: int
    uptime_s: float
    state: str
    views: _containers.RepeatedCompositeFieldContainer[StageView]
    resyncs: int
    operator_rows: int
    operator_busy_s: float
    input_backlog: int
    latency_rows: int
    latency_sum_s: float
    outage: str
    rejected: int
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., stage: _Optional[str] = ..., epoch: _Optional[int] = ..., finished: _Optional[bool] = ..., inputs: _Optional[_Iterable[_Union[EdgeStatus, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[EdgeStatus, _Mapping]]] = ..., tuples_in: _Optional[int] = ..., tuples_out: _Optional[int] = ..., uptime_s: _Optional[float] = ..., state: _Optional[str] = ..., views: _Optional[_Iterable[_Union[StageView, _Mapping]]] = ..., resyncs: _Optional[int] = ..., operator_rows: _Optional[int] = ..., operator_busy_s: _Optional[float] = ..., input_backlog: _Optional[int] = ..., latency_rows: _Optional[int] = ..., latency_sum_s: _Optional[float] = ..., outage: _Optional[str] = ..., rejected: _Optional[int] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ("n", "sender", "stage")
    N_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    n: int
    sender: str
    stage: str
    def __init__(self, n: _Optional[int] = ..., sender: _Optional[str] = ..., stage: _Optional[str] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ("n", "epoch")
    N_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    n: int
    epoch: int
    def __init__(self, n: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class StageView(_message.Message):
    __slots__ = ("stage", "epoch", "version", "primary", "secondary")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    SECONDARY_FIELD_NUMBER: _ClassVar[int]
    stage: str
    epoch: int
    version: int
    primary: str
    secondary: str
    def __init__(self, stage: _Optional[str] = ..., epoch: _Optional[int] = ..., version: _Optional[int] = ..., primary: _Optional[str] = ..., secondary: _Optional[str] = ...) -> None: ...
