"""Remote patch logs: one interface, the rules written on it, and the clients of served logs.

- :mod:`.interface`: :class:`~.interface.RemoteLog`, what a NATS stream, a gRPC topic and a log served
  over HTTP all are (head, read after a position, append under the chain rule, close), and
  :class:`~.interface.MemoryLog`, a real in-memory one.
- :mod:`.rules`: where a replica resumes, how far it is behind.
- :mod:`.publish`: the one publish loop (resumable from the log's head).
- :mod:`.read_ahead`: the one read-ahead thread.
- :mod:`.writer`: a recorder's writer to any remote log.
- :mod:`.grpc_client`, :mod:`.http_client`: the clients of ``patchsync serve``'s doors;
  :mod:`.refusals`: the lines that say why a server could not be reached.
- :mod:`.errors`: the errors of remote logs.

The NATS client, which needs the optional ``nats`` extra, is :mod:`patchsync.nats`.
"""
