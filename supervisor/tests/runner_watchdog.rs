//! A jailer that hangs (here: a program that never reads its spec or exits)
//! is killed past its wall time plus a grace, and the run becomes a
//! `setup_error` instead of holding its caller forever.

use prims_protocol::jail::{CgroupBackend, CgroupSpec, JobLimits, JobSpec, NetworkMode, Status};
use prims_supervisor::job::{Cancel, Jails, JobNames, Parents};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

fn spec(wall_time_ms: u64) -> JobSpec {
    JobSpec {
        interpreter: "/usr/bin/python3".into(),
        venv: "/nonexistent".into(),
        workspace: "/nonexistent".into(),
        code: String::new(),
        limits: JobLimits {
            wall_time_ms,
            cpu_time_ms: 1000,
            memory_bytes: 64 << 20,
            swap_bytes: 0,
            pids: 16,
            open_files: 64,
            file_size_bytes: 1 << 20,
            output_bytes: 1 << 10,
            tmp_size_bytes: 1 << 20,
            cpu_millis: 1000,
        },
        network: NetworkMode::None,
        ro_binds: vec![],
        seccomp_extra_deny: vec![],
        socket_families: vec![1],
        landlock_required: true,
        cgroup: CgroupSpec {
            backend: CgroupBackend::None,
            parents: Default::default(),
            job: "watchdog".into(),
        },
        host_uid: 200_000,
        host_gid: 200_000,
        argv: vec![],
        env: vec![],
        binds: vec![],
        venv_writable: false,
        proxy_port: 0,
        cpu_idle: false,
    }
}

#[test]
fn a_hung_jailer_is_killed_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let hung = dir.path().join("hung-jailer");
    std::fs::write(&hung, "#!/bin/sh\nexec sleep 120\n").unwrap();
    std::fs::set_permissions(&hung, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = Instant::now();
    let jails = Jails {
        jailer: hung,
        parents: Parents::none(),
        names: JobNames::of_process(),
    };
    let r = jails
        .run(&spec(1), &|_, _| {}, &Cancel::default(), None)
        .unwrap();
    let took = t.elapsed();
    assert_eq!(r.outcome.status, Status::SetupError, "{r:?}");
    let msg = &r.outcome.setup_error.as_ref().unwrap().message;
    assert!(msg.contains("did not finish"), "{msg}");
    assert!(!r.cancelled, "a watchdog kill is not a user cancel");
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(20),
        "{took:?}"
    );
}
