"""``patchsync serve``: named topics over network front doors (layer 9, beside ``tail``).

docs/decisions/0001-serve-and-topics.md: one process, one topic model, one security
boundary, one error mapping and one metrics registry for every front door.

- :mod:`.topics`: the topic model (log and target topics, versions, reads that follow live);
  :mod:`.file_topic`, :mod:`.nats_topic`, :mod:`.target_topic` its kinds; :mod:`.incoming`
  the check of a published patch.
- :mod:`.auth` tokens, :mod:`.errors` statuses, :mod:`.settings` limits and listeners,
  :mod:`.metrics` the Prometheus registry.
- :mod:`.app`: the process, and the registry of front doors.

Needs the ``serve`` extra (grpcio, prometheus-client, aiohttp).
"""
