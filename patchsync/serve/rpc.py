"""RDF Delta's ``POST /$/rpc`` operations as one table (no I/O).

:func:`step` answers a parsed call (:func:`patchsync.serve.delta_protocol.parse_rpc`) from
a view of the served data sources (:class:`Datasources`): most operations are a JSON
answer at once; the two that change the catalog are a :class:`Create` or a
:class:`Remove` for the door to carry out, after which :func:`created` / :func:`removed`
answer. Which operations exist and which need a write token are RDF Delta's facts in
:mod:`patchsync.serve.delta_protocol` (``OPERATIONS``, ``WRITE_OPERATIONS``); this table
has one entry for each (docs/decisions/0002-rdf-delta-http.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from patchsync.serve import delta_protocol as dp
from patchsync.serve.delta_locks import LockTable
from patchsync.serve.errors import UnknownTopic
from patchsync.serve.topics import TopicInfo


@dataclass(frozen=True, slots=True)
class Datasources:
    """What the RPC operations see of the server: its log topics' descriptions by name,
    the ``uri`` each was created with, and the patch log locks."""

    infos: Mapping[str, TopicInfo]
    uris: Mapping[str, str]
    locks: LockTable

    def uri(self, name: str) -> str:
        return self.uris.get(name, "")


@dataclass(frozen=True, slots=True)
class Create:
    """``create_datasource``: the door makes log topic ``name`` (and keeps ``uri`` with it)."""

    name: str
    uri: str | None


@dataclass(frozen=True, slots=True)
class Remove:
    """``remove_datasource``: the door stops serving ``name`` and forgets its lock and uri."""

    name: str


#: What an operation answers: a JSON body, or a change of the catalog for the door to make.
Step = dict[str, Any] | Create | Remove
Operation = Callable[[dp.RpcCall, Datasources], Step]


def _locks(call: dp.RpcCall, ds: Datasources) -> Step:
    return ds.locks.answer(call, ds.infos)


def _ping(call: dp.RpcCall, ds: Datasources) -> Step:
    return dp.ping_body()


def _list_datasource(call: dp.RpcCall, ds: Datasources) -> Step:
    return {"array": [dp.datasource_id(n) for n in ds.infos]}


def _list_descriptions(call: dp.RpcCall, ds: Datasources) -> Step:
    return {"array": [dp.describe_datasource(info, ds.uri(n)) for n, info in ds.infos.items()]}


def _list_log_info(call: dp.RpcCall, ds: Datasources) -> Step:
    return {"array": [dp.describe_log(info, ds.uri(n)) for n, info in ds.infos.items()]}


def _describe_datasource(call: dp.RpcCall, ds: Datasources) -> Step:
    found = dp.find_datasource(call, ds.infos, ds.uris)
    return {} if found is None else dp.describe_datasource(ds.infos[found], ds.uri(found))


def _describe_log(call: dp.RpcCall, ds: Datasources) -> Step:
    found = dp.datasource_arg(call, ds.infos)
    return {} if found is None else dp.describe_log(ds.infos[found], ds.uri(found))


def _create_datasource(call: dp.RpcCall, ds: Datasources) -> Step:
    name = call.string("name", required=True)
    assert name is not None  # required=True refuses a missing name
    return Create(name, call.string("uri"))


def _remove_datasource(call: dp.RpcCall, ds: Datasources) -> Step:
    found = dp.datasource_arg(call, ds.infos)
    if found is None:
        raise UnknownTopic(f"remove_datasource: No such datasource: '{dp.shorten(call.string('datasource') or '')}'")
    return Remove(found)


#: The operations, by name: one entry for each of ``delta_protocol.OPERATIONS``.
OPERATIONS: dict[str, Operation] = {
    "ping": _ping,
    "list_datasource": _list_datasource,
    "list_descriptions": _list_descriptions,
    "list_log_info": _list_log_info,
    "describe_datasource": _describe_datasource,
    "describe_log": _describe_log,
    "create_datasource": _create_datasource,
    "remove_datasource": _remove_datasource,
    **dict.fromkeys(dp.LOCK_OPERATIONS, _locks),
}


def needs_write(call: dp.RpcCall) -> bool:
    """Whether ``call`` changes the server (its token must grant writes)."""
    return call.op in dp.WRITE_OPERATIONS


def step(call: dp.RpcCall, ds: Datasources) -> Step:
    """What ``call`` answers over ``ds`` (a parsed call names a served operation)."""
    return OPERATIONS[call.op](call, ds)


def created(name: str) -> dict[str, Any]:
    """The answer to a ``create_datasource`` carried out."""
    return {"id": dp.datasource_id(name)}


def removed(name: str) -> dict[str, Any]:
    """The answer to a ``remove_datasource`` carried out."""
    return {}


__all__ = [
    "OPERATIONS",
    "Create",
    "Datasources",
    "Operation",
    "Remove",
    "Step",
    "created",
    "needs_write",
    "removed",
    "step",
]
