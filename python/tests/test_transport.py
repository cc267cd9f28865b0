import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import Mon
from gpumon import _paths, _proto
from gpumon._server import Server


def test_socket_dir_is_private_and_named_by_pid(companion, sock_dir):
    c = companion()
    assert os.path.basename(c.path) == "%d.sock" % c.pid
    assert stat.S_IMODE(os.stat(sock_dir).st_mode) == 0o700
    c.stop()
    assert not os.path.exists(c.path), "socket removed on stop"


def test_handshake_hello_then_history(companion):
    c = companion()
    m = Mon(c.path)
    hello, hist = m.handshake()
    assert hello["v"] == 1 and hello["role"] == "companion"
    assert hello["pid"] == c.pid and hello["framework"] == "none"
    assert hello["started"] == c.started
    assert hist[-1]["done"] is True


def test_version_mismatch_gets_an_error_and_close(companion):
    c = companion()
    m = Mon(c.path, min_v=2, max_v=3)
    err = m.read()
    assert err["type"] == "error" and err["code"] == "version"
    assert "v1" in err["text"] and "v2..v3" in err["text"]
    assert m.read() is None


def test_garbage_instead_of_hello_is_refused(companion):
    c = companion()
    m = Mon(c.path, hello=False)
    m.s.sendall(b"this is not json\n")
    err = m.read()
    assert err["type"] == "error" and err["code"] == "protocol"
    assert m.read() is None
    # The companion is unharmed: the next monitor is served.
    m2 = Mon(c.path)
    assert m2.handshake()[0]["type"] == "hello"


def test_oversize_hello_closes_without_reply(companion):
    c = companion()
    m = Mon(c.path, hello=False)
    try:
        m.s.sendall(b"x" * (_proto.MAX_LINE + 10))
    except OSError:
        pass
    assert m.read() is None


def test_hello_timeout(sock_dir):
    srv = Server(os.path.join(sock_dir, "1.sock"), lambda: [], hello_timeout=0.2)
    assert srv.open() is None
    m = Mon(srv.path, hello=False)
    deadline = time.time() + 3
    while srv.monitors or time.time() < deadline - 2.5:
        srv.poll(0.05)
        assert time.time() < deadline, "silent monitor was not dropped"
    assert m.read() is None
    srv.close()


def test_late_monitor_gets_history(companion):
    c = companion()
    for e in range(3):
        c.epoch(e)
    c.mark("eval", kind="eval_end")
    c._on_oom(0, 64 << 20, 10 << 30, 1 << 30)
    time.sleep(0.3)
    m = Mon(c.path)
    _hello, hist = m.handshake()
    markers = [x for h in hist for x in h.get("markers", [])]
    events = [x for h in hist for x in h.get("events", [])]
    assert [x["label"] for x in markers] == ["eval"]
    assert events[0]["kind"] == "oom" and events[0]["requested"] == 64 << 20


def test_large_history_is_split_within_the_line_limit():
    epochs = [{"type": "epoch", "epoch": i, "dev": 0, "floor": 10 ** 12 + i, "peak": 10 ** 12}
              for i in range(10000)]
    parts = _proto.history_parts(1, epochs, [], [], [], [])
    assert len(parts) > 1
    assert all(len(p) <= _proto.MAX_LINE for p in parts)
    decoded = [json.loads(p) for p in parts]
    assert [d["done"] for d in decoded] == [False] * (len(parts) - 1) + [True]
    assert sum(len(d.get("epochs", [])) for d in decoded) == 10000


def test_two_monitors_get_the_same_stream(companion):
    c = companion()
    a, b = Mon(c.path), Mon(c.path)
    a.handshake()
    b.handshake()
    c.mark("both")
    for m in (a, b):
        got = m.until(lambda x: x["type"] == "marker")
        assert got["label"] == "both"


def test_stalled_monitor_drops_oldest_and_others_keep_flowing(sock_dir):
    srv = Server(os.path.join(sock_dir, "2.sock"), lambda: [], max_queue=8)
    assert srv.open() is None
    stalled = Mon(srv.path)
    stalled.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    good = Mon(srv.path)
    for _ in range(20):
        srv.poll(0.01)
    assert srv.live_count() == 2
    payload = "y" * 2000
    t0 = time.monotonic()
    for i in range(2000):
        srv.broadcast({"type": "marker", "kind": "mark", "label": payload, "step": i})
        srv.poll(0)
        # The good monitor reads as it goes.
        if i % 50 == 0:
            good.s.setblocking(False)
            try:
                while True:
                    data = good.s.recv(1 << 20)
                    if not data:
                        break
                    good.buf += data
            except BlockingIOError:
                pass
    elapsed = time.monotonic() - t0
    assert elapsed < 5, "broadcast must never wait on a stalled monitor"
    m_stalled = [m for m in srv.monitors if m.pid and m.sock.fileno() and m.dropped]
    assert m_stalled, "the stalled monitor's queue dropped and counted"
    assert all(len(m.queue) <= 8 for m in srv.monitors)
    # A sample sent now carries that monitor's own drop count.
    srv.broadcast({"type": "sample", "dev": 0, "allocated": 1})
    srv.close()


def test_stall_timeout_disconnects(sock_dir):
    srv = Server(os.path.join(sock_dir, "3.sock"), lambda: [], max_queue=4, stall_timeout=0.3)
    assert srv.open() is None
    m = Mon(srv.path)
    m.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for _ in range(10):
        srv.poll(0.01)
    deadline = time.time() + 5
    while srv.monitors and time.time() < deadline:
        srv.broadcast({"type": "marker", "kind": "mark", "label": "z" * 30000})
        srv.poll(0.05)
    assert not srv.monitors
    srv.close()


def test_peer_rule():
    assert _paths.peer_allowed(1000, 1000)
    assert _paths.peer_allowed(1000, 0)
    assert not _paths.peer_allowed(1000, 1001)


def test_stranger_gets_no_byte():
    """A monitor of another (non-root) user is closed without a byte."""
    me = os.geteuid()
    # Outside pytest's private tmp tree so that user nobody can reach it.
    d = tempfile.mkdtemp(prefix="gpumon-stranger-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "4.sock")
    if me == 0:
        # Root is trusted by the rule, so the stranger must really be another
        # user: a child that drops to nobody before connecting.
        srv = Server(path, lambda: [b"secret\n"])
        assert srv.open() is None
        os.chmod(path, 0o777)
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1])\n"
                "try:\n"
                " s.sendall(b'{\"v\":1,\"type\":\"hello\",\"min_v\":1,\"max_v\":1}\\n')\n"
                " s.settimeout(3);print(repr(s.recv(100)))\n"
                "except OSError:\n"
                " print(repr(b''))\n")
        py = next((c for c in ("/usr/bin/python3", "/usr/local/bin/python3")
                   if os.path.exists(c)), None)
        if py is None:
            srv.close()
            pytest.skip("no system python that user nobody can run")
        p = subprocess.Popen([py, "-c", code, path], stdout=subprocess.PIPE,
                             preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
        deadline = time.time() + 5
        while p.poll() is None and time.time() < deadline:
            srv.poll(0.02)
        out = p.communicate(timeout=5)[0].decode()
        assert out.strip() == "b''", out
    else:
        # Not root: pretend the companion is someone else, making us the stranger.
        srv = Server(path, lambda: [b"secret\n"], own_uid=me + 4242)
        assert srv.open() is None
        m = Mon(path)
        for _ in range(10):
            srv.poll(0.01)
        assert m.read() is None
    assert srv.refused == 1
    srv.close()
    shutil.rmtree(d, ignore_errors=True)


def test_peer_cred_reads_our_own_uid(sock_dir):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid, uid, _gid = _paths.peer_cred(a)
    assert pid == os.getpid() and uid == os.geteuid()


def test_dir_refused_when_open_to_others(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(str(d), 0o755)
    assert "0700" in _paths.ensure_dir(str(d))
    os.chmod(str(d), 0o700)
    assert _paths.ensure_dir(str(d)) is None


def test_socket_dir_resolution(tmp_path):
    uid = os.geteuid()
    assert _paths.socket_dir({"GPUMON_DIR": "/x"}, uid) == "/x"
    assert _paths.socket_dir({"XDG_RUNTIME_DIR": str(tmp_path)}, uid) == str(tmp_path / "gpumon")
    assert _paths.socket_dir({"XDG_RUNTIME_DIR": str(tmp_path)}, uid + 1) == "/tmp/gpumon-%d" % (uid + 1)
    assert _paths.socket_dir({}, uid) == "/tmp/gpumon-%d" % uid


def test_stale_socket_of_own_pid_is_replaced(sock_dir):
    path = os.path.join(sock_dir, "5.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()  # left behind, nobody listening
    srv = Server(path, lambda: [])
    assert srv.open() is None
    Mon(path)
    srv.close()


def test_bye_on_stop(companion):
    c = companion()
    m = Mon(c.path)
    m.handshake()
    c.stop("done")
    bye = m.until(lambda x: x["type"] == "bye")
    assert bye["reason"] == "done"
    assert m.read() is None
