//! The shape of the source tree: no circle of files, no file importing from
//! its parent module, the supervisor's top-level modules in their layer
//! order (`supervisor/layers.txt`, `mcp/layers.txt`), and a jailer whose dependency tree holds
//! neither the policy parser nor `toml`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates in which no file imports from its parent module: every one.
const NO_UP_IMPORTS: &[&str] = &[
    "bench",
    "cgroup",
    "cli",
    "egress",
    "jailer",
    "mcp",
    "policy",
    "protocol",
    "supervisor",
    "syscalls",
    "tests",
];
/// Crates that may still import from a parent module, while they are
/// restructured: none.
const UP_IMPORTS_STILL_ALLOWED: &[&str] = &[];

/// The crates whose top-level modules follow the order of their
/// `layers.txt`.
const LAYERED: &[&str] = &["supervisor", "mcp"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

#[test]
fn no_circle_of_files_no_up_imports_and_the_layered_crates_in_order() {
    let root = workspace_root();
    let out = Command::new("python3")
        .arg(root.join("scripts/file-graph.py"))
        .args(["--root", root.to_str().expect("a UTF-8 path")])
        .args(["--no-up-imports", &NO_UP_IMPORTS.join(",")])
        .args(["--layers", &LAYERED.join(",")])
        .output()
        .expect("python3 runs scripts/file-graph.py");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.starts_with("circles of files: 0\n"), "{report}");
    assert!(report.contains("\nlayer breaks: 0\n"), "{report}");
}

/// A new crate is checked from its first day: every crate is either held
/// to no up-imports or named as still allowed them.
#[test]
fn every_crate_is_checked_for_up_imports() {
    let root = workspace_root();
    let mut crates: Vec<String> = std::fs::read_dir(&root)
        .expect("the workspace root")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file() && e.path().join("src").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    let mut named: Vec<String> = NO_UP_IMPORTS
        .iter()
        .chain(UP_IMPORTS_STILL_ALLOWED)
        .map(|c| c.to_string())
        .collect();
    named.sort();
    assert_eq!(
        crates, named,
        "name each crate in NO_UP_IMPORTS (or, while it is restructured, in UP_IMPORTS_STILL_ALLOWED)"
    );
}

/// docs/architecture.md states each layer order as its `layers.txt` does.
#[test]
fn the_architecture_guide_states_the_layer_order() {
    let root = workspace_root();
    let guide =
        std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    let guide = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    for crate_dir in LAYERED {
        let layers = std::fs::read_to_string(root.join(crate_dir).join("layers.txt"))
            .expect("the crate's layers.txt");
        let order: Vec<String> = layers
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default().trim())
            .filter(|l| !l.is_empty())
            .map(|m| format!("`{m}`"))
            .collect();
        let stated = order.join(", ");
        assert!(
            guide.contains(&stated),
            "docs/architecture.md should state {crate_dir}'s layers, lowest first, as: {stated}"
        );
    }
}

#[test]
fn the_jailer_links_neither_the_policy_parser_nor_toml() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["tree", "--offline", "--locked", "-p", "prims-jailer"])
        .args(["-e", "normal,build", "--prefix", "none"])
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tree.starts_with("prims-jailer "), "{tree}");
    for line in tree.lines() {
        let name = line.split(' ').next().unwrap_or_default();
        assert!(
            name != "prims-policy" && name != "toml" && !name.starts_with("toml_"),
            "the jailer depends on {line}:\n{tree}"
        );
    }
}
