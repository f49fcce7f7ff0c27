"""The ways ``ingest`` turns a message into a patch, by name (docs/design.md §8).

Kept apart from :mod:`patchsync.ingest.patches` so that the command line can offer them
without loading the codec at start-up.
"""

from __future__ import annotations

#: The message's quads are added.
ADD = "add"
#: Each graph the message names holds exactly the message's quads in it afterwards.
REPLACE_GRAPH = "replace-graph"
#: The whole dataset is the message afterwards.
REPLACE = "replace"
MODES = (ADD, REPLACE_GRAPH, REPLACE)

__all__ = ["ADD", "MODES", "REPLACE", "REPLACE_GRAPH"]
