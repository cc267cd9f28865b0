//! Is the process a socket is named after alive, and is it the one serving us?
//!
//! `SO_PEERCRED` names the process that called `listen()`, and keeps naming it after
//! that process exited: a user can keep listeners whose creators are gone, wait until
//! the pids come round to someone else's processes, and the pid check of `verify`
//! passes. So a peer is believed only when, besides that check:
//! - a process with that pid exists (`/proc/PID`), and it started before the socket
//!   file was made (a reused pid belongs to a process started after its old owner
//!   died, hence after the socket was made);
//! - that process holds the other end of *our* connection in its descriptor table
//!   (`/proc/PID/fd`): the end is found by asking the kernel (`sock_diag`, the
//!   interface `ss` uses) which socket our connected socket is joined to. A listener
//!   handed to another process is accepted by that process, not by the one it names.
//!
//! `sock_diag` is one fixed request and answer; hand-written rather than pulling a
//! netlink crate family for ~60 lines.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Slack between a process's start and its socket's time stamp: start times count
/// whole clock ticks, file times use the coarse clock, and the wall clock may have
/// been stepped since. Reusing a pid takes a walk through the whole pid space
/// (seconds at the least), so a second still tells a reused pid from the real one.
const START_SLACK_MS: i64 = 1_000;

/// Why a peer is not the live process its socket is named after.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotAlive {
    /// No process has that pid: a stale socket, or one whose listener outlived it.
    NoProcess,
    /// Said in the status line.
    Refused(String),
}

/// Before connecting: the named process exists and is older than the socket file.
pub(crate) fn started_before(pid: u32, socket: BorrowedFd<'_>) -> Result<(), NotAlive> {
    let Some(ticks) = start_ticks(pid) else {
        return Err(NotAlive::NoProcess);
    };
    let Some(made_ms) = socket_made_ms(socket) else {
        return Ok(());
    };
    let Some(started_ms) = started_wall_ms(ticks) else {
        return Ok(());
    };
    if started_ms > made_ms + START_SLACK_MS {
        return Err(NotAlive::Refused(format!(
            "pid {pid} started {} ms after its socket was made: the pid was reused",
            started_ms - made_ms
        )));
    }
    Ok(())
}

/// After the peer has answered: `pid` holds the other end of `stream`.
/// `own_uid` matters only when the descriptor table cannot be read (see below).
pub(crate) fn holds_our_peer(
    pid: u32,
    stream: BorrowedFd<'_>,
    own_uid: u32,
    path: &std::path::Path,
) -> Result<(), NotAlive> {
    let held = match peer_inode(stream) {
        Ok(Some(peer)) => holds_socket(pid, peer),
        Ok(None) => {
            return Err(NotAlive::Refused(
                "its end of the connection is gone".into(),
            ));
        }
        // No sock_diag (a kernel without unix_diag, a filtered container): the weaker
        // test that the process holds a socket listening at this path, which a listener
        // handed to another process fails as well.
        Err(_) => holds_listener_at(pid, path),
    };
    match held {
        Ok(true) => Ok(()),
        Ok(false) => {
            if start_ticks(pid).is_none() {
                Err(NotAlive::NoProcess)
            } else {
                Err(NotAlive::Refused(format!(
                    "pid {pid} does not hold the socket that answered: another process serves it"
                )))
            }
        }
        // Another user's non-dumpable process, and we are not root: `peer_allowed`
        // already limits peers to this user and root, who could impersonate it anyway.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied && own_uid != 0 => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(NotAlive::NoProcess),
        Err(e) => Err(NotAlive::Refused(format!(
            "cannot read pid {pid}'s descriptors: {e}"
        ))),
    }
}

/// Start time in clock ticks since boot (field 22 of /proc/PID/stat); `None`: no
/// such process. The same reading as `source::procfs::start_ticks`, which the
/// channel may not import (it sits below `source`).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Whether `/proc/PID/fd` has a descriptor on the socket with inode `ino`.
pub(crate) fn holds_socket(pid: u32, ino: u64) -> io::Result<bool> {
    let want = format!("socket:[{ino}]");
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(e) = e else { continue };
        if std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == want.as_str()) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether `pid` holds a socket that `/proc/net/unix` lists as listening at `path`.
fn holds_listener_at(pid: u32, path: &std::path::Path) -> io::Result<bool> {
    let table = std::fs::read_to_string("/proc/net/unix")?;
    let want = path.to_string_lossy();
    let inodes: Vec<u64> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            // Num RefCount Protocol Flags Type St Inode Path (the inode may be padded)
            let f: Vec<&str> = l.split_whitespace().collect();
            let listening = f.get(3).is_some_and(|fl| *fl == "00010000");
            (listening && f.len() > 7 && f[7..].join(" ") == want)
                .then(|| f.get(6)?.parse().ok())?
        })
        .collect();
    for ino in inodes {
        if holds_socket(pid, ino)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// When the socket file was made, as wall-clock ms: its birth time where the file
/// system keeps one (it cannot be changed later), else its change time.
fn socket_made_ms(fd: BorrowedFd<'_>) -> Option<i64> {
    // Through std, not `libc::statx`: std reaches statx by a weak symbol and falls back to
    // fstat, so the binary still links against glibc 2.17 (the manylinux2014 wheel).
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::File::from(fd.try_clone_to_owned().ok()?)
        .metadata()
        .ok()?;
    let born = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .filter(|d| d.as_secs() > 0);
    Some(match born {
        Some(d) => i64::try_from(d.as_millis()).ok()?,
        None => meta.ctime() * 1000 + meta.ctime_nsec() / 1_000_000,
    })
}

/// Wall-clock ms of a start time given in clock ticks since boot.
fn started_wall_ms(ticks: u64) -> Option<i64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    let since_boot_ms = i64::try_from(ticks).ok()? * 1000 / i64::from(hz as i32);
    let now = |clock| {
        // SAFETY: clock_gettime writes the zeroed struct.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
            .then(|| ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000)
    };
    let boot_wall_ms = now(libc::CLOCK_REALTIME)? - now(libc::CLOCK_BOOTTIME)?;
    Some(boot_wall_ms + since_boot_ms)
}

/// The inode of the socket joined to ours, from `sock_diag` (`None`: not joined).
fn peer_inode(stream: BorrowedFd<'_>) -> io::Result<Option<u64>> {
    // SAFETY: fstat fills the zeroed struct for a valid descriptor.
    let own_ino = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(stream.as_raw_fd(), &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        st.st_ino
    };
    let own_ino = u32::try_from(own_ino).map_err(|_| io::Error::other("inode out of range"))?;
    // SAFETY: a plain socket(2) call; the result is checked.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    let nl = unsafe { OwnedFd::from_raw_fd(raw) };
    let req = diag_request(own_ino);
    // SAFETY: sends the bytes of a valid buffer to the kernel (nl_pid 0).
    let sent = unsafe {
        let mut to: libc::sockaddr_nl = std::mem::zeroed();
        to.nl_family = libc::AF_NETLINK as u16;
        libc::sendto(
            nl.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&raw const to).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 8192];
    // SAFETY: receives into a buffer of the given size.
    let n = unsafe { libc::recv(nl.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    parse_diag_answer(&buf[..n as usize])
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_PEER: u32 = 0x4;
const UNIX_DIAG_PEER: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDR: usize = 16;
const UNIX_DIAG_MSG: usize = 16;

/// `nlmsghdr` + `unix_diag_req` asking about one socket (by inode), with its peer.
fn diag_request(ino: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(40);
    b.extend_from_slice(&40u32.to_ne_bytes()); // nlmsg_len
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    b.extend_from_slice(&1u32.to_ne_bytes()); // seq
    b.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    b.push(libc::AF_UNIX as u8);
    b.push(0); // protocol
    b.extend_from_slice(&0u16.to_ne_bytes()); // pad
    b.extend_from_slice(&u32::MAX.to_ne_bytes()); // states: any
    b.extend_from_slice(&ino.to_ne_bytes());
    b.extend_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    b.extend_from_slice(&u32::MAX.to_ne_bytes()); // cookie: none
    b.extend_from_slice(&u32::MAX.to_ne_bytes());
    b
}

fn parse_diag_answer(b: &[u8]) -> io::Result<Option<u64>> {
    let u16_at = |i: usize| b.get(i..i + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]));
    let u32_at = |i: usize| {
        b.get(i..i + 4)
            .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
    };
    let short = || io::Error::other("short sock_diag answer");
    let len = u32_at(0).ok_or_else(short)? as usize;
    let kind = u16_at(4).ok_or_else(short)?;
    if kind == NLMSG_ERROR {
        let errno = i32::from_ne_bytes(u32_at(NLMSG_HDR).ok_or_else(short)?.to_ne_bytes());
        return Err(io::Error::from_raw_os_error(-errno));
    }
    let end = len.min(b.len());
    let mut at = NLMSG_HDR + UNIX_DIAG_MSG;
    while at + 4 <= end {
        let alen = u16_at(at).ok_or_else(short)? as usize;
        let atype = u16_at(at + 2).ok_or_else(short)?;
        if alen < 4 {
            break;
        }
        if atype == UNIX_DIAG_PEER {
            let peer = u32_at(at + 4).ok_or_else(short)?;
            return Ok((peer != 0).then_some(u64::from(peer)));
        }
        at += (alen + 3) & !3;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::net::{UnixListener, UnixStream};

    #[test]
    fn the_peer_of_a_connection_is_found_in_the_acceptors_descriptors() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("s.sock");
        let l = UnixListener::bind(&path).expect("bind");
        let c = UnixStream::connect(&path).expect("connect");
        let (server, _) = l.accept().expect("accept");
        let peer = peer_inode(c.as_fd()).expect("sock_diag").expect("joined");
        // SAFETY: fstat on a valid descriptor.
        let server_ino = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            assert_eq!(libc::fstat(server.as_raw_fd(), &mut st), 0);
            st.st_ino
        };
        assert_eq!(peer, server_ino);
        let me = std::process::id();
        assert_eq!(holds_socket(me, peer).ok(), Some(true));
        assert!(holds_our_peer(me, c.as_fd(), 0, &path).is_ok());
        assert_eq!(
            holds_listener_at(me, &path).ok(),
            Some(true),
            "the fallback"
        );
        let other = dir.path().join("t.sock");
        assert_eq!(holds_listener_at(me, &other).ok(), Some(false));
        drop(server);
        assert_ne!(holds_our_peer(me, c.as_fd(), 0, &path), Ok(()));
    }

    #[test]
    fn a_process_younger_than_its_socket_is_a_reused_pid() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("s.sock");
        let _l = UnixListener::bind(&path).expect("bind");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(&path)
            .expect("open");
        assert_eq!(started_before(std::process::id(), f.as_fd()), Ok(()));
        assert_eq!(
            started_before(u32::MAX - 1, f.as_fd()),
            Err(NotAlive::NoProcess)
        );
        std::thread::sleep(std::time::Duration::from_millis(
            START_SLACK_MS as u64 + 150,
        ));
        let mut young = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let r = started_before(young.id(), f.as_fd());
        let _ = young.kill();
        let _ = young.wait();
        assert!(
            matches!(r, Err(NotAlive::Refused(ref w)) if w.contains("reused")),
            "{r:?}"
        );
    }

    #[test]
    fn diag_answers_are_parsed_or_refused() {
        assert!(parse_diag_answer(&[1, 2]).is_err());
        let mut err = vec![0u8; 20];
        err[0..4].copy_from_slice(&20u32.to_ne_bytes());
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        let e = parse_diag_answer(&err).expect_err("error");
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        let mut ok = vec![0u8; 40];
        ok[0..4].copy_from_slice(&40u32.to_ne_bytes());
        ok[32..34].copy_from_slice(&8u16.to_ne_bytes());
        ok[34..36].copy_from_slice(&UNIX_DIAG_PEER.to_ne_bytes());
        ok[36..40].copy_from_slice(&77u32.to_ne_bytes());
        assert_eq!(parse_diag_answer(&ok).expect("ok"), Some(77));
    }
}
