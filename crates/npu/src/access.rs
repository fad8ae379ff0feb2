//! Whether this user can open the NPU, and if not, why: no node, no permission, or busy.
//!
//! The node is opened once, read-write, as the runtime would. A refusal is explained from the
//! node's group (usually `render`), `/etc/group` and this session's groups
//! (`/proc/self/status`), so "add yourself to the group" and "you were added, now log in again"
//! are told apart. Who holds a busy device comes from `/proc/<pid>/fd` links and
//! `/proc/<pid>/fdinfo` (`drm-driver: amdxdna`).

use crate::fsroot::FsRoot;
use serde::Serialize;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// How opening the device node went.
#[derive(Debug)]
pub enum OpenOutcome {
    /// Opened: the file is kept for ioctls and closed when dropped.
    Opened(File),
    /// The node does not exist.
    Missing,
    /// EACCES/EPERM.
    Denied,
    /// EBUSY: another process holds the device.
    Busy,
    /// Anything else, with the system's words.
    Failed(String),
}

impl OpenOutcome {
    /// Classifies the result of an open.
    pub fn from_result(result: io::Result<File>) -> OpenOutcome {
        match result {
            Ok(f) => OpenOutcome::Opened(f),
            Err(e) => match (e.kind(), e.raw_os_error()) {
                (io::ErrorKind::NotFound, _) => OpenOutcome::Missing,
                (io::ErrorKind::PermissionDenied, _) => OpenOutcome::Denied,
                (_, Some(libc::EBUSY)) => OpenOutcome::Busy,
                _ => OpenOutcome::Failed(e.to_string()),
            },
        }
    }
}

/// Opens `node` (resolved path) read-write, the way the NPU runtime does.
pub fn open_node(node: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(node)
}

/// Facts about the device node and this session's groups.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeAccess {
    /// True when the node is a character device (false in fixture trees or a broken /dev).
    pub is_char_device: bool,
    /// Permission bits, e.g. 0o660.
    pub mode: u32,
    /// The node's group name (`render`), or its number when `/etc/group` lacks it.
    pub group: String,
    /// This user's name.
    pub user: Option<String>,
    /// `/etc/group` lists this user in the node's group.
    pub user_listed_in_group: bool,
    /// This session's groups (`/proc/self/status` Groups) include the node's group.
    pub session_has_group: bool,
}

/// Reads the node's metadata and the group facts; `None` if the node cannot be stat'ed.
pub fn node_access(root: &FsRoot, node: &str) -> Option<NodeAccess> {
    let meta = std::fs::metadata(root.path(node)).ok()?;
    let gid = meta.gid();
    let groups = root.read_trimmed("/etc/group").unwrap_or_default();
    let status = root.read_trimmed("/proc/self/status").unwrap_or_default();
    let uid = status_field(&status, "Uid:").and_then(|f| f.split_whitespace().next()?.parse().ok());
    let user = uid.and_then(|uid: u32| user_name(root, uid));
    let group_line = groups
        .lines()
        .find(|l| l.split(':').nth(2).and_then(|g| g.parse::<u32>().ok()) == Some(gid));
    let group = group_line
        .and_then(|l| l.split(':').next())
        .map(str::to_string)
        .unwrap_or_else(|| gid.to_string());
    let user_listed_in_group = match (&user, group_line) {
        (Some(u), Some(l)) => l
            .split(':')
            .nth(3)
            .is_some_and(|m| m.split(',').any(|m| m.trim() == u)),
        _ => false,
    };
    let session_has_group = status_field(&status, "Groups:")
        .is_some_and(|g| g.split_whitespace().any(|g| g.parse() == Ok(gid)));
    Some(NodeAccess {
        is_char_device: meta.file_type().is_char_device(),
        mode: meta.mode() & 0o777,
        group,
        user,
        user_listed_in_group,
        session_has_group,
    })
}

fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
}

fn user_name(root: &FsRoot, uid: u32) -> Option<String> {
    let passwd = root.read_trimmed("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

/// A process that has the NPU open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// `/proc/<pid>/comm`, e.g. `flm`.
    pub name: String,
    /// `/proc/<pid>/cmdline` with spaces, when readable.
    pub command: Option<String>,
}

/// Processes holding `node` (a system path like `/dev/accel/accel0`). Only processes whose
/// `/proc` entries this user may read are seen. The calling process is left out on a live root.
pub fn holders(root: &FsRoot, node: &str) -> Vec<Holder> {
    let own = root.is_live().then(std::process::id);
    let mut found = Vec::new();
    for entry in root.list_dir("/proc") {
        let Ok(pid) = entry.parse::<u32>() else {
            continue;
        };
        if Some(pid) == own {
            continue;
        }
        if holds_device(root, pid, node) {
            found.push(holder(root, pid));
        }
    }
    found
}

/// Who holds the NPU, best source first: the processes the driver's hardware contexts name
/// (`context_pids`, this user's processes; the calling process left out on a live root), and
/// when those are none, the processes whose open files are the device ([`holders`]).
pub fn find_holders(root: &FsRoot, node: &str, context_pids: &[i64]) -> Vec<Holder> {
    let own = root.is_live().then(|| i64::from(std::process::id()));
    let mut pids: Vec<u32> = context_pids
        .iter()
        .filter(|&&pid| Some(pid) != own)
        .filter_map(|&pid| u32::try_from(pid).ok())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    if pids.is_empty() {
        return holders(root, node);
    }
    pids.into_iter().map(|pid| holder(root, pid)).collect()
}

/// Who holds the NPU of the system under `root`, for a caller that was refused it (EBUSY, or
/// FastFlowLM's "busy"): the processes whose open files are its device node. Empty when none
/// is visible to this user: then it is another user's program ([`holder_words`]).
pub fn device_holders(root: &std::path::Path) -> Vec<Holder> {
    let root = FsRoot::new(root);
    let node = match crate::device::detect(&root) {
        crate::device::Detection::Found(dev) => dev.node,
        _ => "/dev/accel/accel0".to_string(),
    };
    holders(&root, &node)
}

/// Whether the NPU of the system under `root` is held by another process, hidden or not: an
/// open of its node is refused with EBUSY (the node is closed again at once).
pub fn device_is_busy(root: &std::path::Path) -> bool {
    let root = FsRoot::new(root);
    let crate::device::Detection::Found(dev) = crate::device::detect(&root) else {
        return false;
    };
    matches!(
        OpenOutcome::from_result(open_node(&root.path(&dev.node))),
        OpenOutcome::Busy
    )
}

/// The holders in plain words: "flm (process 4242)", several joined with commas, or "another
/// user's program" when none is visible (the driver and `/proc` show only this user's
/// processes).
pub fn holder_words(holders: &[Holder]) -> String {
    if holders.is_empty() {
        return "another user's program".to_string();
    }
    holders
        .iter()
        .map(|h| format!("{} (process {})", h.name, h.pid))
        .collect::<Vec<_>>()
        .join(", ")
}

fn holder(root: &FsRoot, pid: u32) -> Holder {
    let name = root
        .read_trimmed(format!("/proc/{pid}/comm"))
        .unwrap_or_else(|_| "unknown".into());
    let command = root
        .read_bytes(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|c| !c.is_empty());
    Holder { pid, name, command }
}

fn holds_device(root: &FsRoot, pid: u32, node: &str) -> bool {
    let fd_dir = format!("/proc/{pid}/fd");
    for fd in root.list_dir(&fd_dir) {
        if root
            .read_link(format!("{fd_dir}/{fd}"))
            .is_some_and(|t| t == Path::new(node))
        {
            return true;
        }
        if let Ok(info) = root.read_trimmed(format!("/proc/{pid}/fdinfo/{fd}")) {
            let amdxdna = info.lines().any(|l| {
                l.strip_prefix("drm-driver:")
                    .is_some_and(|v| v.trim() == "amdxdna")
            });
            if amdxdna {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn open_errors_are_told_apart() {
        let e = |n| OpenOutcome::from_result(Err(io::Error::from_raw_os_error(n)));
        assert!(matches!(e(libc::ENOENT), OpenOutcome::Missing));
        assert!(matches!(e(libc::EACCES), OpenOutcome::Denied));
        assert!(matches!(e(libc::EPERM), OpenOutcome::Denied));
        assert!(matches!(e(libc::EBUSY), OpenOutcome::Busy));
        assert!(matches!(e(libc::ENXIO), OpenOutcome::Failed(_)));
    }

    fn session(root: &Path, groups_line: &str, status_groups: &str) {
        fs::create_dir_all(root.join("etc")).unwrap();
        fs::create_dir_all(root.join("proc/self")).unwrap();
        fs::write(
            root.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/bash\nana:x:1000:1000:Ana:/home/ana:/bin/bash\n",
        )
        .unwrap();
        fs::write(root.join("etc/group"), groups_line).unwrap();
        fs::write(
            root.join("proc/self/status"),
            format!("Name:\thearth\nUid:\t1000\t1000\t1000\t1000\nGroups:\t{status_groups}\n"),
        )
        .unwrap();
        fs::create_dir_all(root.join("dev/accel")).unwrap();
        fs::write(root.join("dev/accel/accel0"), "").unwrap();
    }

    fn node_gid(root: &Path) -> u32 {
        fs::metadata(root.join("dev/accel/accel0")).unwrap().gid()
    }

    #[test]
    fn user_added_but_session_is_old() {
        let dir = tempfile::tempdir().unwrap();
        session(dir.path(), "", "");
        let gid = node_gid(dir.path());
        fs::write(
            dir.path().join("etc/group"),
            format!("users:x:100:\nrender:x:{gid}:ana,bob\n"),
        )
        .unwrap();
        fs::write(
            dir.path().join("proc/self/status"),
            "Uid:\t1000\t1000\t1000\t1000\nGroups:\t100 1000\n",
        )
        .unwrap();
        let a = node_access(&FsRoot::new(dir.path()), "/dev/accel/accel0").unwrap();
        assert_eq!(a.group, "render");
        assert_eq!(a.user.as_deref(), Some("ana"));
        assert!(a.user_listed_in_group);
        assert!(!a.session_has_group);
        assert!(!a.is_char_device, "a fixture node is a plain file");
    }

    #[test]
    fn user_in_group_and_session() {
        let dir = tempfile::tempdir().unwrap();
        session(dir.path(), "", "");
        let gid = node_gid(dir.path());
        fs::write(
            dir.path().join("etc/group"),
            format!("render:x:{gid}:ana\n"),
        )
        .unwrap();
        fs::write(
            dir.path().join("proc/self/status"),
            format!("Uid:\t1000\t1000\t1000\t1000\nGroups:\t{gid} 1000\n"),
        )
        .unwrap();
        let a = node_access(&FsRoot::new(dir.path()), "/dev/accel/accel0").unwrap();
        assert!(a.user_listed_in_group && a.session_has_group);
    }

    #[test]
    fn holders_from_fd_links_and_fdinfo() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("proc");
        // pid 4242: flm with a link to the node
        fs::create_dir_all(p.join("4242/fd")).unwrap();
        fs::write(p.join("4242/comm"), "flm\n").unwrap();
        fs::write(p.join("4242/cmdline"), b"flm\0serve\0qwen3:1.7b\0").unwrap();
        symlink("/dev/accel/accel0", p.join("4242/fd/7")).unwrap();
        // pid 777: found through fdinfo only
        fs::create_dir_all(p.join("777/fd")).unwrap();
        fs::create_dir_all(p.join("777/fdinfo")).unwrap();
        fs::write(p.join("777/comm"), "python3\n").unwrap();
        symlink("/dev/dri/renderD128", p.join("777/fd/3")).unwrap();
        fs::write(
            p.join("777/fdinfo/3"),
            "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdxdna\ndrm-client-id:\t12\n",
        )
        .unwrap();
        // pid 12: an amdgpu client, not a holder
        fs::create_dir_all(p.join("12/fd")).unwrap();
        fs::create_dir_all(p.join("12/fdinfo")).unwrap();
        symlink("/dev/dri/card1", p.join("12/fd/3")).unwrap();
        fs::write(p.join("12/fdinfo/3"), "drm-driver:\tamdgpu\n").unwrap();
        fs::create_dir_all(p.join("self")).unwrap();
        let h = holders(&FsRoot::new(dir.path()), "/dev/accel/accel0");
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].pid, 777);
        assert_eq!(h[1].name, "flm");
        assert_eq!(h[1].command.as_deref(), Some("flm serve qwen3:1.7b"));
        assert_eq!(
            holder_words(&h),
            "python3 (process 777), flm (process 4242)"
        );
        // The driver's contexts name the holder first; the /proc scan is the fallback.
        let by_context = find_holders(&FsRoot::new(dir.path()), "/dev/accel/accel0", &[4242, 4242]);
        assert_eq!(by_context.len(), 1);
        assert_eq!(by_context[0].name, "flm");
        let scanned = find_holders(&FsRoot::new(dir.path()), "/dev/accel/accel0", &[]);
        assert_eq!(scanned, h);
        assert_eq!(holder_words(&[]), "another user's program");
    }
}
