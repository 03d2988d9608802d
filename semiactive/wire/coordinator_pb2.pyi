from semiactive.wire import control_pb2 as _control_pb2
from semiactive.wire import dataplane_pb2 as _dataplane_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeReport(_message.Message):
    __slots__ = ("status", "address")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    status: _control_pb2.NodeStatus
    address: str
    def __init__(self, status: _Optional[_Union[_control_pb2.NodeStatus, _Mapping]] = ..., address: _Optional[str] = ...) -> None: ...

class ReportReply(_message.Message):
    __slots__ = ("views",)
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    views: _containers.RepeatedCompositeFieldContainer[_control_pb2.StageView]
    def __init__(self, views: _Optional[_Iterable[_Union[_control_pb2.StageView, _Mapping]]] = ...) -> None: ...

class StageState(_message.Message):
    __slots__ = ("stage", "role", "mode", "primary", "secondary", "epoch", "version", "protected", "batch_size")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    SECONDARY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    stage: str
    role: str
    mode: str
    primary: str
    secondary: str
    epoch: int
    version: int
    protected: bool
    batch_size: int
    def __init__(self, stage: _Optional[str] = ..., role: _Optional[str] = ..., mode: _Optional[str] = ..., primary: _Optional[str] = ..., secondary: _Optional[str] = ..., epoch: _Optional[int] = ..., version: _Optional[int] = ..., protected: _Optional[bool] = ..., batch_size: _Optional[int] = ...) -> None: ...

class NodeState(_message.Message):
    __slots__ = ("name", "role", "stage", "liveness", "last_report_s", "address")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    LAST_REPORT_S_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    stage: str
    liveness: str
    last_report_s: float
    address: str
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., stage: _Optional[str] = ..., liveness: _Optional[str] = ..., last_report_s: _Optional[float] = ..., address: _Optional[str] = ...) -> None: ...

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
