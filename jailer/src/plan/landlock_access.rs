//! Which paths, inside the new root, get which Landlock access for a spec,
//! and what TCP the jail may do. `landlock_rules` turns this into a ruleset
//! and restricts the jail's init with it.

use prims_protocol::jail::{JobSpec, NetworkMode};
use std::path::PathBuf;

/// Paths inside the new root (the interpreter and read-only binds keep
/// their host paths there), and the TCP rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockAccess {
    /// Read and execute beneath each path.
    pub read_exec: Vec<PathBuf>,
    /// Every filesystem access Landlock knows, beneath each path.
    pub read_write: Vec<PathBuf>,
    /// Listing directories only (no file is read), beneath each path.
    pub list: Vec<PathBuf>,
    pub tcp: TcpAccess,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpAccess {
    /// Landlock leaves TCP alone: the namespace holds only `lo` (and in
    /// proxy mode the proxy's listener on it), so nothing can leave it
    /// anyway, and code may serve and connect on its own loopback.
    Unrestricted,
    /// No TCP bind or connect at all: a job without a network.
    Denied,
}

/// Device nodes python may write, beside its workspace, `/tmp` and
/// `/dev/shm`.
const WRITABLE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

pub fn landlock_access(spec: &JobSpec) -> LandlockAccess {
    let mut read_exec: Vec<PathBuf> = spec.ro_binds.clone();
    read_exec.extend(["/venv", "/etc", "/proc", "/dev"].map(PathBuf::from));
    read_exec.push(spec.interpreter.clone());
    let mut read_write: Vec<PathBuf> = ["/workspace", "/tmp", "/dev/shm"]
        .map(PathBuf::from)
        .to_vec();
    read_write.extend(WRITABLE_DEVICES.map(PathBuf::from));
    for b in &spec.binds {
        if b.writable {
            read_write.push(b.target.clone());
        } else {
            read_exec.push(b.target.clone());
        }
    }
    if spec.venv_writable {
        read_write.push(PathBuf::from("/venv"));
    }
    let tcp = match spec.network {
        NetworkMode::None => TcpAccess::Denied,
        NetworkMode::Loopback | NetworkMode::Proxy => TcpAccess::Unrestricted,
    };
    LandlockAccess {
        read_exec,
        read_write,
        // `ls /` lists the jail's root, as a notebook user expects (usr,
        // workspace, tmp…). A rule covers the whole tree beneath its path,
        // but every directory below the root already lists under its own
        // rule, except the root's own read-only tmpfs directories, which
        // hold only mount points: this adds their names, which every jail
        // of the policy shares; no file's contents, no write, no execute.
        list: vec![PathBuf::from("/")],
        tcp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::spec;
    use prims_protocol::jail::Bind;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_run_reads_its_binds_and_writes_its_workspace() {
        let a = landlock_access(&spec());
        assert_eq!(
            a.read_exec,
            paths(&[
                "/usr",
                "/lib",
                "/lib64",
                "/etc/ssl",
                "/venv",
                "/etc",
                "/proc",
                "/dev",
                "/usr/bin/python3.11",
            ])
        );
        assert_eq!(
            a.read_write,
            paths(&[
                "/workspace",
                "/tmp",
                "/dev/shm",
                "/dev/null",
                "/dev/zero",
                "/dev/full"
            ])
        );
        assert_eq!(a.list, paths(&["/"]));
        assert_eq!(a.tcp, TcpAccess::Denied);
    }

    #[test]
    fn tcp_follows_the_network_mode() {
        let mut s = spec();
        s.network = NetworkMode::None;
        assert_eq!(landlock_access(&s).tcp, TcpAccess::Denied);
        s.network = NetworkMode::Loopback;
        assert_eq!(landlock_access(&s).tcp, TcpAccess::Unrestricted);
        s.network = NetworkMode::Proxy;
        s.proxy_port = 3128;
        assert_eq!(landlock_access(&s).tcp, TcpAccess::Unrestricted);
    }

    #[test]
    fn the_network_mode_changes_no_path() {
        let base = landlock_access(&spec());
        for network in [NetworkMode::Loopback, NetworkMode::Proxy] {
            let a = landlock_access(&JobSpec {
                network,
                proxy_port: 8080,
                ..spec()
            });
            assert_eq!(
                (a.read_exec, a.read_write),
                (base.read_exec.clone(), base.read_write.clone())
            );
        }
    }

    #[test]
    fn a_writable_venv_is_writable_and_still_readable() {
        let ro = landlock_access(&spec());
        let rw = landlock_access(&JobSpec {
            venv_writable: true,
            ..spec()
        });
        assert!(!ro.read_write.contains(&PathBuf::from("/venv")));
        assert_eq!(rw.read_exec, ro.read_exec);
        assert_eq!(rw.read_write.last(), Some(&PathBuf::from("/venv")));
        assert_eq!(rw.read_write.len(), ro.read_write.len() + 1);
    }

    #[test]
    fn extra_binds_get_their_own_access_at_their_target() {
        let s = JobSpec {
            binds: vec![
                Bind {
                    source: "/var/lib/prims/uv".into(),
                    target: "/opt/uv".into(),
                    writable: false,
                },
                Bind {
                    source: "/var/lib/prims/cache".into(),
                    target: "/cache".into(),
                    writable: true,
                },
            ],
            ..spec()
        };
        let a = landlock_access(&s);
        let base = landlock_access(&spec());
        assert_eq!(a.read_exec[..base.read_exec.len()], base.read_exec[..]);
        assert_eq!(a.read_exec[base.read_exec.len()..], paths(&["/opt/uv"])[..]);
        assert_eq!(
            a.read_write[base.read_write.len()..],
            paths(&["/cache"])[..]
        );
        // The host sources are never named: only what the jail sees.
        for p in a.read_exec.iter().chain(&a.read_write) {
            assert!(!p.starts_with("/var/lib/prims"), "{}", p.display());
        }
    }
}
