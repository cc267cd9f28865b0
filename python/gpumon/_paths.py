"""Where the socket lives and who may connect (docs/protocol.md, "Transport")."""

import os
import socket
import stat
import struct

_CRED = struct.Struct("3i")


def socket_dir(env=None, uid=None):
    """$GPUMON_DIR, else $XDG_RUNTIME_DIR/gpumon when that directory is ours,
    else /tmp/gpumon-<uid>. gpumon scans all of these."""
    env = os.environ if env is None else env
    uid = os.geteuid() if uid is None else uid
    explicit = env.get("GPUMON_DIR")
    if explicit:
        return explicit
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        try:
            st = os.stat(xdg)
            if st.st_uid == uid and stat.S_ISDIR(st.st_mode):
                return os.path.join(xdg, "gpumon")
        except OSError:
            pass
    return "/tmp/gpumon-%d" % uid


def ensure_dir(path, uid=None):
    """Create the directory 0700 or check an existing one. Returns None when
    usable, else the reason it is refused (someone else's, or open to others)."""
    uid = os.geteuid() if uid is None else uid
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        return "cannot create %s: %s" % (path, e)
    try:
        st = os.lstat(path)
    except OSError as e:
        return "cannot stat %s: %s" % (path, e)
    if not stat.S_ISDIR(st.st_mode):
        return "%s is not a directory" % path
    if st.st_uid != uid:
        return "%s belongs to uid %d, not to this user (%d)" % (path, st.st_uid, uid)
    if st.st_mode & 0o077:
        return "%s has mode %o; it must be 0700" % (path, st.st_mode & 0o777)
    return None


def host_pid():
    """(pid as the host sees it when known, pid in our namespace or None)."""
    own = os.getpid()
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    pids = [int(x) for x in line.split()[1:]]
                    if pids and pids[0] != own:
                        return pids[0], own
                    break
    except (OSError, ValueError):
        pass
    return own, None


def peer_allowed(own_uid, peer_uid):
    """Same user, or root."""
    return peer_uid == own_uid or peer_uid == 0


def peer_cred(sock):
    """(pid, uid, gid) of the other end of a Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    return _CRED.unpack(raw)
