"""Encoding of protocol v1 messages (docs/protocol.md)."""

import json
import time

# The protocol version and the hard line limit (newline included). gpumon's definitions are
# in src/wire/protocol.rs; a Rust test (src/wire/cross_language.rs) fails when these differ.
PROTOCOL_VERSION = 1
MAX_LINE = 65536
# Room left in a history part for its envelope.
_PART_BUDGET = MAX_LINE - 2048


def now_ms():
    return int(time.time() * 1000)


def encode(msg):
    """One line of UTF-8 JSON with its newline, or None when it cannot be sent
    (not serialisable, or over the line limit): the caller counts it."""
    msg.setdefault("v", PROTOCOL_VERSION)
    try:
        line = json.dumps(msg, separators=(",", ":"), allow_nan=False, default=str)
    except (TypeError, ValueError):
        return None
    data = (line + "\n").encode("utf-8", "replace")
    if len(data) > MAX_LINE:
        return None
    return data


def history_parts(t, epochs, samples, markers, events, frag):
    """The history as one or more `history` lines, each within the line limit;
    the last one has done=true. Oldest items go first so a monitor can draw as
    parts arrive."""
    parts = []
    cur = _empty(t)
    size = 0
    for key, items in (("epochs", epochs), ("samples", samples), ("markers", markers),
                       ("events", events), ("frag", frag)):
        for item in items:
            try:
                n = len(json.dumps(item, separators=(",", ":"), default=str)) + 1
            except (TypeError, ValueError):
                continue
            if n > _PART_BUDGET:
                continue
            if size + n > _PART_BUDGET:
                parts.append(cur)
                cur = _empty(t)
                size = 0
            cur[key].append(item)
            size += n
    parts.append(cur)
    for p in parts:
        p["done"] = False
    parts[-1]["done"] = True
    out = []
    for p in parts:
        data = encode({k: v for k, v in p.items() if v != []})
        if data is not None:
            out.append(data)
    return out


def _empty(t):
    return {"v": PROTOCOL_VERSION, "type": "history", "t": t, "epochs": [], "samples": [],
            "markers": [], "events": [], "frag": []}


def check_monitor_hello(obj):
    """None when the monitor's hello is acceptable, else the error text."""
    if not isinstance(obj, dict) or obj.get("type") != "hello":
        return "expected a hello"
    lo = obj.get("min_v", obj.get("v", PROTOCOL_VERSION))
    hi = obj.get("max_v", obj.get("v", PROTOCOL_VERSION))
    if not isinstance(lo, int) or not isinstance(hi, int):
        return "min_v/max_v must be integers"
    if not (lo <= PROTOCOL_VERSION <= hi):
        return "companion speaks v%d, monitor wants v%d..v%d" % (PROTOCOL_VERSION, lo, hi)
    return None
