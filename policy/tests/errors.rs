//! Error wording and positions: what the admin sees when a policy is wrong.

use prims_policy::{Issue, Location, Policy, PolicyError};
use proptest::prelude::*;
use std::path::Path;

fn issues(text: &str) -> Vec<Issue> {
    match Policy::from_toml_str(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.issues().to_vec(),
    }
}

fn only_issue(text: &str) -> Issue {
    let mut v = issues(text);
    assert_eq!(v.len(), 1, "expected one issue, got {v:#?}");
    v.remove(0)
}

fn at(line: usize, column: usize) -> Option<Location> {
    Some(Location { line, column })
}

#[test]
fn bad_size_exact_text() {
    let text = "[limits]\nwall_time = \"30s\"\ncpu_time = \"20s\"\nmemory = \"12XB\"\n";
    let err = Policy::from_toml_str(text).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"limits.memory: "12XB" is not a size (try "512MiB") at line 4, column 10"#
    );
}

#[test]
fn unknown_key_lists_what_is_allowed() {
    let text = "[limits]\nwall_time = \"30s\"\nmemroy = \"1GiB\"\n";
    let err = Policy::from_toml_str(text).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "limits.memroy: unknown key (expected one of: wall_time, cpu_time, memory,"
        ),
        "{err}"
    );
    assert!(err.ends_with(") at line 3, column 1"), "{err}");
}

#[test]
fn unknown_section() {
    let i = only_issue("\n[limitz]\n");
    assert_eq!(i.key, "limitz");
    assert!(i
        .message
        .starts_with("unknown key (expected one of: limits, network,"));
    assert_eq!(i.location, at(2, 2));
}

#[test]
fn wrong_types() {
    let i = only_issue("[limits]\npids = \"many\"\n");
    assert_eq!(
        i.to_string(),
        "limits.pids: invalid type: string \"many\", expected a non-negative integer at line 2, column 8"
    );
    let i = only_issue("[landlock]\nrequired = \"yes\"\n");
    assert_eq!(i.key, "landlock.required");
    assert!(i.message.contains("expected a boolean"), "{i}");
    let i = only_issue("limits = 3\n");
    assert_eq!(i.key, "limits");
    assert!(i.message.contains("expected a table"), "{i}");
    let i = only_issue("[filesystem]\nro_binds = \"/usr\"\n");
    assert!(i.message.contains("expected an array"), "{i}");
    let i = only_issue("[identity]\nuid_base = 5000000000\n");
    assert_eq!(i.key, "identity.uid_base");
    assert!(i.message.contains("from 0 to 4294967295"), "{i}");
}

#[test]
fn bare_number_duration_suggests_a_unit() {
    let i = only_issue("[limits]\nwall_time = 30\n");
    assert_eq!(i.key, "limits.wall_time");
    assert!(
        i.message.contains("bare number") && i.message.contains("\"30s\""),
        "{i}"
    );
    assert_eq!(i.location, at(2, 13));
    let i = only_issue("[sessions]\nidle_ttl = 45\n");
    assert!(i.message.contains("e.g. \"45s\""), "{i}");
    let i = only_issue("[sessions]\nidle_ttl = \"45\"\n");
    assert!(i.message.contains("no unit (try \"45s\")"), "{i}");
}

#[test]
fn enum_values_list_choices() {
    let i = only_issue("[network]\nmode = \"wifi\"\n");
    assert_eq!(
        i.to_string(),
        "network.mode: unknown value \"wifi\" (expected one of: none, loopback, allowlist) at line 2, column 8"
    );
    let i = only_issue("[cgroup]\nbackend = \"v3\"\n");
    assert_eq!(
        i.message,
        "unknown value \"v3\" (expected one of: auto, v1, v2, none)"
    );
    let i = only_issue("[seccomp]\nsocket_families = [\"AF_UNIX\", \"AF_PACKET\"]\n");
    assert_eq!(i.key, "seccomp.socket_families[1]");
    assert_eq!(
        i.message,
        "unknown value \"AF_PACKET\" (expected one of: AF_UNIX, AF_INET, AF_INET6)"
    );
    assert_eq!(i.location, at(2, 31));
}

#[test]
fn syntax_errors_have_positions() {
    let i = only_issue("[limits]\nmemory = 12XB\n");
    assert!(i.message.starts_with("invalid TOML:"), "{i}");
    assert_eq!(i.location, at(2, 10));
    let i = only_issue("[limits]\nmemory = \"1GiB\"\nmemory = \"2GiB\"\n");
    assert!(i.message.contains("duplicate key"), "{i}");
    assert_eq!(i.location.map(|l| l.line), Some(3));
}

/// (section, key, value, expected key path, words the message must contain)
const RULES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "limits",
        "wall_time",
        "\"0s\"",
        "limits.wall_time",
        "more than 0s",
    ),
    (
        "limits",
        "wall_time",
        "\"25h\"",
        "limits.wall_time",
        "at most 24h",
    ),
    (
        "limits",
        "cpu_time",
        "\"0ms\"",
        "limits.cpu_time",
        "more than 0s",
    ),
    (
        "limits",
        "cpu_time",
        "\"24h1s\"",
        "limits.cpu_time",
        "at most 24h",
    ),
    (
        "limits",
        "memory",
        "\"15MiB\"",
        "limits.memory",
        "at least 16MiB",
    ),
    ("limits", "pids", "3", "limits.pids", "at least 4"),
    (
        "limits",
        "open_files",
        "15",
        "limits.open_files",
        "between 16 and 1048576",
    ),
    (
        "limits",
        "open_files",
        "1048577",
        "limits.open_files",
        "between 16 and 1048576",
    ),
    (
        "limits",
        "tmp_size",
        "\"1023KiB\"",
        "limits.tmp_size",
        "at least 1MiB",
    ),
    (
        "limits",
        "output_bytes",
        "1023",
        "limits.output_bytes",
        "at least 1KiB",
    ),
    ("limits", "cpus", "0.0", "limits.cpus", "at least 0.001"),
    ("limits", "cpus", "-1.5", "limits.cpus", "at least 0.001"),
    ("limits", "cpus", "inf", "limits.cpus", "number of cores"),
    (
        "limits",
        "max_concurrent_runs",
        "0",
        "limits.max_concurrent_runs",
        "at least 1",
    ),
    (
        "limits",
        "max_concurrent_fresh_runs",
        "0",
        "limits.max_concurrent_fresh_runs",
        "at least 1",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"usr\"]",
        "filesystem.ro_binds[0]",
        "absolute",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/usr/../etc\"]",
        "filesystem.ro_binds[0]",
        "normalized",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/usr/./lib\"]",
        "filesystem.ro_binds[0]",
        "normalized",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/usr/\"]",
        "filesystem.ro_binds[0]",
        "trailing slash",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/usr//lib\"]",
        "filesystem.ro_binds[0]",
        "//",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/\"]",
        "filesystem.ro_binds[0]",
        "whole host",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/proc\"]",
        "filesystem.ro_binds[0]",
        "under /proc",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/sys/fs\"]",
        "filesystem.ro_binds[0]",
        "under /sys",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/dev\"]",
        "filesystem.ro_binds[0]",
        "under /dev",
    ),
    (
        "filesystem",
        "ro_binds",
        "[\"/run/user\"]",
        "filesystem.ro_binds[0]",
        "under /run",
    ),
    (
        "filesystem",
        "default_interpreter",
        "\"2.7\"",
        "filesystem.default_interpreter",
        "not a key of filesystem.interpreters (expected one of: 3.11)",
    ),
    (
        "seccomp",
        "extra_deny",
        "[\"not_a_syscall\"]",
        "seccomp.extra_deny[0]",
        "not an x86_64 syscall name",
    ),
    (
        "identity",
        "uid_base",
        "999\nuid_count = 100",
        "identity.uid_base",
        "at least 1000",
    ),
    (
        "identity",
        "uid_base",
        "0\nuid_count = 100",
        "identity.uid_base",
        "never 0",
    ),
    (
        "identity",
        "uid_count",
        "0",
        "identity.uid_count",
        "at least 1",
    ),
    (
        "identity",
        "uid_base",
        "4294967000",
        "identity.uid_count",
        "at most 4294967294",
    ),
    (
        "identity",
        "uid_base",
        "65000",
        "identity.uid_count",
        "65534",
    ),
    (
        "cgroup",
        "parent",
        "\"\"",
        "cgroup.parent",
        "must not be empty",
    ),
    (
        "cgroup",
        "parent",
        "\"a b\"",
        "cgroup.parent",
        "allowed: letters, digits",
    ),
    ("cgroup", "parent", "\"../escape\"", "cgroup.parent", ".."),
    (
        "python",
        "default_packages",
        "[\"\"]",
        "python.default_packages[0]",
        "must not be empty",
    ),
    (
        "python",
        "default_packages",
        "[\" pandas\"]",
        "python.default_packages[0]",
        "whitespace",
    ),
    (
        "python",
        "default_packages",
        "[\"--index-url=x\"]",
        "python.default_packages[0]",
        "installer option",
    ),
    (
        "python",
        "index_url",
        "\" https://x\"",
        "python.index_url",
        "whitespace",
    ),
    (
        "python",
        "extra_index_urls",
        "[\"\"]",
        "python.extra_index_urls[0]",
        "must not be empty",
    ),
    (
        "python",
        "find_links",
        "[\"a\\nb\"]",
        "python.find_links[0]",
        "control character",
    ),
    (
        "sessions",
        "idle_ttl",
        "\"999ms\"",
        "sessions.idle_ttl",
        "at least 1s",
    ),
    (
        "sessions",
        "max_sessions",
        "0",
        "sessions.max_sessions",
        "at least 1",
    ),
    (
        "tasks",
        "max_ttl",
        "\"169h\"",
        "tasks.max_ttl",
        "at most 168h",
    ),
    (
        "tasks",
        "default_ttl",
        "\"500ms\"",
        "tasks.default_ttl",
        "at least 1s",
    ),
    (
        "tasks",
        "default_ttl",
        "\"25h\"",
        "tasks.default_ttl",
        "longer than max_ttl (24h)",
    ),
    ("tasks", "max_tasks", "0", "tasks.max_tasks", "at least 1"),
    (
        "tasks",
        "max_tasks",
        "100001",
        "tasks.max_tasks",
        "at most 100000",
    ),
    (
        "tasks",
        "max_tasks_per_tenant",
        "0",
        "tasks.max_tasks_per_tenant",
        "would refuse every task",
    ),
    (
        "tasks",
        "max_tasks_per_tenant",
        "1025",
        "tasks.max_tasks_per_tenant",
        "more than max_tasks (1024)",
    ),
    (
        "tasks",
        "max_result_bytes",
        "\"5GiB\"",
        "tasks.max_result_bytes",
        "at most 4GiB",
    ),
    (
        "tasks",
        "max_result_bytes_per_tenant",
        "\"1KiB\"",
        "tasks.max_result_bytes_per_tenant",
        "at least 64KiB",
    ),
    (
        "tasks",
        "max_result_bytes_per_tenant",
        "\"65MiB\"",
        "tasks.max_result_bytes_per_tenant",
        "more than max_result_bytes (64MiB)",
    ),
    (
        "branches",
        "max_checkpoint_inodes",
        "10",
        "branches.max_checkpoint_inodes",
        "at least 64",
    ),
    (
        "branches",
        "max_checkpoint_inodes_per_tenant",
        "1000",
        "branches.max_checkpoint_inodes",
        "more than max_checkpoint_inodes_per_tenant (1000)",
    ),
    (
        "branches",
        "max_checkpoint_bytes_total",
        "\"4GiB\"",
        "branches.max_checkpoint_bytes_per_tenant",
        "more than max_checkpoint_bytes_total (4GiB)",
    ),
    (
        "branches",
        "max_checkpoint_inodes_total",
        "1000",
        "branches.max_checkpoint_inodes_per_tenant",
        "more than max_checkpoint_inodes_total (1000)",
    ),
];

#[test]
fn every_rule_names_key_and_position() {
    for (section, key, value, path, words) in RULES {
        let text = format!("# policy\n[{section}]\n{key} = {value}\n");
        let i = only_issue(&text);
        assert_eq!(i.key, *path, "{text}");
        assert!(i.message.contains(words), "{text}\n=> {i}");
        let loc = i.location.unwrap_or_else(|| panic!("no location for {i}"));
        assert_eq!(loc.line, 3, "{i}");
        assert!(loc.column > key.len(), "{i}");
    }
}

#[test]
fn valid_edges_pass() {
    for text in [
        "[limits]\nwall_time = \"24h\"\ncpu_time = \"1ns\"\nmemory = \"16MiB\"\npids = 4\n",
        "[limits]\nopen_files = 16\ntmp_size = \"1MiB\"\noutput_bytes = \"1KiB\"\ncpus = 0.001\n",
        "[limits]\nopen_files = 1048576\nmax_concurrent_runs = 1\ncpus = 2\n",
        "[identity]\nuid_base = 1000\nuid_count = 64534\n",
        "[identity]\nuid_base = 65535\nuid_count = 4294901759\n",
        "[cgroup]\nparent = \"/system.slice/prims-jobs_1\"\n",
        "[seccomp]\nextra_deny = [\"ptrace\", \"clone3\", \"io_uring_setup\"]\nsocket_families = [\"AF_INET6\", \"AF_INET\"]\n",
        "[sessions]\nidle_ttl = \"1s\"\nmax_sessions = 1\n",
        "[python]\ndefault_packages = []\nindex_url = \"https://pypi.example/simple\"\n",
        "[tasks]\ndefault_ttl = \"1s\"\nmax_ttl = \"1s\"\nmax_tasks = 1\nmax_tasks_per_tenant = 1\n",
        "[tasks]\nmax_ttl = \"168h\"\nmax_tasks = 100000\nmax_tasks_per_tenant = 100000\n",
        "[tasks]\nmax_result_bytes = \"64KiB\"\nmax_result_bytes_per_tenant = \"64KiB\"\n",
        "[tasks]\nmax_result_bytes = \"4GiB\"\nmax_result_bytes_per_tenant = \"4GiB\"\n",
        "[branches]\nmax_checkpoint_inodes = 64\nmax_checkpoint_inodes_per_tenant = 64\n\
         max_checkpoint_inodes_total = 64\n",
        "[branches]\nmax_checkpoints = 0\nmax_checkpoint_inodes = 0\n",
    ] {
        if let Err(e) = Policy::from_toml_str(text) {
            panic!("{text}\n=> {e}");
        }
    }
}

#[test]
fn interpreter_paths_are_checked() {
    let i = only_issue("[filesystem]\ninterpreters = { \"3.11\" = \"python3\" }\n");
    assert_eq!(i.key, "filesystem.interpreters.\"3.11\"");
    assert!(i.message.contains("absolute"), "{i}");
    assert_eq!(i.location, at(2, 27));
}

#[test]
fn default_interpreter_points_at_interpreters_when_it_is_not_written() {
    let i = only_issue("[filesystem]\ninterpreters = { \"3.12\" = \"/usr/bin/python3.12\" }\n");
    assert_eq!(i.key, "filesystem.default_interpreter");
    assert!(i.message.contains("expected one of: 3.12"), "{i}");
    assert_eq!(i.location, at(2, 16));
}

#[test]
fn reports_every_semantic_error() {
    let text = "\
[limits]
memory = \"1MiB\"
pids = 1

[filesystem]
ro_binds = [\"/usr\", \"/proc/x\", \"rel\"]

[sessions]
max_sessions = 0
";
    let err = Policy::from_toml_str(text).unwrap_err();
    let lines: Vec<String> = err.to_string().lines().map(String::from).collect();
    assert_eq!(
        lines,
        [
            "limits.memory: 1MiB is too small (at least 16MiB) at line 2, column 10",
            "limits.pids: 1 is too small (at least 4) at line 3, column 8",
            "filesystem.ro_binds[1]: \"/proc/x\" is under /proc, which the jail provides itself (not allowed: /proc, /sys, /dev, /run) at line 6, column 21",
            "filesystem.ro_binds[2]: \"rel\" is not an absolute path (it must start with /) at line 6, column 32",
            "sessions.max_sessions: 0 would refuse every session (at least 1) at line 9, column 16",
        ]
    );
}

#[test]
fn validate_without_a_file_has_no_positions() {
    let mut p = Policy::default();
    p.limits.pids = 0;
    p.identity.uid_count = 0;
    let err = p.validate().unwrap_err();
    assert_eq!(err.issues().len(), 2);
    assert!(err.issues().iter().all(|i| i.location.is_none()));
    assert!(Policy::default().validate().is_ok());
}

#[test]
fn load_names_the_file() {
    let missing = Path::new("/nonexistent/prims/policy.toml");
    let err = Policy::load(missing).unwrap_err();
    assert!(matches!(err, PolicyError::Read { .. }));
    assert_eq!(
        err.to_string(),
        "/nonexistent/prims/policy.toml: policy file not found"
    );

    let dir = std::env::temp_dir().join(format!("prims-policy-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("policy.toml");
    std::fs::write(&file, "[limits]\npids = 1\ncpus = 0.0\n").unwrap();
    let err = Policy::load(&file).unwrap_err().to_string();
    let shown = file.display().to_string();
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            format!("{shown}: limits.pids: 1 is too small (at least 4) at line 2, column 8"),
            format!("{shown}: limits.cpus: 0 is not a usable CPU share (must be a number of cores of at least 0.001, e.g. 1.0 or 0.5) at line 3, column 8"),
        ]
    );
    std::fs::write(&file, "[limits]\npids = 8\n").unwrap();
    assert_eq!(Policy::load(&file).unwrap().limits.pids, 8);

    // A directory is unreadable as a file: still a clear error naming it.
    let err = Policy::load(&dir).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: ", dir.display())), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Pieces of plausible and implausible policy text, glued at random.
const FRAGMENTS: &[&str] = &[
    "[limits]",
    "[network]",
    "[filesystem]",
    "[seccomp]",
    "[identity]",
    "[python]",
    "[sessions]",
    "[cgroup]",
    "[landlock]",
    "[[limits]]",
    "[limits.x]",
    "wall_time = ",
    "memory = ",
    "pids = ",
    "cpus = ",
    "ro_binds = ",
    "interpreters = ",
    "mode = ",
    "uid_base = ",
    "uid_count = ",
    "extra_deny = ",
    "parent = ",
    "idle_ttl = ",
    "\"30s\"",
    "\"512MiB\"",
    "\"12XB\"",
    "30",
    "-1",
    "1e308",
    "nan",
    "-inf",
    "9223372036854775807",
    "\"1h30m\"",
    "\"99999999999999999999h\"",
    "[\"/usr\", \"/proc\"]",
    "{ \"3.11\" = \"/x\" }",
    "{ a = { b = 1 } }",
    "true",
    "\"\"",
    "\"loopback\"",
    "\"é\"",
    "'",
    "\"",
    "=",
    "\n",
    "\n",
    " ",
    ".",
    "#",
    "\u{0}",
    "\r\n",
    "[",
    "]",
    "{",
    "}",
    ",",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn junk_text_never_panics(s in "\\PC{0,200}") {
        let _ = Policy::from_toml_str(&s).map_err(|e| e.to_string());
    }

    #[test]
    fn junk_toml_never_panics(parts in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40)) {
        let text = parts.concat();
        match Policy::from_toml_str(&text) {
            Ok(p) => { let _ = p.to_toml_string(); let _ = p.warnings(); }
            Err(e) => { prop_assert!(!e.issues().is_empty()); let _ = e.to_string(); }
        }
    }
}

#[test]
fn network_entries_are_checked_with_their_position() {
    let text = "[network]\nallow = [\"pypi.org\", \"*.com\", \"10.0.0.1/8\"]\nports = [443, 0]\n\
                [network.tenants]\nacme = [\"pypi.org:443\", \"evil.example\"]\n";
    let got: Vec<String> = issues(text).iter().map(Issue::to_string).collect();
    assert_eq!(
        got,
        [
            "network.allow[1]: \"*.com\" would match every name in a top-level domain; name at least two labels after *. at line 2, column 22",
            "network.allow[2]: \"10.0.0.1/8\" has host bits set (write \"10.0.0.0/8\") at line 2, column 31",
            "network.ports[1]: 0 is not a port (1 to 65535) at line 3, column 15",
            "network.tenants.acme[1]: evil.example is not within network.allow (on its ports), so it would allow nothing at line 5, column 25",
        ]
    );
}

/// In a run's jail localhost, 127.0.0.1 and ::1 are the jail's own loopback
/// (`NO_PROXY` names them), so an entry naming this host's could never be
/// reached: it is an error, where it was written.
#[test]
fn network_entries_naming_this_host_are_errors_with_their_position() {
    let text = "[network]\nmode = \"allowlist\"\n\
                allow = [\"pypi.org\", \"127.0.0.1:8080\", \"10.0.0.0/8\",\n\
                \x20        \"[::1]:8443\", \"127.0.0.0/8\", \"localhost\", \"0.0.0.0/0\"]\n\
                [network.tenants]\nacme = [\"pypi.org\", \"api.localhost:8080\"]\n";
    let why = "which no run can reach: in a run's jail localhost, 127.0.0.1 and ::1 are the jail's own loopback, reached without the proxy";
    let serve = "to let runs reach a service of this host, serve it on another of the host's addresses (a private one) and allow that address";
    let got: Vec<String> = issues(text).iter().map(Issue::to_string).collect();
    assert_eq!(
        got,
        [
            format!("network.allow[1]: \"127.0.0.1:8080\" names this host (127.0.0.0/8, its loopback), {why}; {serve} at line 3, column 22"),
            format!("network.allow[3]: \"[::1]:8443\" names this host (::1, its loopback), {why}; {serve} at line 4, column 10"),
            format!("network.allow[4]: \"127.0.0.0/8\" names this host (127.0.0.0/8, its loopback), {why}; {serve} at line 4, column 24"),
            format!("network.allow[5]: \"localhost\" names this host (the localhost names, its loopback), {why}; {serve} at line 4, column 39"),
            format!("network.allow[6]: \"0.0.0.0/0\" includes this host (127.0.0.0/8, its loopback), {why}; allow ranges that leave it out at line 4, column 52"),
            format!("network.tenants.acme[1]: \"api.localhost:8080\" names this host (the localhost names, its loopback), {why}; {serve} at line 6, column 21"),
        ]
    );
    // Addresses and names of other hosts stay allowed, private ones too.
    let fine = "[network]\nmode = \"allowlist\"\nallow = [\"10.0.0.0/8\", \"128.0.0.0/1\", \"::ffff:10.0.0.1\", \"fd00::/8\", \"localhost.example.com\", \"2001:db8::/32\"]\n";
    if let Err(e) = Policy::from_toml_str(fine) {
        panic!("{e}");
    }
    for entry in [
        "::",
        "0.0.0.0",
        "0.0.0.0/8",
        "::/0",
        "::ffff:127.0.0.1",
        "::ffff:0:0/96",
        "126.0.0.0/7",
        "*.a.localhost",
    ] {
        let i = only_issue(&format!("[network]\nallow = [\"{entry}\"]\n"));
        assert!(i.message.contains("this host ("), "{entry}: {i}");
        assert_eq!(i.location, at(2, 10), "{entry}");
    }
}

#[test]
fn network_budgets_have_ranges() {
    let got: Vec<String> = issues("[network]\nmax_bytes = \"10B\"\nmax_connections = 0\n")
        .iter()
        .map(Issue::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "network.max_bytes: 10B is too small (at least 1KiB) at line 2, column 13",
            "network.max_connections: 0 is out of range (1 to 4096) at line 3, column 19",
        ]
    );
}

#[test]
fn a_tenants_task_budget_above_the_servers_is_located_at_either_key() {
    // Only the server's ceiling is written: the finding points at it.
    let i = only_issue("[tasks]\nmax_tasks = 10\n");
    assert_eq!(i.key, "tasks.max_tasks_per_tenant");
    assert!(i.message.contains("256 is more than max_tasks (10)"), "{i}");
    assert_eq!(i.location, at(2, 13));
}

#[test]
fn a_result_budget_that_cannot_hold_one_full_run_is_a_warning() {
    let p = Policy::from_toml_str(
        "[limits]\noutput_bytes = \"16MiB\"\n[tasks]\nmax_result_bytes_per_tenant = \"16MiB\"\n",
    )
    .unwrap();
    let w = p.warnings();
    assert!(
        w.iter().any(
            |m| m.starts_with("tasks.max_result_bytes_per_tenant: 16MiB cannot hold")
                && m.contains("32MiB")
        ),
        "{w:?}"
    );
    assert!(!Policy::default()
        .warnings()
        .iter()
        .any(|m| m.starts_with("tasks.")));
}

#[test]
fn egress_errors_name_the_key_path() {
    let text = "[egress]\nallow = [\"127.0.0.1/32\", \"10.0.0.1/8\"]\nmax_upload = \"0B\"\ntimeout = \"0s\"\n";
    let err = Policy::from_toml_str(text).unwrap_err().to_string();
    assert!(err.contains("egress.allow[1]"), "{err}");
    assert!(err.contains("egress.max_upload"), "{err}");
    assert!(err.contains("egress.timeout"), "{err}");
    assert!(!err.contains("egress.allow[0]"), "{err}");
}

#[test]
fn unknown_egress_keys_are_errors() {
    let err = Policy::from_toml_str("[egress]\nallowed = []\n").unwrap_err();
    assert!(err.to_string().contains("allowed"), "{err}");
}

#[test]
fn warm_up_code_has_a_size_cap() {
    let code = "x".repeat(16 * 1024 + 1);
    let got = only_issue(&format!("[python]\nwarm_up_code = \"{code}\"\n")).to_string();
    assert_eq!(
        got,
        "python.warm_up_code: 16385 bytes; at most 16384 at line 2, column 16"
    );
    let fits = format!("[python]\nwarm_up_code = \"{}\"\n", "x".repeat(16 * 1024));
    assert!(Policy::from_toml_str(&fits).is_ok());
}
