//! The policy reference in `docs/policy.md` is generated from
//! `packaging/policy.example.toml`, which `example.rs` holds to the schema
//! (every key, every default). This test fails when the guide drifts;
//! `PRIMS_BLESS=1 cargo test -p prims-policy --test docs_reference`
//! rewrites the block.

const EXAMPLE: &str = include_str!("../../packaging/policy.example.toml");
const GUIDE: &str = "../docs/policy.md";
const START: &str = "<!-- policy-reference: generated from packaging/policy.example.toml; PRIMS_BLESS=1 cargo test -p prims-policy --test docs_reference rewrites it -->";
const END: &str = "<!-- /policy-reference -->";

fn is_key(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One table row per key: `section.key`, its default, and its comment.
fn reference() -> String {
    let mut out = vec![
        START.to_string(),
        "| key | default | meaning |".to_string(),
        "|---|---|---|".to_string(),
    ];
    let (mut section, mut doc) = (String::new(), Vec::<String>::new());
    for line in EXAMPLE.lines() {
        let line = line.trim_end();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            doc.clear();
            continue;
        }
        if line.is_empty() {
            doc.clear();
            continue;
        }
        // `# key = value`: a key whose default cannot be written literally.
        let commented = line.strip_prefix("# ").filter(|l| !l.starts_with(' '));
        let (text, is_comment) = match commented {
            Some(l) if l.split_once(" = ").is_some_and(|(k, _)| is_key(k)) => (l, false),
            _ if line.starts_with('#') => (line, true),
            _ => (line, false),
        };
        if is_comment {
            doc.push(text.trim_start_matches('#').trim().to_string());
            continue;
        }
        let Some((key, value)) = text.split_once(" = ") else {
            continue;
        };
        let default = if commented.is_some() {
            "see meaning".to_string()
        } else {
            format!("`{}`", value.trim())
        };
        let meaning = doc.join(" ").replace('|', "\\|");
        out.push(format!(
            "| `{section}.{}` | {} | {meaning} |",
            key.trim(),
            default.replace('|', "\\|")
        ));
        doc.clear();
    }
    out.push(END.to_string());
    out.join("\n")
}

#[test]
fn docs_policy_reference_matches_the_example() {
    let want = reference();
    let guide = std::fs::read_to_string(GUIDE).expect("docs/policy.md");
    let block = guide
        .find(START)
        .and_then(|a| guide[a..].find(END).map(|b| (a, a + b + END.len())));
    if std::env::var_os("PRIMS_BLESS").is_some() {
        let (a, b) = block.expect("docs/policy.md has no policy-reference block to rewrite");
        let new = format!("{}{}{}", &guide[..a], want, &guide[b..]);
        std::fs::write(GUIDE, new).expect("writing docs/policy.md");
        return;
    }
    let Some((a, b)) = block else {
        panic!("docs/policy.md has no policy-reference block; add one:\n{want}");
    };
    assert!(
        guide[a..b] == want,
        "docs/policy.md's policy reference is stale; run PRIMS_BLESS=1 cargo test -p prims-policy --test docs_reference. Expected:\n{want}"
    );
}
