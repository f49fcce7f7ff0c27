"""A Bloom filter of the SQLite term dictionary's hashes: which terms are certainly new.

The term cache is bounded (``TERM_CACHE_SIZE``). While it holds every stored term, a term
it lacks is new and is stored without a lookup; once it has started over, every term it
lacks must be looked up by hash, and on a large database each lookup is a probe at a random
place in the hash index and the table (pages mostly outside SQLite's page cache). Most of
those terms are new anyway: fresh subjects, new literals. With every stored hash in this
filter, a term whose hash it lacks is new without asking the database, and only the few it
may hold (stored, or a false positive) are looked up.

Two probes per hash, one from each half of the 64-bit hash (BLAKE2b's bits are uniform),
into 16 bits per expected term: about 1.4% false positives per layer at capacity. A false
positive costs one lookup; a false negative would store a term twice, so the filter only
ever gains bits (a rolled-back term keeps its bits) and the dictionary drops it whenever
another writer may have added terms it has not seen. It is built once, from a scan of the
stored hashes in slices (:class:`FilterBuild`), and then grows by layers instead of by
rescans.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

#: Filter bits per expected term (with two probes: ~1.4% false positives at capacity).
BITS_PER_TERM = 16
#: The smallest filter, in bits (16 KiB).
MIN_BITS = 1 << 17
#: Room made at a build, as a multiple of the hashes it starts with; each layer added
#: once the last is full is this many times larger than that one.
GROWTH = 2
#: Stored hashes per slice of the hash range a build scans at a time (about 0.05 s each).
SLICE_ROWS = 100_000

#: Reads the stored hashes ``lo <= h < hi`` (``hi`` None: no upper bound).
HashScan = Callable[[int, "int | None"], Iterable[int]]


class _Layer:
    """One Bloom filter of fixed size."""

    __slots__ = ("bits", "capacity", "count", "mask")

    def __init__(self, expected: int) -> None:
        size = MIN_BITS
        while size < BITS_PER_TERM * expected:
            size <<= 1
        self.bits = bytearray(size >> 3)
        self.mask = size - 1
        self.count = 0
        self.capacity = size // BITS_PER_TERM


class HashFilter:
    """A set of 64-bit hashes that may answer "maybe" for one it lacks, never "no" for one it holds.

    It grows without rescanning what it holds: once its newest layer has taken as many
    hashes as it was sized for, a layer ``GROWTH`` times larger takes the next ones, and a
    hash is looked for in every layer (a layer per doubling: false positives add up to a
    few percent, memory stays near ``BITS_PER_TERM`` bits a hash).
    """

    __slots__ = ("_layers",)

    def __init__(self, expected: int) -> None:
        self._layers = [_Layer(expected)]

    @classmethod
    def of(cls, hashes: Iterable[int], count: int) -> HashFilter:
        """A filter holding ``hashes`` (about ``count`` of them) with room for ``GROWTH`` times as many."""
        built = cls(GROWTH * max(count, 1))
        built.add_many(hashes)
        return built

    @property
    def count(self) -> int:
        """Hashes added (with repeats)."""
        return sum(layer.count for layer in self._layers)

    @property
    def capacity(self) -> int:
        """Hashes the layers were sized for, together."""
        return sum(layer.capacity for layer in self._layers)

    @property
    def layers(self) -> int:
        return len(self._layers)

    def add_many(self, hashes: Iterable[int]) -> None:
        """Add each hash (any int; only its low 64 bits count)."""
        layer = self._layers[-1]
        bits, mask, room = layer.bits, layer.mask, layer.capacity - layer.count
        for h in hashes:
            if not room:
                layer.count = layer.capacity
                layer = _Layer(GROWTH * layer.capacity)
                self._layers.append(layer)
                bits, mask, room = layer.bits, layer.mask, layer.capacity
            i = h & mask
            bits[i >> 3] |= 1 << (i & 7)
            i = (h >> 32) & mask
            bits[i >> 3] |= 1 << (i & 7)
            room -= 1
        layer.count = layer.capacity - room

    def __contains__(self, h: int) -> bool:
        """False: ``h`` was never added. True: it may have been."""
        for layer in reversed(self._layers):
            bits, mask = layer.bits, layer.mask
            i = h & mask
            if bits[i >> 3] & (1 << (i & 7)):
                i = (h >> 32) & mask
                if bits[i >> 3] & (1 << (i & 7)):
                    return True
        return False


class FilterBuild:
    """A :class:`HashFilter` of the stored hashes, filled a slice of the hash range at a time.

    A scan of a large dictionary whole (50M terms: about half a minute) would stall a
    daemon's next commit for as long; in slices of about ``SLICE_ROWS`` hashes the scan
    is spread over as many calls, lookups going on as before until the filter is whole.
    Hashes stored meanwhile must be added to :attr:`filter` by the caller, whatever
    slice they fall in.
    """

    __slots__ = ("_edges", "_next", "filter")

    def __init__(self, stored: int) -> None:
        self.filter = HashFilter(GROWTH * max(stored, 1))
        slices = 1
        while slices * SLICE_ROWS < stored:
            slices <<= 1
        width = (1 << 64) // slices
        self._edges: list[int | None] = [-(1 << 63) + i * width for i in range(slices)]
        self._edges.append(None)
        self._next = 0

    def step(self, scan: HashScan, budget: int) -> bool:
        """Scan whole slices until about ``budget`` hashes are in (at least one slice);
        returns whether the filter now holds every stored hash."""
        edges = self._edges
        before = self.filter.count
        while self._next < len(edges) - 1 and self.filter.count - before < budget:
            lo = edges[self._next]
            assert lo is not None
            self.filter.add_many(scan(lo, edges[self._next + 1]))
            self._next += 1
        return self._next == len(edges) - 1


__all__ = ["BITS_PER_TERM", "GROWTH", "MIN_BITS", "SLICE_ROWS", "FilterBuild", "HashFilter", "HashScan"]
