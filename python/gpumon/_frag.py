"""Reduce an allocator block map to what gpumon needs: a log2 histogram of
free blocks, total free T, largest free L. Done in-process so the raw
snapshot (thousands of blocks) never leaves the program."""


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
    for seg in segments:
        if seg.get("device", dev) != dev:
            continue
        n_segments += 1
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
            elif state == "active_allocated":
                if size > largest_block:
                    largest_block = size
    return {
        "dev": dev,
        "free_total": free_total,
        "largest_free": largest_free,
        "n_free_blocks": n_free,
        "n_segments": n_segments,
        "largest_block": largest_block or None,
        "hist": [[k, c[0], c[1]] for k, c in sorted(hist.items())],
        "source": "snapshot",
    }


def frag_index(free_total, largest_free):
    """F = 1 - L/T; 0 when T = 0; None when L is unknown."""
    if largest_free is None or free_total is None:
        return None
    if free_total <= 0:
        return 0.0
    return max(0.0, 1.0 - min(largest_free, free_total) / float(free_total))
