"""The topics of one serve process: built from ``--topic NAME=SPEC``, found by name.

A spec whose scheme is in the target registry makes a target topic; anything else is
resolved in the source registry and must be able to append and follow (a ``.jellyp``
file, a directory of segments, ``nats://…``). See :mod:`patchsync.serve.topics`.
"""

from __future__ import annotations

from collections.abc import Iterator

from patchsync.errors import UsageError
from patchsync.serve.errors import UnknownTopic, WrongKind
from patchsync.serve.topics import LogTopic, TargetTopic, Topic, check_name


def parse_topic(text: str) -> tuple[str, str]:
    """``NAME=SPEC`` as ``(name, spec)``."""
    name, sep, spec = text.partition("=")
    if not sep or not spec:
        raise UsageError(f"--topic {text}: expected NAME=SPEC (a .jellyp log, a directory, nats://…, or a target)")
    return check_name(name), spec


def build_topic(text: str, *, subscriber_buffer: int = 1024, fsync: bool = False) -> Topic:
    """The topic ``NAME=SPEC`` stands for, not yet opened.

    A target spec (its scheme is in the target registry) makes a target topic; anything
    else is resolved as a source, which must be able to append and follow.
    """
    from patchsync.apply.registry import target_schemes
    from patchsync.sources import APPEND, FOLLOW, resolve_source

    name, spec = parse_topic(text)
    scheme, sep, _ = spec.partition(":")
    if sep and scheme.lower() in target_schemes():
        from patchsync.serve.target_topic import RegisteredTargetTopic

        return RegisteredTargetTopic(name, spec)
    source = resolve_source(spec).require(APPEND, "serve").require(FOLLOW, "serve")
    if source.is_path:
        from patchsync.serve.file_topic import FileLogTopic

        return FileLogTopic(name, spec, source.path, subscriber_buffer=subscriber_buffer, fsync=fsync)
    from patchsync.serve.nats_topic import NatsTopic

    return NatsTopic(name, spec, source.address, subscriber_buffer=subscriber_buffer)


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

    def get(self, name: str) -> Topic:
        """The topic ``name`` (:class:`UnknownTopic` if none)."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopic(f"topic {name!r}: not served here (served: {', '.join(sorted(self._topics))})")
        return topic

    def log(self, name: str, service: str = "") -> LogTopic:
        """The log topic ``name``; a target topic is refused naming ``service``."""
        topic = self.get(name)
        if not isinstance(topic, LogTopic):
            raise WrongKind(f"topic {name}: a target topic, read-only; {service or 'this operation'} needs a log topic")
        return topic

    def target(self, name: str, service: str = "") -> TargetTopic:
        """The target topic ``name``; a log topic is refused naming ``service``."""
        topic = self.get(name)
        if not isinstance(topic, TargetTopic):
            raise WrongKind(f"topic {name}: a log topic; {service or 'this operation'} needs a target topic")
        return topic

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


__all__ = ["Topics", "build_topic", "parse_topic"]
