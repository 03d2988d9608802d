from semiactive.wire import control_pb2 as _control_pb2
from semiactive.wire import dataplane_pb2 as _dataplane_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MigrateRequest(_message.Message):
    __slots__ = ("stage", "target")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    stage: str
    target: str
    def __init__(self, stage: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class MigrateReply(_message.Message):
    __slots__ = ("accepted", "message")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class NodeReport(_message.Message):
    __slots__ = ("status", "address")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    status: _control_pb2.NodeStatus
    address: str
    def __init__(self, status: _Optional[_Union[_control_pb2.NodeStatus, _Mapping]] = ..., address: _Optional[str] = ...) -> None: ...

class ReportReply(_message.Message):
    __slots__ = ("views", "batch_sizes", "alive")
    class BatchSizesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZES_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    views: _containers.RepeatedCompositeFieldContainer[_control_pb2.StageView]
    batch_sizes: _containers.ScalarMap[str, int]
    alive: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, views: _Optional[_Iterable[_Union[_control_pb2.StageView, _Mapping]]] = ..., batch_sizes: _Optional[_Mapping[str, int]] = ..., alive: _Optional[_Iterable[str]] = ...) -> None: ...

class EdgeTuning(_message.Message):
    __slots__ = ("edge", "tuner", "batch_size", "measured", "bw_estimate_bytes_per_s", "recovery_estimate_s", "bw_max_bytes_per_s", "recovery_max_s", "backup_bytes_per_s", "input_rate_per_s", "branch", "changes")
    EDGE_FIELD_NUMBER: _ClassVar[int]
    TUNER_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MEASURED_FIELD_NUMBER: _ClassVar[int]
    BW_ESTIMATE_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_ESTIMATE_S_FIELD_NUMBER: _ClassVar[int]
    BW_MAX_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_MAX_S_FIELD_NUMBER: _ClassVar[int]
    BACKUP_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    INPUT_RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    edge: str
    tuner: str
    batch_size: int
    measured: bool
    bw_estimate_bytes_per_s: float
    recovery_estimate_s: float
    bw_max_bytes_per_s: float
    recovery_max_s: float
    backup_bytes_per_s: float
    input_rate_per_s: float
    branch: str
    changes: int
    def __init__(self, edge: _Optional[str] = ..., tuner: _Optional[str] = ..., batch_size: _Optional[int] = ..., measured: _Optional[bool] = ..., bw_estimate_bytes_per_s: _Optional[float] = ..., recovery_estimate_s: _Optional[float] = ..., bw_max_bytes_per_s: _Optional[float] = ..., recovery_max_s: _Optional[float] = ..., backup_bytes_per_s: _Optional[float] = ..., input_rate_per_s: _Optional[float] = ..., branch: _Optional[str] = ..., changes: _Optional[int] = ...) -> None: ...

class StageState(_message.Message):
    __slots__ = ("stage", "role", "mode", "primary", "secondary", "epoch", "version", "protected", "batch_size", "tuning")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    SECONDARY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    TUNING_FIELD_NUMBER: _ClassVar[int]
    stage: str
    role: str
    mode: str
    primary: str
    secondary: str
    epoch: int
    version: int
    protected: bool
    batch_size: int
    tuning: _containers.RepeatedCompositeFieldContainer[EdgeTuning]
    def __init__(self, stage: _Optional[str] = ..., role: _Optional[str] = ..., mode: _Optional[str] = ..., primary: _Optional[str] = ..., secondary: _Optional[str] = ..., epoch: _Optional[int] = ..., version: _Optional[int] = ..., protected: _Optional[bool] = ..., batch_size: _Optional[int] = ..., tuning: _Optional[_Iterable[_Union[EdgeTuning, _Mapping]]] = ...) -> None: ...

class NodeState(_message.Message):
    __slots__ = ("name", "role", "stage", "liveness", "last_report_s", "address", "outage")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    LAST_REPORT_S_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    OUTAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    stage: str
    liveness: str
    last_report_s: float
    address: str
    outage: str
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., stage: _Optional[str] = ..., liveness: _Optional[str] = ..., last_report_s: _Optional[float] = ..., address: _Optional[str] = ..., outage: _Optional[str] = ...) -> None: ...

class ClusterStatus(_message.Message):
    __slots__ = ("name", "uptime_s", "stages", "nodes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    name: str
    uptime_s: float
    stages: _containers.RepeatedCompositeFieldContainer[StageState]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeState]
    def __init__(self, name: _Optional[str] = ..., uptime_s: _Optional[float] = ..., stages: _Optional[_Iterable[_Union[StageState, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[NodeState, _Mapping]]] = ...) -> None: ...
