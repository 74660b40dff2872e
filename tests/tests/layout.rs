//! The shape of the source tree: no circle of files, no file importing from
//! its parent module in `cgroup` or `cli`, and a jailer whose dependency
//! tree holds neither the policy parser nor `toml`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

#[test]
fn no_circle_of_files_and_no_up_imports_in_cgroup_or_cli() {
    let root = workspace_root();
    let out = Command::new("python3")
        .arg(root.join("scripts/file-graph.py"))
        .args(["--root", root.to_str().expect("a UTF-8 path")])
        .args(["--no-up-imports", "cgroup,cli"])
        .output()
        .expect("python3 runs scripts/file-graph.py");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.starts_with("circles of files: 0\n"), "{report}");
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
