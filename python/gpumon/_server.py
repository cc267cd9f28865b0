"""The companion's listening socket and its monitors.

Runs only on the companion's own thread. Every socket is non-blocking; each
monitor has a bounded queue that drops its oldest message (counted) instead of
waiting, so a stalled monitor never slows the program or the other monitors.
"""

import collections
import errno
import json
import os
import selectors
import socket
import time

from . import _paths, _proto

HELLO_TIMEOUT_S = 2.0
STALL_TIMEOUT_S = 30.0
MAX_QUEUE = 1024
# Connections this companion keeps at once. Every one costs the training
# process a file descriptor, so the cap is what keeps a connect flood from
# starving the program's own open() of fds (ulimit -n 256 is common): live
# monitors beyond MAX_MONITORS are refused, and a connection that has not said
# hello yet is evicted (oldest first) when MAX_PENDING newer ones arrive, or
# when MAX_PENDING_PER_PEER newer ones arrive from the same process. A monitor
# sends its hello as it connects, and the hello is read as the connection is
# accepted: so 1,000 idle connections held by one process (reconnecting each
# one dropped) cannot keep a real monitor waiting for a slot (before, one got
# no frame in 15 s).
MAX_MONITORS = 16
MAX_PENDING = 8
MAX_PENDING_PER_PEER = 4
# Connections accepted per wake-up, and the listen backlog.
ACCEPT_BATCH = 64
BACKLOG = 128


class Monitor(object):
    __slots__ = ("sock", "pid", "uid", "live", "inbuf", "queue", "out", "dropped",
                 "deadline", "last_progress", "closing", "want_write")

    def __init__(self, sock, pid, uid, now):
        self.sock = sock
        self.pid = pid
        self.uid = uid
        self.live = False
        self.inbuf = b""
        self.queue = collections.deque()
        self.out = b""
        self.dropped = 0
        self.deadline = now + HELLO_TIMEOUT_S
        self.last_progress = now
        # Set when the last bytes are queued: close once they are written.
        self.closing = False
        # Registered for EVENT_WRITE (the socket was full): only then is the selector
        # told anything, so a wake-up that sends costs one send() per monitor.
        self.want_write = False

    def pending(self):
        return bool(self.out or self.queue)


class Server(object):
    def __init__(self, path, on_hello, max_queue=MAX_QUEUE, own_uid=None,
                 stall_timeout=STALL_TIMEOUT_S, hello_timeout=HELLO_TIMEOUT_S,
                 max_monitors=MAX_MONITORS, max_pending=MAX_PENDING,
                 max_pending_per_peer=MAX_PENDING_PER_PEER):
        self.path = path
        # on_hello() -> list of encoded lines (our hello, then history parts).
        self.on_hello = on_hello
        self.max_queue = max_queue
        self.own_uid = os.geteuid() if own_uid is None else own_uid
        self.stall_timeout = stall_timeout
        self.hello_timeout = hello_timeout
        self.max_monitors = max_monitors
        self.max_pending = max_pending
        self.max_pending_per_peer = max_pending_per_peer
        self.monitors = []
        self.refused = 0
        # Connections closed because of the caps above, and connections closed
        # because handling their input raised (a bug must cost one connection,
        # never the companion).
        self.over_cap = 0
        self.failed = 0
        self.unsendable = 0
        self.sel = None
        self.listener = None

    # -- lifecycle ---------------------------------------------------------

    def open(self):
        """Bind and listen; returns None or the reason it could not."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                s.bind(self.path)
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                # Ours from an earlier life of this pid (crash, exec): replace it.
                os.unlink(self.path)
                s.bind(self.path)
            os.chmod(self.path, 0o600)
            s.listen(BACKLOG)
            s.setblocking(False)
        except OSError as e:
            s.close()
            return "cannot listen on %s: %s" % (self.path, e)
        self.listener = s
        self.sel = selectors.DefaultSelector()
        self.sel.register(s, selectors.EVENT_READ, None)
        return None

    def add_reader(self, fileobj):
        """Wake-up pipe of the program threads."""
        self.sel.register(fileobj, selectors.EVENT_READ, "wake")

    def close(self, final_lines=(), flush_s=0.5):
        """Send the last lines (bye) to live monitors, flush briefly, close all."""
        if self.listener is None:
            return
        for m in self.monitors:
            if m.live:
                for line in final_lines:
                    self._enqueue(m, line)
        deadline = time.monotonic() + flush_s
        while time.monotonic() < deadline and any(m.pending() for m in self.monitors):
            for m in list(self.monitors):
                self._write(m, time.monotonic())
            if any(m.pending() for m in self.monitors):
                time.sleep(0.005)
        for m in list(self.monitors):
            self._drop(m)
        try:
            self.sel.unregister(self.listener)
        except (KeyError, ValueError):
            pass
        self.listener.close()
        self.listener = None
        try:
            os.unlink(self.path)
        except OSError:
            pass
        self.sel.close()

    def live_count(self):
        return sum(1 for m in self.monitors if m.live)

    # -- sending -----------------------------------------------------------

    def broadcast(self, msg):
        """Queue one message dict for every live monitor. Nothing is sent here: the
        next poll() (the companion thread's next wait) sends what a wake-up queued in
        one send() per monitor, so the companion gives up the GIL once per monitor per
        wake-up instead of several times per message (each give-up lets the training
        thread in, and taking the GIL back from it costs that thread a hand-over)."""
        live = [m for m in self.monitors if m.live]
        if not live:
            return
        data = _proto.encode(msg)
        if data is None:
            self.unsendable += 1
            return
        sample = msg.get("type") == "sample"
        for m in live:
            line = data
            if sample and m.dropped:
                # The count is per monitor, so this one gets its own copy.
                d = dict(msg)
                d["dropped"] = m.dropped
                line = _proto.encode(d) or data
            self._enqueue(m, line)

    def flush(self):
        """Send what is queued to every monitor whose socket is not known to be full
        (those wait for EVENT_WRITE)."""
        now = None
        for m in list(self.monitors):
            if m.pending() and not m.want_write:
                if now is None:
                    now = time.monotonic()
                self._write(m, now)

    def _enqueue(self, m, line):
        if len(m.queue) >= self.max_queue:
            m.queue.popleft()
            m.dropped += 1
        m.queue.append(line)

    def _want_write(self, m):
        want = m.pending()
        if want == m.want_write:
            return
        ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
        try:
            self.sel.modify(m.sock, ev, m)
            m.want_write = want
        except (KeyError, ValueError, OSError):
            pass

    def _write(self, m, now):
        while True:
            if not m.out:
                if not m.queue:
                    break
                # Coalesce small lines into one send; the queue keeps its bound.
                chunks = []
                size = 0
                while m.queue and size < 65536:
                    c = m.queue.popleft()
                    chunks.append(c)
                    size += len(c)
                m.out = b"".join(chunks)
            try:
                n = m.sock.send(m.out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._drop(m)
                return
            if n <= 0:
                break
            m.out = m.out[n:]
            m.last_progress = now
        if m.closing and not m.pending():
            self._drop(m)
            return
        self._want_write(m)

    # -- the loop step -----------------------------------------------------

    def poll(self, timeout):
        """Wait up to `timeout` seconds for socket work and do it. Returns True
        when the wake pipe fired (program threads have queued something)."""
        woke = False
        self.flush()
        try:
            events = self.sel.select(max(0.0, timeout))
        except (OSError, ValueError):
            events = []
        now = time.monotonic()
        for key, mask in events:
            if key.data == "wake":
                woke = True
                try:
                    os.read(key.fd, 4096)
                except OSError:
                    pass
            elif key.data is None:
                self._accept(now)
            else:
                m = key.data
                try:
                    if mask & selectors.EVENT_READ:
                        self._read(m, now)
                    if m in self.monitors and mask & selectors.EVENT_WRITE:
                        self._write(m, now)
                except Exception:
                    # Whatever a peer sent, it costs that peer its connection only.
                    self.failed += 1
                    self._drop(m)
        self._timeouts(now)
        return woke

    def _accept(self, now):
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            try:
                pid, uid, _gid = _paths.peer_cred(conn)
            except OSError:
                conn.close()
                self.refused += 1
                continue
            if not _paths.peer_allowed(self.own_uid, uid):
                # Not a byte to a stranger.
                conn.close()
                self.refused += 1
                continue
            if not self._make_room(pid):
                conn.close()
                self.over_cap += 1
                continue
            conn.setblocking(False)
            m = Monitor(conn, pid, uid, now)
            m.deadline = now + self.hello_timeout
            self.monitors.append(m)
            self.sel.register(conn, selectors.EVENT_READ, m)
            # A real monitor's hello is already there: read now, before newer
            # connections can push this one out of the pending slots.
            try:
                self._read(m, now)
            except Exception:
                self.failed += 1
                self._drop(m)

    def _make_room(self, pid=None):
        """True when one more connection may be kept, after evicting the oldest
        connection still waiting for its hello of the same peer process if it has
        MAX_PENDING_PER_PEER of them, else the oldest of all if the pending ones
        are at their cap."""
        pending = [m for m in self.monitors if not m.live and not m.closing]
        same = [m for m in pending if m.pid == pid]
        if len(same) >= self.max_pending_per_peer:
            self._drop(same[0])
            self.over_cap += 1
            pending.remove(same[0])
        elif len(pending) >= self.max_pending:
            self._drop(pending[0])
            self.over_cap += 1
            pending = pending[1:]
        live = len([m for m in self.monitors if m.live])
        return live < self.max_monitors

    def _read(self, m, now):
        try:
            data = m.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(m)
            return
        if not data:
            self._drop(m)
            return
        if m.live or m.closing:
            # After the hello the monitor may only send requests (reserved): ignored.
            return
        m.inbuf += data
        if b"\n" not in m.inbuf:
            if len(m.inbuf) > _proto.MAX_LINE:
                self._drop(m)
            return
        line, _, _rest = m.inbuf.partition(b"\n")
        m.inbuf = b""
        try:
            obj = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            # RecursionError: JSON nested deeper than Python's stack ([[[[...).
            obj = None
        err = _proto.check_monitor_hello(obj)
        if err is not None:
            code = "version" if isinstance(obj, dict) and obj.get("type") == "hello" else "protocol"
            line = _proto.encode({"type": "error", "code": code, "text": err})
            if line:
                self._enqueue(m, line)
            m.closing = True
            self._write(m, now)
            return
        try:
            lines = self.on_hello()
        except Exception:  # the hello must never take the companion down
            lines = []
        if self.live_count() >= self.max_monitors:
            line = _proto.encode({"type": "error", "code": "limit",
                                  "text": "this companion already serves %d monitors" % self.max_monitors})
            if line:
                self._enqueue(m, line)
            m.closing = True
            self.over_cap += 1
            self._write(m, now)
            return
        m.live = True
        m.last_progress = now
        for line in lines:
            self._enqueue(m, line)
        self._write(m, now)

    def _timeouts(self, now):
        for m in list(self.monitors):
            if not m.live and not m.closing and now > m.deadline:
                self._drop(m)
            elif m.pending() and now - m.last_progress > self.stall_timeout:
                self._drop(m)

    def _drop(self, m):
        if m in self.monitors:
            self.monitors.remove(m)
        try:
            self.sel.unregister(m.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            m.sock.close()
        except OSError:
            pass
