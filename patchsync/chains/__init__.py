"""The chain rule of patch logs (``H id``, ``H prev``): what follows a log's head, and which
patches a destination already holds. One rule, used by every writer and the applier; see
:mod:`patchsync.chains.rule`.
"""

from __future__ import annotations

from patchsync.chains.rule import ChainCheck, follows, held_prefix

__all__ = ["ChainCheck", "follows", "held_prefix"]
