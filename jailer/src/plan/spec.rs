//! What the jailer accepts as a job spec, checked before it does anything:
//! a spec it can read and decode within [`MAX_SPEC_BYTES`], ids other than
//! host root, limits above 0, absolute paths that exist with the right
//! type, bind targets that cannot cover the jail's own mounts, a proxy port
//! with proxy mode, and no NUL byte in the code.
//!
//! Besides the spec itself, only file metadata is read here, so the checks
//! run without root.

use crate::error::JailError;
use nix::errno::Errno;
use prims_cgroup::Version;
use prims_protocol::jail::{decode_spec, CgroupBackend, JobSpec, NetworkMode, MAX_SPEC_BYTES};
use std::io::Read;
use std::path::{Component, Path};

/// Where bind targets may not go: the jail's own mounts.
const RESERVED_TARGETS: [&str; 5] = ["/proc", "/dev", "/workspace", "/venv", "/tmp"];

/// Read one spec from `input`, refusing one larger than [`MAX_SPEC_BYTES`]
/// without reading past its limit.
pub fn read(input: impl Read) -> Result<JobSpec, JailError> {
    let mut bytes = Vec::new();
    input
        .take(MAX_SPEC_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| JailError::Spec(format!("reading the job spec: {e}")))?;
    decode_spec(&bytes).map_err(|e| JailError::Spec(e.to_string()))
}

/// Every check on the spec alone, in the order the jailer has always made
/// them, so the first problem reported stays the same.
pub fn validate(spec: &JobSpec) -> Result<(), JailError> {
    if spec.host_uid == 0 || spec.host_gid == 0 {
        return Err(JailError::Spec(
            "host_uid and host_gid must not be 0: the jail never maps host root".into(),
        ));
    }
    let l = &spec.limits;
    for (name, v) in [
        ("wall_time_ms", l.wall_time_ms),
        ("cpu_time_ms", l.cpu_time_ms),
        ("memory_bytes", l.memory_bytes),
        ("pids", l.pids),
        ("open_files", l.open_files),
        ("output_bytes", l.output_bytes),
        ("tmp_size_bytes", l.tmp_size_bytes),
        ("cpu_millis", l.cpu_millis),
    ] {
        if v == 0 {
            return Err(JailError::Spec(format!(
                "limits.{name} must be greater than 0"
            )));
        }
    }
    if !spec.interpreter.is_absolute() {
        return Err(JailError::Spec(format!(
            "interpreter {} must be an absolute path",
            spec.interpreter.display()
        )));
    }
    exists("interpreter", &spec.interpreter, false)?;
    exists("venv", &spec.venv, true)?;
    exists("venv python", &spec.venv.join("bin/python"), false)?;
    exists("workspace", &spec.workspace, true)?;
    for b in &spec.binds {
        bind_target(&b.target)?;
    }
    if spec.network == NetworkMode::Proxy && spec.proxy_port == 0 {
        return Err(JailError::Spec(
            "network mode proxy needs a proxy_port other than 0".into(),
        ));
    }
    if spec.argv.first().is_some_and(|a| !a.starts_with('/')) {
        return Err(JailError::Spec(
            "argv[0] must be an absolute path inside the jail".into(),
        ));
    }
    if spec.code.contains('\0') {
        return Err(JailError::Spec("code contains a NUL byte".into()));
    }
    Ok(())
}

/// `path` exists and is a directory (`dir`) or not one, following links.
fn exists(what: &'static str, path: &Path, dir: bool) -> Result<(), JailError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() == dir => Ok(()),
        Ok(_) => Err(JailError::Input {
            what,
            path: path.to_path_buf(),
            errno: if dir { Errno::ENOTDIR } else { Errno::EISDIR },
        }),
        Err(e) => Err(JailError::Input {
            what,
            path: path.to_path_buf(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        }),
    }
}

/// A bind may go anywhere in the new root but over `/` itself and the
/// jail's own mounts, named without `.` or `..` so it cannot sneak back in.
fn bind_target(t: &Path) -> Result<(), JailError> {
    let reserved = RESERVED_TARGETS.iter().any(|r| t.starts_with(r));
    let clean = t
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !t.is_absolute() || !clean || reserved || t == Path::new("/") {
        return Err(JailError::Spec(format!(
            "bind target {} must be absolute, normalized and outside /proc, /dev, /tmp, /venv and /workspace",
            t.display()
        )));
    }
    Ok(())
}

/// The proxy channel (`--proxy-fd`) and proxy mode come together or not at all.
pub fn check_proxy_channel(network: NetworkMode, has_channel: bool) -> Result<(), JailError> {
    if (network == NetworkMode::Proxy) != has_channel {
        return Err(JailError::Spec(
            "a proxy channel (--proxy-fd) goes with network mode proxy, and only with it".into(),
        ));
    }
    Ok(())
}

/// The cgroup version to make the job cgroup with, `None` for no cgroup.
/// `auto` must have been resolved by the caller, which knows the host.
pub fn cgroup_version(backend: CgroupBackend) -> Result<Option<Version>, JailError> {
    match backend {
        CgroupBackend::None => Ok(None),
        CgroupBackend::V1 => Ok(Some(Version::V1)),
        CgroupBackend::V2 => Ok(Some(Version::V2)),
        CgroupBackend::Auto => Err(JailError::Spec(
            "cgroup.backend must be resolved to v1, v2 or none before the jailer runs".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::{on_host, spec};
    use prims_protocol::jail::{Bind, CpuClass};
    use std::path::PathBuf;

    fn refused(spec: &JobSpec) -> JailError {
        match validate(spec) {
            Ok(()) => panic!("accepted: {spec:?}"),
            Err(e) => e,
        }
    }

    fn spec_message(e: JailError) -> String {
        match e {
            JailError::Spec(m) => m,
            other => panic!("not a spec error: {other:?}"),
        }
    }

    /// (what, path, errno) of an input error.
    fn input(e: JailError) -> (&'static str, PathBuf, Errno) {
        match e {
            JailError::Input { what, path, errno } => (what, path, errno),
            other => panic!("not an input error: {other:?}"),
        }
    }

    #[test]
    fn a_sound_spec_passes() {
        let host = on_host();
        validate(&host.spec).unwrap();
    }

    #[test]
    fn host_root_is_never_mapped() {
        let host = on_host();
        for (uid, gid) in [(0, 100_000), (100_000, 0), (0, 0)] {
            let s = JobSpec {
                host_uid: uid,
                host_gid: gid,
                ..host.spec.clone()
            };
            let m = spec_message(refused(&s));
            assert!(m.contains("must not be 0"), "{m}");
        }
    }

    #[test]
    fn every_limit_but_swap_and_file_size_must_be_above_zero() {
        let host = on_host();
        type Field = fn(&mut JobSpec) -> &mut u64;
        let fields: [(&str, Field); 8] = [
            ("wall_time_ms", |s| &mut s.limits.wall_time_ms),
            ("cpu_time_ms", |s| &mut s.limits.cpu_time_ms),
            ("memory_bytes", |s| &mut s.limits.memory_bytes),
            ("pids", |s| &mut s.limits.pids),
            ("open_files", |s| &mut s.limits.open_files),
            ("output_bytes", |s| &mut s.limits.output_bytes),
            ("tmp_size_bytes", |s| &mut s.limits.tmp_size_bytes),
            ("cpu_millis", |s| &mut s.limits.cpu_millis),
        ];
        for (name, field) in fields {
            let mut s = host.spec.clone();
            *field(&mut s) = 0;
            assert_eq!(
                spec_message(refused(&s)),
                format!("limits.{name} must be greater than 0")
            );
        }
        let mut s = host.spec.clone();
        s.limits.swap_bytes = 0;
        s.limits.file_size_bytes = 0;
        validate(&s).unwrap();
    }

    #[test]
    fn the_interpreter_path_must_be_absolute() {
        let host = on_host();
        for p in ["python3", "./python3", "usr/bin/python3", ""] {
            let s = JobSpec {
                interpreter: PathBuf::from(p),
                ..host.spec.clone()
            };
            let m = spec_message(refused(&s));
            assert!(m.ends_with("must be an absolute path"), "{p:?}: {m}");
        }
    }

    #[test]
    fn absent_inputs_are_named_with_enoent() {
        let host = on_host();
        let gone = host.dir.path().join("gone");
        type SetPath = fn(&mut JobSpec, PathBuf);
        let cases: [(&str, SetPath); 3] = [
            ("interpreter", |s, p| s.interpreter = p),
            ("venv", |s, p| s.venv = p),
            ("workspace", |s, p| s.workspace = p),
        ];
        for (what, set) in cases {
            let mut s = host.spec.clone();
            set(&mut s, gone.clone());
            assert_eq!(input(refused(&s)), (what, gone.clone(), Errno::ENOENT));
        }
        std::fs::remove_file(host.spec.venv.join("bin/python")).unwrap();
        assert_eq!(
            input(refused(&host.spec)),
            (
                "venv python",
                host.spec.venv.join("bin/python"),
                Errno::ENOENT
            )
        );
    }

    #[test]
    fn inputs_of_the_wrong_type_are_refused() {
        let host = on_host();
        let file = host.spec.interpreter.clone();
        let dir = host.spec.workspace.clone();
        let s = JobSpec {
            interpreter: dir.clone(),
            ..host.spec.clone()
        };
        assert_eq!(input(refused(&s)), ("interpreter", dir, Errno::EISDIR));
        let s = JobSpec {
            venv: file.clone(),
            ..host.spec.clone()
        };
        assert_eq!(input(refused(&s)), ("venv", file.clone(), Errno::ENOTDIR));
        let s = JobSpec {
            workspace: file.clone(),
            ..host.spec.clone()
        };
        assert_eq!(input(refused(&s)), ("workspace", file, Errno::ENOTDIR));
    }

    #[test]
    fn an_input_reached_through_a_symlink_counts() {
        let host = on_host();
        let link = host.dir.path().join("ws-link");
        std::os::unix::fs::symlink(&host.spec.workspace, &link).unwrap();
        let s = JobSpec {
            workspace: link,
            ..host.spec.clone()
        };
        validate(&s).unwrap();
    }

    #[test]
    fn a_nul_byte_in_a_path_is_an_unusable_input() {
        let host = on_host();
        let s = JobSpec {
            venv: PathBuf::from("/var/lib/prims\0/envs"),
            ..host.spec.clone()
        };
        let (what, _, errno) = input(refused(&s));
        assert_eq!((what, errno), ("venv", Errno::EIO));
    }

    fn with_bind(spec: &JobSpec, target: &str) -> JobSpec {
        JobSpec {
            binds: vec![Bind {
                source: spec.workspace.clone(),
                target: PathBuf::from(target),
                writable: false,
            }],
            ..spec.clone()
        }
    }

    #[test]
    fn binds_cannot_cover_the_jails_own_mounts() {
        let host = on_host();
        for t in [
            "/",
            "/proc",
            "/proc/self",
            "/dev",
            "/dev/shm",
            "/workspace",
            "/workspace/mounts",
            "/venv",
            "/venv/bin",
            "/tmp",
            "/tmp/x",
            "opt/uv",
            "",
            "/opt/../proc",
            "/opt/..",
            "./opt",
        ] {
            let m = spec_message(refused(&with_bind(&host.spec, t)));
            assert!(
                m.starts_with(&format!("bind target {t} must be absolute")),
                "{t:?}: {m}"
            );
        }
    }

    #[test]
    fn binds_elsewhere_are_allowed() {
        let host = on_host();
        // Path::starts_with compares whole components.
        for t in [
            "/opt/uv",
            "/procfs",
            "/devices",
            "/tmpdir",
            "/venvs/x",
            "/root/.cache/uv",
        ] {
            validate(&with_bind(&host.spec, t)).unwrap();
        }
    }

    #[test]
    fn the_bind_source_is_left_to_the_mount_step() {
        // Opening it is how the init sees what it is; the spec check leaves it be.
        let host = on_host();
        let mut s = with_bind(&host.spec, "/opt/uv");
        s.binds[0].source = host.dir.path().join("gone");
        validate(&s).unwrap();
    }

    #[test]
    fn proxy_mode_needs_a_port() {
        let host = on_host();
        let mut s = JobSpec {
            network: NetworkMode::Proxy,
            proxy_port: 0,
            ..host.spec.clone()
        };
        assert_eq!(
            spec_message(refused(&s)),
            "network mode proxy needs a proxy_port other than 0"
        );
        s.proxy_port = 3128;
        validate(&s).unwrap();
        // Without proxy mode the port is not looked at.
        s.network = NetworkMode::Loopback;
        s.proxy_port = 0;
        validate(&s).unwrap();
    }

    #[test]
    fn argv_must_start_with_an_absolute_program() {
        let host = on_host();
        let mut s = host.spec.clone();
        for argv0 in ["uv", "./uv", ""] {
            s.argv = vec![argv0.into(), "pip".into()];
            assert_eq!(
                spec_message(refused(&s)),
                "argv[0] must be an absolute path inside the jail"
            );
        }
        s.argv = vec!["/opt/uv/uv".into(), "pip".into()];
        validate(&s).unwrap();
    }

    #[test]
    fn code_with_a_nul_byte_is_refused() {
        let host = on_host();
        let s = JobSpec {
            code: "print(1)\0".into(),
            ..host.spec.clone()
        };
        assert_eq!(spec_message(refused(&s)), "code contains a NUL byte");
    }

    #[test]
    fn the_first_problem_in_the_old_order_is_reported() {
        let host = on_host();
        let mut s = with_bind(&host.spec, "/proc");
        s.workspace = host.dir.path().join("gone");
        s.code = "\0".into();
        assert_eq!(input(refused(&s)).0, "workspace");
        s.limits.pids = 0;
        assert_eq!(
            spec_message(refused(&s)),
            "limits.pids must be greater than 0"
        );
    }

    #[test]
    fn a_spec_round_trips_through_read() {
        let s = spec();
        let bytes = serde_json::to_vec(&s).unwrap();
        assert_eq!(read(bytes.as_slice()).unwrap(), s);
    }

    #[test]
    fn cpu_class_is_normal_unless_asked_for() {
        // A spec without the field decodes at normal priority.
        let mut v = serde_json::to_value(spec()).unwrap();
        let o = v.as_object_mut().unwrap();
        assert_eq!(o.remove("cpu"), Some("normal".into()));
        assert_eq!(
            read(v.to_string().as_bytes()).unwrap().cpu,
            CpuClass::Normal
        );
        for class in [CpuClass::Batch, CpuClass::Idle] {
            let s = JobSpec {
                cpu: class,
                ..spec()
            };
            let back = read(serde_json::to_vec(&s).unwrap().as_slice()).unwrap();
            assert_eq!(back, s);
        }
        let o = v.as_object_mut().unwrap();
        o.insert("cpu".into(), "realtime".into());
        assert!(read(v.to_string().as_bytes()).is_err());
    }

    #[test]
    fn an_oversized_spec_is_refused_unread() {
        // Valid JSON padded past the limit: refused for its size alone.
        let mut bytes = serde_json::to_vec(&spec()).unwrap();
        bytes.resize(MAX_SPEC_BYTES + 10, b' ');
        let m = spec_message(read(bytes.as_slice()).unwrap_err());
        assert_eq!(
            m,
            format!(
                "job spec is {} bytes; the limit is {MAX_SPEC_BYTES}",
                MAX_SPEC_BYTES + 1
            )
        );
        // Exactly at the limit it is read and decoded.
        bytes.truncate(MAX_SPEC_BYTES);
        assert_eq!(read(bytes.as_slice()).unwrap(), spec());
    }

    #[test]
    fn garbage_and_unknown_fields_are_refused() {
        for bytes in [
            &b""[..],
            b"{",
            b"null",
            b"\xff\xfe",
            br#"{"interpreter": "/usr/bin/python3"}"#,
        ] {
            let m = spec_message(read(bytes).unwrap_err());
            assert!(m.starts_with("job spec is not valid: "), "{m}");
        }
        let mut v = serde_json::to_value(spec()).unwrap();
        v["mount_everything"] = serde_json::Value::Bool(true);
        let m = spec_message(read(v.to_string().as_bytes()).unwrap_err());
        assert!(m.contains("unknown field `mount_everything`"), "{m}");
    }

    #[test]
    fn a_failing_reader_is_a_spec_error() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from_raw_os_error(libc::EBADF))
            }
        }
        let m = spec_message(read(Broken).unwrap_err());
        assert!(m.starts_with("reading the job spec: "), "{m}");
    }

    #[test]
    fn the_proxy_channel_goes_with_proxy_mode_only() {
        check_proxy_channel(NetworkMode::Proxy, true).unwrap();
        check_proxy_channel(NetworkMode::None, false).unwrap();
        check_proxy_channel(NetworkMode::Loopback, false).unwrap();
        for (mode, has) in [
            (NetworkMode::Proxy, false),
            (NetworkMode::None, true),
            (NetworkMode::Loopback, true),
        ] {
            let m = spec_message(check_proxy_channel(mode, has).unwrap_err());
            assert!(m.starts_with("a proxy channel (--proxy-fd)"), "{m}");
        }
    }

    #[test]
    fn the_cgroup_backend_must_be_resolved() {
        assert!(matches!(cgroup_version(CgroupBackend::None), Ok(None)));
        assert!(matches!(
            cgroup_version(CgroupBackend::V1),
            Ok(Some(Version::V1))
        ));
        assert!(matches!(
            cgroup_version(CgroupBackend::V2),
            Ok(Some(Version::V2))
        ));
        let m = spec_message(cgroup_version(CgroupBackend::Auto).unwrap_err());
        assert!(m.starts_with("cgroup.backend must be resolved"), "{m}");
    }
}
