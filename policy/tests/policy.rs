//! Defaults, round trips, derived values and limit merging.

use prims_policy::{
    ByteSize, HumanDuration, NetworkPolicy, Policy, SocketFamily, FLOOR_CPU_TIME_MS,
    FLOOR_MEMORY_BYTES, FLOOR_OUTPUT_BYTES, FLOOR_PIDS, FLOOR_WALL_TIME_MS,
};
use prims_protocol::jail::{CgroupBackend, JobLimits, LimitRequest};
use proptest::prelude::*;
use std::path::PathBuf;
use std::time::Duration;

#[test]
fn empty_file_is_the_default_policy() {
    assert_eq!(Policy::from_toml_str("").unwrap(), Policy::default());
    assert_eq!(
        Policy::from_toml_str("# nothing\n\n").unwrap(),
        Policy::default()
    );
    assert_eq!(
        Policy::from_toml_str("[limits]\n[python]\n").unwrap(),
        Policy::default()
    );
}

#[test]
fn defaults_match_the_documented_values() {
    let p = Policy::default();
    assert!(p.validate().is_ok());
    assert_eq!(p.limits.wall_time, HumanDuration::secs(30));
    assert_eq!(p.limits.cpu_time, HumanDuration::secs(20));
    assert_eq!(p.limits.memory.0, 512 << 20);
    assert_eq!(p.limits.swap.0, 0);
    assert_eq!((p.limits.pids, p.limits.open_files), (64, 256));
    assert_eq!(p.limits.file_size, ByteSize::mib(64));
    assert_eq!(p.limits.output_bytes, ByteSize::mib(1));
    assert_eq!(p.limits.tmp_size, ByteSize::mib(64));
    assert_eq!(p.limits.max_concurrent_runs, None);
    assert_eq!(p.limits.cpus, 1.0);
    assert_eq!(p.network.mode, NetworkPolicy::None);
    assert_eq!(
        p.filesystem.ro_binds,
        ["/usr", "/lib", "/lib64", "/bin"].map(PathBuf::from)
    );
    assert_eq!(
        p.filesystem.interpreters.get("3.11"),
        Some(&PathBuf::from("/usr/bin/python3.11"))
    );
    assert_eq!(p.filesystem.default_interpreter, "3.11");
    assert!(p.seccomp.extra_deny.is_empty());
    assert_eq!(p.seccomp.socket_families, [SocketFamily::Unix]);
    assert!(p.landlock.required);
    assert_eq!(p.cgroup.backend, CgroupBackend::Auto);
    assert_eq!(p.cgroup.parent, "prims");
    assert_eq!(
        (p.identity.uid_base, p.identity.uid_count),
        (200_000, 65_536)
    );
    assert_eq!(
        p.python.default_packages,
        ["pandas", "openpyxl", "requests"]
    );
    assert!(p.python.index_url.is_empty() && p.python.only_binary);
    assert!(p.python.extra_index_urls.is_empty() && p.python.find_links.is_empty());
    assert_eq!(p.python.env_cache_bytes, ByteSize::gib(10));
    assert_eq!(p.sessions.idle_ttl, HumanDuration::secs(3600));
    assert_eq!(p.sessions.disk_quota, ByteSize::gib(1));
    assert_eq!(p.sessions.max_sessions, 256);
}

#[test]
fn parses_a_full_policy() {
    let text = r#"
[limits]
wall_time = "1m30s"
memory = "2 GiB"
swap = 1048576
cpus = 0.5
max_concurrent_runs = 3
[network]
mode = "loopback"
[cgroup]
backend = "v1"
[seccomp]
extra_deny = ["ptrace"]
"#;
    let p = Policy::from_toml_str(text).unwrap();
    assert_eq!(p.limits.wall_time.0, Duration::from_secs(90));
    assert_eq!(p.limits.memory, ByteSize::gib(2));
    assert_eq!(p.limits.swap, ByteSize::mib(1));
    assert_eq!(p.max_concurrent_runs(), 3);
    assert_eq!(p.network.mode, NetworkPolicy::Loopback);
    assert_eq!(p.cgroup.backend, CgroupBackend::V1);
    let l = p.job_limits(&LimitRequest::default());
    assert_eq!(l.cpu_millis, 500);
    assert_eq!(l.wall_time_ms, 90_000);
}

#[test]
fn round_trips_through_text() {
    let text = r#"
[limits]
wall_time = "1h30m"
cpu_time = "1s500ms"
memory = "100MB"
cpus = 2.25
[network]
mode = "loopback"
[filesystem]
ro_binds = ["/usr", "/opt/x y"]
interpreters = { "3.11" = "/usr/bin/python3.11", "pypy" = "/opt/pypy/bin/pypy3" }
default_interpreter = "pypy"
[seccomp]
extra_deny = ["ptrace", "bpf"]
socket_families = ["AF_UNIX", "AF_INET6"]
[landlock]
required = false
[cgroup]
backend = "none"
parent = "/x/y"
[python]
index_url = "https://example.org/simple"
find_links = ["/wheels"]
only_binary = false
"#;
    let p = Policy::from_toml_str(text).unwrap();
    let out = p.to_toml_string();
    assert!(out.contains("wall_time = \"1h30m\""), "{out}");
    assert!(out.contains("cpu_time = \"1s500ms\""), "{out}");
    assert!(out.contains("memory = \"100MB\""), "{out}");
    let mut expected = p.clone();
    expected.limits.max_concurrent_runs = Some(p.max_concurrent_runs());
    expected.limits.max_concurrent_fresh_runs = Some(p.max_concurrent_fresh_runs());
    assert_eq!(Policy::from_toml_str(&out).unwrap(), expected);

    let d = Policy::default();
    let out = d.to_toml_string();
    assert!(out.contains("memory = \"512MiB\""), "{out}");
    let back = Policy::from_toml_str(&out).unwrap();
    assert_eq!(back.to_toml_string(), out);
    assert_eq!(back.max_concurrent_runs(), d.max_concurrent_runs());
    let mut d2 = back.clone();
    d2.limits.max_concurrent_runs = None;
    d2.limits.max_concurrent_fresh_runs = None;
    assert_eq!(d2, d);
}

#[test]
fn max_concurrent_runs_defaults_to_cores() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(Policy::default().max_concurrent_runs(), cores);
    let mut p = Policy::default();
    p.limits.max_concurrent_runs = Some(7);
    assert_eq!(p.max_concurrent_runs(), 7);
    assert_eq!(p.max_concurrent_fresh_runs(), 14);
    p.limits.max_concurrent_fresh_runs = Some(3);
    assert_eq!(p.max_concurrent_fresh_runs(), 3);
}

#[test]
fn socket_families_sorted_and_every_mode_adds_ip() {
    let mut p = Policy::default();
    let all = [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];
    assert_eq!(p.socket_family_numbers(), all);
    p.seccomp.socket_families = vec![SocketFamily::Inet6, SocketFamily::Unix, SocketFamily::Inet6];
    assert_eq!(p.socket_family_numbers(), all);
    for mode in [NetworkPolicy::Loopback, NetworkPolicy::Allowlist] {
        p.network.mode = mode;
        assert_eq!(p.socket_family_numbers(), all);
    }
    p.seccomp.socket_families.clear();
    assert_eq!(p.socket_family_numbers(), [libc::AF_INET, libc::AF_INET6]);
}

#[test]
fn every_mode_has_the_jails_own_loopback() {
    use prims_protocol::jail::NetworkMode;
    for (mode, jail) in [
        (NetworkPolicy::None, NetworkMode::Loopback),
        (NetworkPolicy::Loopback, NetworkMode::Loopback),
        (NetworkPolicy::Allowlist, NetworkMode::Proxy),
    ] {
        assert_eq!(NetworkMode::from(mode), jail, "{mode:?}");
    }
}

#[test]
fn warnings_name_missing_host_paths() {
    let mut p = Policy::default();
    p.filesystem.ro_binds = vec![PathBuf::from("/"), PathBuf::from("/nonexistent-prims-dir")];
    p.filesystem
        .interpreters
        .insert("x".into(), PathBuf::from("/nonexistent-prims-python"));
    p.filesystem
        .interpreters
        .insert("dir".into(), PathBuf::from("/"));
    let w = p.warnings();
    assert!(
        w.contains(
            &"filesystem.ro_binds[1]: /nonexistent-prims-dir does not exist on this host"
                .to_string()
        ),
        "{w:?}"
    );
    assert!(
        w.contains(
            &"filesystem.interpreters.x: /nonexistent-prims-python does not exist on this host"
                .to_string()
        ),
        "{w:?}"
    );
    assert!(
        w.contains(&"filesystem.interpreters.dir: / is not a regular file".to_string()),
        "{w:?}"
    );
    assert!(
        !w.iter().any(|m| m.starts_with("filesystem.ro_binds[0]")),
        "{w:?}"
    );
}

#[test]
fn job_limits_without_request_are_the_policy() {
    let p = Policy::default();
    assert_eq!(
        p.job_limits(&LimitRequest::default()),
        JobLimits {
            wall_time_ms: 30_000,
            cpu_time_ms: 20_000,
            memory_bytes: 512 << 20,
            swap_bytes: 0,
            pids: 64,
            open_files: 256,
            file_size_bytes: 64 << 20,
            output_bytes: 1 << 20,
            tmp_size_bytes: 64 << 20,
            cpu_millis: 1000,
        }
    );
}

#[test]
fn requests_lower_but_zero_is_floored() {
    let p = Policy::default();
    let low = p.job_limits(&LimitRequest {
        wall_time_ms: Some(5_000),
        cpu_time_ms: Some(1),
        memory_bytes: Some(64 << 20),
        pids: Some(10),
        output_bytes: Some(4096),
    });
    assert_eq!(low.wall_time_ms, 5_000);
    assert_eq!(low.cpu_time_ms, FLOOR_CPU_TIME_MS);
    assert_eq!(low.memory_bytes, 64 << 20);
    assert_eq!(low.pids, 10);
    assert_eq!(low.output_bytes, 4096);
    let zero = p.job_limits(&LimitRequest {
        wall_time_ms: Some(0),
        cpu_time_ms: Some(0),
        memory_bytes: Some(0),
        pids: Some(0),
        output_bytes: Some(0),
    });
    assert_eq!(zero.wall_time_ms, FLOOR_WALL_TIME_MS);
    assert_eq!(zero.memory_bytes, FLOOR_MEMORY_BYTES);
    assert_eq!(zero.pids, FLOOR_PIDS);
    assert_eq!(zero.output_bytes, FLOOR_OUTPUT_BYTES);
    let high = p.job_limits(&LimitRequest {
        wall_time_ms: Some(u64::MAX),
        cpu_time_ms: Some(u64::MAX),
        memory_bytes: Some(u64::MAX),
        pids: Some(u64::MAX),
        output_bytes: Some(u64::MAX),
    });
    assert_eq!(high, p.job_limits(&LimitRequest::default()));
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    (
        (1u64..=86_400_000, 1u64..=86_400_000),
        (16u64 << 20..=1u64 << 40, any::<u64>()),
        (4u64..=100_000, 16u64..=1_048_576),
        (any::<u64>(), 1024u64..=1 << 32, 1u64 << 20..=1 << 40),
        1u64..=64_000,
    )
        .prop_map(
            |((wall, cpu), (mem, swap), (pids, files), (fsize, out, tmp), millis)| {
                let mut p = Policy::default();
                p.limits.wall_time = HumanDuration::millis(wall);
                p.limits.cpu_time = HumanDuration::millis(cpu);
                p.limits.memory = ByteSize(mem);
                p.limits.swap = ByteSize(swap);
                p.limits.pids = pids;
                p.limits.open_files = files;
                p.limits.file_size = ByteSize(fsize);
                p.limits.output_bytes = ByteSize(out);
                p.limits.tmp_size = ByteSize(tmp);
                p.limits.cpus = millis as f64 / 1000.0;
                p
            },
        )
}

fn arb_request() -> impl Strategy<Value = LimitRequest> {
    let field = || {
        prop_oneof![
            Just(None),
            Just(Some(0)),
            any::<u64>().prop_map(Some),
            (0u64..1 << 34).prop_map(Some),
        ]
    };
    (field(), field(), field(), field(), field()).prop_map(|(w, c, m, p, o)| LimitRequest {
        wall_time_ms: w,
        cpu_time_ms: c,
        memory_bytes: m,
        pids: p,
        output_bytes: o,
    })
}

/// `request` lowered the field to exactly itself, or it was floored, or absent.
fn merged(policy: u64, request: Option<u64>, floor: u64, got: u64) -> bool {
    match request {
        None => got == policy,
        Some(r) if r >= policy => got == policy,
        Some(r) if r >= floor => got == r,
        Some(_) => got == floor.min(policy),
    }
}

proptest! {
    #[test]
    fn a_request_never_raises_a_limit(p in arb_policy(), req in arb_request()) {
        prop_assert!(p.validate().is_ok(), "{:?}", p.validate());
        let base = p.job_limits(&LimitRequest::default());
        let got = p.job_limits(&req);
        prop_assert!(got.wall_time_ms <= base.wall_time_ms && got.wall_time_ms > 0);
        prop_assert!(got.cpu_time_ms <= base.cpu_time_ms && got.cpu_time_ms > 0);
        prop_assert!(got.memory_bytes <= base.memory_bytes && got.memory_bytes >= FLOOR_MEMORY_BYTES);
        prop_assert!(got.pids <= base.pids && got.pids >= FLOOR_PIDS);
        prop_assert!(got.output_bytes <= base.output_bytes && got.output_bytes > 0);
        prop_assert!(merged(base.wall_time_ms, req.wall_time_ms, FLOOR_WALL_TIME_MS, got.wall_time_ms));
        prop_assert!(merged(base.cpu_time_ms, req.cpu_time_ms, FLOOR_CPU_TIME_MS, got.cpu_time_ms));
        prop_assert!(merged(base.memory_bytes, req.memory_bytes, FLOOR_MEMORY_BYTES, got.memory_bytes));
        prop_assert!(merged(base.pids, req.pids, FLOOR_PIDS, got.pids));
        prop_assert!(merged(base.output_bytes, req.output_bytes, FLOOR_OUTPUT_BYTES, got.output_bytes));
        // Fields a request cannot touch stay at the policy value.
        prop_assert_eq!(
            (got.swap_bytes, got.open_files, got.file_size_bytes, got.tmp_size_bytes, got.cpu_millis),
            (base.swap_bytes, base.open_files, base.file_size_bytes, base.tmp_size_bytes, base.cpu_millis)
        );
        prop_assert_eq!(base.cpu_millis, (p.limits.cpus * 1000.0).round() as u64);
    }

    #[test]
    fn random_policies_round_trip(p in arb_policy()) {
        let text = p.to_toml_string();
        let back = Policy::from_toml_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back.to_toml_string(), text);
        let mut expected = p.clone();
        expected.limits.max_concurrent_runs = Some(p.max_concurrent_runs());
        expected.limits.max_concurrent_fresh_runs = Some(p.max_concurrent_fresh_runs());
        prop_assert_eq!(back, expected);
    }
}
