//! `packaging/policy.example.toml` must stay complete, valid and truthful.

use prims_policy::Policy;
use std::collections::BTreeSet;

const EXAMPLE: &str = include_str!("../../packaging/policy.example.toml");

/// `section.key` for every key a policy can hold. The schema is two levels
/// deep; deeper tables (interpreters) are data, not schema.
fn schema_paths(rendered: &str) -> BTreeSet<String> {
    let table: toml::Table = toml::from_str(rendered).expect("rendered policy is TOML");
    let mut out = BTreeSet::new();
    for (section, value) in &table {
        let keys = value.as_table().expect("top level holds only sections");
        for key in keys.keys() {
            out.insert(format!("{section}.{key}"));
        }
    }
    out
}

/// `section.key` for every key the example sets or shows commented out
/// (`# key = ...`, for keys whose default cannot be written literally).
fn documented_paths(text: &str) -> BTreeSet<String> {
    let mut section = String::new();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let candidate = line.strip_prefix("# ").unwrap_or(line);
        if let Some((key, _)) = candidate.split_once(" = ") {
            let key = key.trim();
            if !section.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.insert(format!("{section}.{key}"));
            }
        }
    }
    out
}

#[test]
fn example_parses() {
    if let Err(e) = Policy::from_toml_str(EXAMPLE) {
        panic!("packaging/policy.example.toml is invalid:\n{e}");
    }
}

#[test]
fn example_documents_every_key() {
    let mut full = Policy::default();
    full.limits.max_concurrent_runs = Some(4);
    full.limits.max_concurrent_fresh_runs = Some(8);
    full.python.ipython_site = Some("/opt/prims/ipython".into());
    let want = schema_paths(&full.to_toml_string());
    assert!(want.contains("limits.max_concurrent_runs"));
    assert!(want.contains("filesystem.interpreters"));
    let have = documented_paths(EXAMPLE);
    let missing: Vec<&String> = want.difference(&have).collect();
    assert!(
        missing.is_empty(),
        "undocumented in policy.example.toml: {missing:?}"
    );
    let unknown: Vec<&String> = have.difference(&want).collect();
    assert!(unknown.is_empty(), "not policy keys: {unknown:?}");
}

#[test]
fn every_documented_key_has_a_comment() {
    let lines: Vec<&str> = EXAMPLE.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let is_key = !line.starts_with('#') && line.contains(" = ");
        if is_key {
            assert!(
                i > 0 && lines[i - 1].starts_with('#'),
                "line {}: {line:?} has no comment above it",
                i + 1
            );
        }
    }
}

#[test]
fn example_is_the_default_policy() {
    // Every key is set to its default; max_concurrent_runs is commented out
    // because its default (the core count) depends on the host.
    assert_eq!(Policy::from_toml_str(EXAMPLE).unwrap(), Policy::default());
}

#[test]
fn commented_out_keys_are_valid_when_enabled() {
    let enabled = EXAMPLE.replace("# max_concurrent_runs = 4", "max_concurrent_runs = 4");
    assert_ne!(enabled, EXAMPLE);
    let p = Policy::from_toml_str(&enabled).unwrap();
    assert_eq!(p.max_concurrent_runs(), 4);
    assert_eq!(p.max_concurrent_fresh_runs(), 8, "twice the session slots");
    let enabled = enabled.replace(
        "# max_concurrent_fresh_runs = 8",
        "max_concurrent_fresh_runs = 3",
    );
    let p = Policy::from_toml_str(&enabled).unwrap();
    assert_eq!(p.max_concurrent_fresh_runs(), 3);
}
