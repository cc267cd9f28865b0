import json
import os
import socket
import sys
import time
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gpumon import _companion  # noqa: E402

from fakes import GIB, MIB, FakeJax, FakeTorch  # noqa: E402,F401


class Mon(object):
    """A minimal gpumon: connects, says hello, reads lines."""

    def __init__(self, path, hello=True, min_v=1, max_v=1):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.s.settimeout(5)
        self.buf = b""
        if hello:
            self.send({"v": 1, "type": "hello", "role": "monitor", "min_v": min_v, "max_v": max_v,
                       "client": "test"})

    def send(self, obj):
        self.s.sendall((json.dumps(obj) + "\n").encode())

    def read(self, timeout=5.0):
        """Next message, or None at end of stream."""
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            self.s.settimeout(max(0.01, deadline - time.time()))
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                raise AssertionError("no message within %.1fs" % timeout)
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        assert len(line) + 1 <= 65536
        return json.loads(line)

    def until(self, pred, timeout=5.0):
        deadline = time.time() + timeout
        while True:
            m = self.read(max(0.01, deadline - time.time()))
            assert m is not None, "closed before the expected message"
            if pred(m):
                return m

    def handshake(self):
        hello = self.read()
        assert hello["type"] == "hello", hello
        hist = []
        while True:
            m = self.read()
            assert m["type"] == "history", m
            hist.append(m)
            if m.get("done", True):
                return hello, hist

    def close(self):
        self.s.close()


@pytest.fixture
def sock_dir(tmp_path):
    d = tmp_path / "g"
    d.mkdir(mode=0o700)
    os.chmod(str(d), 0o700)
    return str(d)


@pytest.fixture
def companion(sock_dir):
    made = []

    def make(**kw):
        kw.setdefault("sample_hz", 50.0)
        kw.setdefault("snapshot_s", 0.2)
        kw.setdefault("epoch_gc", False)
        c = _companion.Companion(_companion.Config(sock_dir=sock_dir, **kw))
        assert c.start(), c.problem
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop("test end")


@pytest.fixture
def fake_torch(monkeypatch):
    ft = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", ft.mod)
    return ft


@pytest.fixture
def fake_jax(monkeypatch):
    fj = FakeJax()
    monkeypatch.setitem(sys.modules, "jax", fj.mod)
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", fj.xb)
    return fj
