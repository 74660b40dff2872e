//! A jailer that hangs (here: a program that never reads its spec or exits)
//! is killed past its wall time plus a grace, and the run becomes a
//! `setup_error` instead of holding its caller forever.

use prims_protocol::jail::{JobSpec, Status};
use prims_supervisor::job::{Cancel, Jails, JobNames, Parents};
use prims_tests::jail_spec::{job_spec, no_cgroup};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

/// The hung jailer never reads its spec: only its wall time counts.
fn spec(wall_time_ms: u64) -> JobSpec {
    job_spec()
        .wall_ms(wall_time_ms)
        .cpu_ms(1000)
        .cgroup(no_cgroup("watchdog"))
        .build()
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
        trust: None,
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
