"""When an epoch end needs a full garbage collection before its floor is read.

The floor (allocated after collection) of a healthy run moves a little every epoch: the
allocator rounds, a metric tensor is replaced by one of another size. A full collection
walks every Python object, so doing one whenever the floor rose at all costs a BERT
process 150-260 ms on every other epoch. It is needed only when a rise could be garbage
big enough to read as growth, that is, when the floor is above the last fully collected
floor by more than the series' own epoch-to-epoch noise."""

import collections

MiB = 1 << 20
# Below this a rise is never worth a full pass: the monitor's smallest growth that counts
# on an exact floor is 4 MiB over a window (1 MiB per epoch).
MIN_RISE = 2 * MiB
# Noise is this many times the median absolute step of the recent floors.
NOISE_MULT = 4
RECENT = 16


class FloorGate:
    def __init__(self):
        self._ref = {}      # key -> floor after the last full collection (or a new low)
        self._last = {}     # key -> last floor read
        self._steps = {}    # key -> recent absolute epoch-to-epoch steps

    def _threshold(self, key):
        steps = sorted(self._steps.get(key, ()))
        med = steps[len(steps) // 2] if steps else 0
        return max(MIN_RISE, NOISE_MULT * med)

    def needs_full(self, key, alloc):
        """True when `alloc` (read after a young collection) is above the reference floor by
        more than the noise. The first floor of a series has nothing to compare with."""
        if alloc is None:
            return False
        ref = self._ref.get(key)
        if ref is None:
            return False
        return alloc - ref > self._threshold(key)

    def collected(self, key, alloc):
        """A full collection just ran: its floor is the new reference."""
        if alloc is not None:
            self._ref[key] = alloc

    def seen(self, key, alloc):
        """The floor this epoch reports."""
        if alloc is None:
            return
        last = self._last.get(key)
        if last is not None:
            self._steps.setdefault(key, collections.deque(maxlen=RECENT)).append(abs(alloc - last))
        self._last[key] = alloc
        ref = self._ref.get(key)
        if ref is None or alloc < ref:
            # the first floor, or a new low: later rises are measured from it
            self._ref[key] = alloc
