"""Reduce an allocator block map to what gpumon needs: a log2 histogram of
free blocks, total free T, largest free L, the few largest free and live
blocks exactly, and the large requests the program makes again and again.
Done in-process so the raw snapshot (thousands of blocks) never leaves the
program."""

import heapq

# How many of the largest free and live blocks are sent exactly: enough to count the
# holes a large request fits in and their margin, small on the wire.
TOP = 8
# Live block sizes followed between snapshots for recurrence, and sizes reported.
TRACKED = 64
REPORTED = 4
# Blocks below this are the small pool's business: they never need a large hole.
MIN_REQUEST = 1 << 20


def bucket(size):
    """floor(log2(size)) for size >= 1."""
    return int(size).bit_length() - 1


def reduce_torch_snapshot(segments, dev):
    """`torch.cuda.memory_snapshot()` segments -> frag fields for device `dev`.
    Free blocks are the `inactive` ones; blocks awaiting a stream are in use."""
    hist = {}
    free_total = 0
    largest_free = 0
    n_free = 0
    n_segments = 0
    largest_block = 0
    free_sizes = []
    live_sizes = []
    # allocated and reserved of this very block map, so that a monitor can show numbers
    # of one moment beside T and L: the sample of the same time may be late
    seg_total = 0
    in_use = 0
    for seg in segments:
        if seg.get("device", dev) != dev:
            continue
        n_segments += 1
        seg_total += int(seg.get("total_size", 0) or 0)
        for b in seg.get("blocks", ()):
            size = int(b.get("size", 0))
            if size <= 0:
                continue
            state = b.get("state")
            if state == "inactive":
                k = bucket(size)
                c = hist.get(k)
                if c is None:
                    hist[k] = [1, size]
                else:
                    c[0] += 1
                    c[1] += size
                free_total += size
                n_free += 1
                if size > largest_free:
                    largest_free = size
                if size >= MIN_REQUEST:
                    free_sizes.append(size)
            elif state == "active_allocated":
                in_use += size
                if size > largest_block:
                    largest_block = size
                if size >= MIN_REQUEST:
                    live_sizes.append(size)
    return {
        "dev": dev,
        "free_total": free_total,
        "largest_free": largest_free,
        "n_free_blocks": n_free,
        "n_segments": n_segments,
        "largest_block": largest_block or None,
        "hist": [[k, c[0], c[1]] for k, c in sorted(hist.items())],
        "free_top": heapq.nlargest(TOP, free_sizes),
        "live_top": heapq.nlargest(TOP, live_sizes),
        "allocated": in_use if seg_total else None,
        "reserved": seg_total or None,
        "_live_counts": _counts(live_sizes),
        "source": "snapshot",
    }


def _counts(sizes):
    out = {}
    for s in sizes:
        out[s] = out.get(s, 0) + 1
    return out


class Recurrence(object):
    """Large requests the program makes again and again, from successive block maps:
    a size whose count of live blocks rises from one snapshot to the next was
    allocated anew (a parameter stays live and rises once; an activation, a buffer
    rebuilt every step, rises each time a snapshot sees it come back). Per device."""

    def __init__(self):
        self.prev = {}
        self.rises = {}

    def update(self, counts):
        """Takes the live-size counts of a new snapshot; returns [[size, rises], ...] for
        the largest sizes seen allocated anew at least twice, largest first."""
        largest = heapq.nlargest(TRACKED, counts)
        for s in largest:
            if counts[s] > self.prev.get(s, 0):
                self.rises[s] = self.rises.get(s, 0) + 1
        self.prev = {s: counts[s] for s in largest}
        if len(self.rises) > 2 * TRACKED:
            keep = heapq.nlargest(TRACKED, self.rises)
            self.rises = {s: self.rises[s] for s in keep}
        rec = [s for s in self.rises if self.rises[s] >= 2]
        return [[s, self.rises[s]] for s in heapq.nlargest(REPORTED, rec)]


def frag_index(free_total, largest_free):
    """F = 1 - L/T; 0 when T = 0; None when L is unknown."""
    if largest_free is None or free_total is None:
        return None
    if free_total <= 0:
        return 0.0
    return max(0.0, 1.0 - min(largest_free, free_total) / float(free_total))
