"""The topics of one serve process: built from ``--topic NAME=SPEC``, found by name.

A spec whose scheme is in the target registry makes a target topic; anything else is
resolved in the source registry, whose kind says what topic it makes (its ``topic`` role:
a ``.jellyp`` file, a directory of segments, ``nats://…``); a kind without one cannot be
served. See :mod:`patchsync.serve.topics`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Set
from enum import Enum
from pathlib import Path

from patchsync.errors import PatchsyncError, UsageError
from patchsync.serve.errors import ReadOnlyTopic, UnknownTopic, WrongKind
from patchsync.serve.topics import LOG, NAME_RULE, TARGET, LogTopic, TargetTopic, Topic, TopicOptions, check_name

#: Where removed log-root topics go (not a topic name: names cannot start with '.').
REMOVED = ".removed"


def parse_topic(text: str) -> tuple[str, str]:
    """``NAME=SPEC`` as ``(name, spec)``."""
    name, sep, spec = text.partition("=")
    if not sep or not spec:
        raise UsageError(f"--topic {text}: expected NAME=SPEC (a .jellyp log, a directory, nats://…, or a target)")
    return check_name(name), spec


def build_topic(text: str, options: TopicOptions | None = None) -> Topic:
    """The topic ``NAME=SPEC`` stands for, not yet opened.

    A target spec (its scheme is in the target registry) makes a target topic; anything
    else is resolved as a source, whose kind makes the log topic (one line naming the
    kinds that can when it makes none).
    """
    from patchsync.apply.registry import target_schemes
    from patchsync.sources import resolve_source
    from patchsync.sources.registry import kinds_with_role

    name, spec = parse_topic(text)
    scheme, sep, _ = spec.partition(":")
    if sep and scheme.lower() in target_schemes():
        from patchsync.serve.target_topic import RegisteredTargetTopic

        return RegisteredTargetTopic(name, spec)
    source = resolve_source(spec)
    if not source.has("topic"):
        raise UsageError(
            f"--topic {text}: a {source.kind.name} source cannot be served as a topic "
            f"(a log topic is one of: {', '.join(kinds_with_role('topic'))}; a target topic: a target URL)"
        )
    topic: Topic = source.topic()(name, spec, source.address, options or TopicOptions())
    return topic


def log_root_specs(root: Path, taken: Set[str]) -> list[str]:
    """``NAME=ROOT/NAME`` for every subdirectory of ``root`` named by the topic name rule
    and not in ``taken`` (given by ``--topic``); ``root`` is created when missing."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        names = sorted(d.name for d in root.iterdir() if d.is_dir())
    except OSError as exc:
        raise UsageError(f"--log-root {root}: {exc.strerror or exc}") from None
    return [f"{n}={root / n}" for n in names if NAME_RULE.match(n) and n not in taken]


def log_root_spec(root: Path, name: str) -> str:
    """The spec of a new topic ``name`` under ``root``: a directory of segments."""
    check_name(name)
    if name.lower().endswith(".jellyp"):
        raise UsageError(f"data source {name!r}: a name ending in .jellyp would be a file, not a directory")
    return f"{name}={root / name}"


def retire(root: Path, name: str) -> Path | None:
    """Move the directory of removed topic ``name`` aside (never deleted: RDF Delta keeps a
    removed log's files too); returns where it went, ``None`` if there was none."""
    path = root / name
    if not path.is_dir():
        return None
    (root / REMOVED).mkdir(exist_ok=True)
    moved = root / REMOVED / f"{name}-{uuid.uuid4().hex[:12]}"
    path.rename(moved)
    return moved


class Use(Enum):
    """What a request does with a topic."""

    #: Read its patches (subscribe, fetch, the change feed).
    PATCHES = "patches"
    #: Append patches (publish, POST).
    APPEND = "append"
    #: Read its state as RDF (``SubscribeRdf``, a target's ``init``).
    STATE = "state"


#: What each kind of topic offers: the one rule both doors ask (:meth:`Topics.offering`).
#: (A log topic's ``GET /NAME/init`` is the snapshot file kept beside it, an RDF Delta
#: bootstrap of the HTTP door, not the log's state: see ``datasource_files``.)
OFFERS: dict[str, frozenset[Use]] = {
    LOG: frozenset({Use.PATCHES, Use.APPEND}),
    TARGET: frozenset({Use.STATE}),
}
#: The refusal of a use a topic's kind does not offer, and its words.
REFUSALS: dict[Use, tuple[type[PatchsyncError], str]] = {
    Use.PATCHES: (WrongKind, "topic {name}: a {kind} topic serves snapshots; {what} needs a log topic"),
    Use.APPEND: (ReadOnlyTopic, "{what}: topic {name} is a {kind} topic, read-only; write to a log topic"),
    Use.STATE: (
        WrongKind,
        "{what}: topic {name} is a {kind} topic: it streams patches, not RDF: subscribe with "
        "patchsync.v1.PatchService/SubscribePatch",
    ),
}


class Topics:
    """The topics of one serve process, by name."""

    def __init__(self, topics: list[Topic]) -> None:
        self._topics: dict[str, Topic] = {}
        for topic in topics:
            if topic.name in self._topics:
                raise UsageError(f"--topic {topic.name}: the name is given twice")
            self._topics[topic.name] = topic

    def __iter__(self) -> Iterator[Topic]:
        return iter(self._topics.values())

    def __len__(self) -> int:
        return len(self._topics)

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def add(self, topic: Topic) -> None:
        """Serve ``topic`` too (a data source created at run time); its name must be free."""
        if topic.name in self._topics:
            raise UsageError(f"topic {topic.name}: the name is served already")
        self._topics[topic.name] = topic

    def remove(self, name: str) -> Topic:
        """Stop serving the topic ``name`` (:class:`UnknownTopic` if none); returns it."""
        topic = self.get(name)
        del self._topics[name]
        return topic

    def get(self, name: str) -> Topic:
        """The topic ``name`` (:class:`UnknownTopic` if none)."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopic(f"topic {name!r}: not served here (served: {', '.join(sorted(self._topics))})")
        return topic

    def offering(self, name: str, use: Use, what: str) -> Topic:
        """The topic ``name`` if its kind offers ``use`` (:data:`OFFERS`, the one rule of every
        door), else that use's refusal naming ``what`` (the request)."""
        topic = self.get(name)
        if use not in OFFERS.get(topic.kind, ()):
            error, text = REFUSALS[use]
            raise error(text.format(name=name, kind=topic.kind, what=what or "this operation"))
        return topic

    def offers(self, name: str, use: Use) -> bool:
        """Whether the topic ``name`` offers ``use`` (:class:`UnknownTopic` if there is none)."""
        return use in OFFERS.get(self.get(name).kind, ())

    def log(self, name: str, service: str = "") -> LogTopic:
        """The log topic ``name`` to read patches from; a target topic is refused naming ``service``."""
        topic = self.offering(name, Use.PATCHES, service)
        assert isinstance(topic, LogTopic)  # only a log topic offers patches
        return topic

    def writable(self, name: str, what: str) -> LogTopic:
        """The log topic ``name`` to write to: a target topic is read-only
        (:class:`ReadOnlyTopic` naming ``what``)."""
        topic = self.offering(name, Use.APPEND, what)
        assert isinstance(topic, LogTopic)  # only a log topic takes appends
        return topic

    def target(self, name: str, service: str = "") -> TargetTopic:
        """The target topic ``name``, whose state is served as RDF; a log topic is refused
        naming ``service``."""
        topic = self.offering(name, Use.STATE, service)
        assert isinstance(topic, TargetTopic)  # only a target topic has a state to send
        return topic

    def logs(self) -> list[LogTopic]:
        """The log topics (RDF Delta's data sources)."""
        return [t for t in self._topics.values() if isinstance(t, LogTopic)]

    async def open(self) -> None:
        """Open every topic (a failure closes those already open)."""
        opened: list[Topic] = []
        try:
            for topic in self._topics.values():
                await topic.open()
                opened.append(topic)
        except BaseException:
            for topic in opened:
                await topic.close()
            raise

    async def close(self) -> None:
        """Close every topic."""
        for topic in self._topics.values():
            await topic.close()


__all__ = [
    "OFFERS",
    "REFUSALS",
    "REMOVED",
    "Topics",
    "Use",
    "build_topic",
    "log_root_spec",
    "log_root_specs",
    "parse_topic",
    "retire",
]
