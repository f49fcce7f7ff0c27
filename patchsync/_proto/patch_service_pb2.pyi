from . import patch_pb2 as _patch_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PatchStart(_message.Message):
    __slots__ = ("after_id", "after_version", "beginning", "now")
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    BEGINNING_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    after_id: str
    after_version: int
    beginning: bool
    now: bool
    def __init__(self, after_id: _Optional[str] = ..., after_version: _Optional[int] = ..., beginning: _Optional[bool] = ..., now: _Optional[bool] = ...) -> None: ...

class SubscribePatchRequest(_message.Message):
    __slots__ = ("topic", "requested_options", "start", "stop_at_head", "max_batch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STOP_AT_HEAD_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    requested_options: _patch_pb2.RdfPatchOptions
    start: PatchStart
    stop_at_head: bool
    max_batch: int
    def __init__(self, topic: _Optional[str] = ..., requested_options: _Optional[_Union[_patch_pb2.RdfPatchOptions, _Mapping]] = ..., start: _Optional[_Union[PatchStart, _Mapping]] = ..., stop_at_head: _Optional[bool] = ..., max_batch: _Optional[int] = ...) -> None: ...

class PatchMessage(_message.Message):
    __slots__ = ("version", "patch_id", "patch", "batch")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PATCH_ID_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    version: int
    patch_id: str
    patch: bytes
    batch: _containers.RepeatedCompositeFieldContainer[PatchMessage]
    def __init__(self, version: _Optional[int] = ..., patch_id: _Optional[str] = ..., patch: _Optional[bytes] = ..., batch: _Optional[_Iterable[_Union[PatchMessage, _Mapping]]] = ...) -> None: ...

class PublishPatchRequest(_message.Message):
    __slots__ = ("topic", "patch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    patch: bytes
    def __init__(self, topic: _Optional[str] = ..., patch: _Optional[bytes] = ...) -> None: ...

class PublishPatchResponse(_message.Message):
    __slots__ = ("version", "head", "appended", "duplicates", "patch_id", "head_version")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    APPENDED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    PATCH_ID_FIELD_NUMBER: _ClassVar[int]
    HEAD_VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    head: str
    appended: int
    duplicates: int
    patch_id: str
    head_version: int
    def __init__(self, version: _Optional[int] = ..., head: _Optional[str] = ..., appended: _Optional[int] = ..., duplicates: _Optional[int] = ..., patch_id: _Optional[str] = ..., head_version: _Optional[int] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("topic", "kind", "head", "version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    kind: str
    head: str
    version: int
    def __init__(self, topic: _Optional[str] = ..., kind: _Optional[str] = ..., head: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...
