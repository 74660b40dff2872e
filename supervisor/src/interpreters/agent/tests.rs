//! The agent's package and agent.rs (and `prims_protocol::fork`) spell the
//! same limits and formats; the package is whole and imports what it uses.

use super::*;

/// The text of the agent's file `path`.
fn file(path: &str) -> &'static str {
    AGENT_FILES
        .iter()
        .find(|(p, _)| *p == path)
        .unwrap_or_else(|| panic!("{path} is not among the agent's files"))
        .1
}

/// The value `path` assigns to `name` at the top level.
fn python_constant(path: &str, name: &str) -> String {
    let prefix = format!("{name} = ");
    file(path)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{name} is not in {path}"))
        .to_string()
}

fn python_int(path: &str, name: &str) -> usize {
    python_constant(path, name)
        .split('*')
        .map(|f| f.trim().parse::<usize>().unwrap())
        .product()
}

const AGENT: &str = "prims_agent/agent.py";
const CHANNEL: &str = "prims_agent/channel.py";
const TEXT: &str = "prims_agent/text.py";
const SHELL: &str = "prims_agent/shell.py";
const MAIN: &str = "prims_agent/main.py";
const TEMPLATE: &str = "prims_agent/fork/template.py";
const PARENT: &str = "prims_agent/fork/parent.py";

#[test]
fn the_agent_and_the_supervisor_agree_on_limits_and_formats() {
    assert_eq!(python_int(CHANNEL, "CHANNEL_FD"), CHANNEL_FD as usize);
    assert_eq!(
        python_int(CHANNEL, "CHANNEL_LOST_EXIT"),
        CHANNEL_LOST_EXIT as usize
    );
    assert_eq!(python_int(CHANNEL, "FRAME_IN_MAX"), SUPERVISOR_FRAME_MAX);
    assert_eq!(python_int(CHANNEL, "FRAME_OUT_MAX"), AGENT_FRAME_MAX);
    assert_eq!(python_int(TEXT, "RESULT_MAX_CHARS"), RESULT_MAX_CHARS);
    assert_eq!(python_int(TEXT, "LIST_MAX"), LIST_MAX);
    assert_eq!(python_int(TEXT, "NAME_MAX_CHARS"), NAME_MAX_CHARS);
    assert_eq!(python_int(TEXT, "MESSAGE_MAX_CHARS"), MESSAGE_MAX_CHARS);
    assert_eq!(python_int(AGENT, "MARKER_HEX_LEN"), MARKER_HEX_LEN);
    assert_eq!(
        python_constant(AGENT, "MARKER_PREFIX"),
        r#"b"\x00prims-cell-end-""#
    );
    assert_eq!(MARKER_PREFIX, b"\x00prims-cell-end-");
    assert_eq!(python_constant(AGENT, "MARKER_SUFFIX"), r#"b"\x00""#);
    assert_eq!(MARKER_SUFFIX, b"\x00");
    assert_eq!(
        python_constant(AGENT, "PREWARM_ENV"),
        format!("{PREWARM_ENV:?}")
    );
    assert_eq!(python_constant(AGENT, "SITE_ENV"), format!("{SITE_ENV:?}"));
    assert_eq!(
        python_constant(MAIN, "ALLOCATOR_ENV"),
        format!("{ALLOCATOR_ENV:?}")
    );
    // The IPython half.
    assert_eq!(
        python_constant(SHELL, "IPYTHON_ENV"),
        format!("{IPYTHON_ENV:?}")
    );
    assert_eq!(
        python_constant(SHELL, "FIGURES_REL"),
        format!("{FIGURES_REL:?}")
    );
    assert_eq!(python_int(SHELL, "OUTPUTS_MAX"), OUTPUTS_MAX);
    assert_eq!(python_int(SHELL, "OUTPUTS_BYTES_MAX"), OUTPUTS_BYTES_MAX);
    let mimes: Vec<String> = file(SHELL)
        .lines()
        .skip_while(|l| *l != "MIME_KEPT = (")
        .skip(1)
        .take_while(|l| *l != ")")
        .map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_string())
        .collect();
    assert_eq!(mimes, MIME_KEPT);
    assert_eq!(
        python_constant("prims_agent/charts.py", "MIME"),
        format!("{CHART_MIME:?}")
    );
}

#[test]
fn the_fork_half_agrees_with_the_supervisor_and_the_jailer() {
    use prims_protocol::fork::{MESSAGE_MAX, TO_CHILD_FDS_MAX};
    assert_eq!(
        python_constant(TEMPLATE, "TEMPLATE_ENV"),
        format!("{TEMPLATE_ENV:?}")
    );
    let blas: Vec<String> = BLAS_THREADS.iter().map(|v| format!("{v:?}")).collect();
    assert_eq!(
        python_constant(PARENT, "BLAS_THREADS"),
        format!("({})", blas.join(", "))
    );
    assert_eq!(python_int(PARENT, "MESSAGE_MAX"), MESSAGE_MAX);
    assert_eq!(python_int(PARENT, "TO_CHILD_FDS_MAX"), TO_CHILD_FDS_MAX);
    // A template's `fork` frames, which the supervisor writes.
    assert_eq!(python_int(TEMPLATE, "FORK_FRAME_MAX"), FORK_FRAME_MAX);
    let fork = super::super::channel::ToAgent::Fork { id: u64::MAX };
    assert!(serde_json::to_vec(&fork).unwrap().len() <= FORK_FRAME_MAX);
}

#[test]
fn every_file_of_the_package_is_shipped() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("agent");
    let mut on_disk = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name() != Some("__pycache__".as_ref()) {
                stack.push(p);
            } else if p.extension() == Some("py".as_ref()) {
                let rel = p.strip_prefix(&dir).unwrap().to_string_lossy().to_string();
                on_disk.push(rel);
            }
        }
    }
    on_disk.sort();
    let mut shipped: Vec<String> = AGENT_FILES.iter().map(|(p, _)| p.to_string()).collect();
    shipped.sort();
    assert_eq!(on_disk, shipped);
}

#[test]
fn the_directory_is_written_once_read_only_and_named_after_its_files() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().unwrap();
    let stale = parent.path().join("agent-0000000000000000");
    std::fs::create_dir(&stale).unwrap();
    let a = AgentDir::install(parent.path()).unwrap();
    let b = AgentDir::install(parent.path()).unwrap();
    assert_eq!(a.dir, b.dir);
    assert!(!stale.exists(), "another version's directory is removed");
    for (path, text) in AGENT_FILES {
        let f = a.dir.join(path);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), text);
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o644);
    }
    let mode = a.dir.metadata().unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    let mut spec: JobSpec = serde_json::from_value(serde_json::json!({
        "interpreter": "/usr/bin/python3", "venv": "/v", "workspace": "/w", "code": "x",
        "limits": {"wall_time_ms": 1, "cpu_time_ms": 1, "memory_bytes": 1, "swap_bytes": 0,
            "pids": 1, "open_files": 1, "file_size_bytes": 1, "output_bytes": 1,
            "tmp_size_bytes": 1, "cpu_millis": 1},
        "ro_binds": [], "socket_families": [], "landlock_required": false,
        "cgroup": {"backend": "none", "job": "j"}, "host_uid": 1, "host_gid": 1
    }))
    .unwrap();
    a.apply(&mut spec, &["-I", "-u"]);
    assert_eq!(spec.argv, ["/venv/bin/python", "-I", "-u", "/prims"]);
    assert!(spec.code.is_empty());
    assert!(spec
        .binds
        .iter()
        .any(|b| b.source == a.dir && b.target.as_os_str() == "/prims" && !b.writable));
}

#[test]
fn markers_are_checked_and_framed() {
    assert!(is_marker_hex("0123456789abcdef0123456789abcdef"));
    assert!(!is_marker_hex("0123456789ABCDEF0123456789abcdef"));
    assert!(!is_marker_hex("0123456789abcdef0123456789abcde"));
    assert!(!is_marker_hex("0123456789abcdef0123456789abcdeg"));
    assert_eq!(
        marker_bytes("0123456789abcdef0123456789abcdef"),
        b"\0prims-cell-end-0123456789abcdef0123456789abcdef\0"
    );
}
