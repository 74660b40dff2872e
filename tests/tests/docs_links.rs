//! Every relative link in `README.md` and `docs/` resolves: a link to a
//! file names one that exists in the repository, and an anchor
//! (`docs/tools.md#run_code`, `#quick-start`) names a heading of the target
//! file, as GitHub makes anchors of headings, or an explicit `<a id>`.
//! Links inside code (fenced or indented blocks, inline code spans) are
//! examples, not links, and are not checked; `http(s)://` and other links
//! with a scheme are not fetched. Needs neither root nor a jail.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// A link as written in a markdown file: its destination and its line.
#[derive(Debug)]
struct Link {
    line: usize,
    target: String,
}

/// What the checker needs of one markdown file.
#[derive(Debug, Default)]
struct Doc {
    anchors: BTreeSet<String>,
    links: Vec<Link>,
}

/// GitHub's anchor for a heading: its text as rendered (code, emphasis and
/// link markup gone), lowercased, every character that is not a letter, a
/// digit, `-` or `_` dropped, and each space made a `-`.
fn slug(heading: &str) -> String {
    let text = inline_text(heading);
    let mut out = String::new();
    for c in text.trim().chars().flat_map(char::to_lowercase) {
        if c.is_whitespace() {
            out.push('-');
        } else if c.is_alphanumeric() || c == '-' || c == '_' {
            out.push(c);
        }
    }
    out
}

/// The text of inline markdown: `[text](url)` and `![alt](src)` give their
/// text, backticks and `*` go, backslash escapes give the escaped
/// character, and HTML tags go.
fn inline_text(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if chars.get(i + 1).is_some_and(char::is_ascii_punctuation) => {
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '`' | '*' | '[' => {}
            '!' if chars.get(i + 1) == Some(&'[') => {}
            ']' if chars.get(i + 1) == Some(&'(') => {
                // Skip the destination: up to the matching `)`.
                let mut depth = 0;
                i += 1;
                while i < chars.len() {
                    match chars[i] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            ']' => {}
            '<' => {
                let rest: String = chars[i..].iter().collect();
                let tag = rest.starts_with("</")
                    || rest[1..].starts_with(|c: char| c.is_ascii_alphabetic());
                match rest.find('>') {
                    Some(end) if tag => {
                        i += rest[..end].chars().count();
                    }
                    _ => out.push(c),
                }
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// `s` with inline code spans and backslash-escaped characters blanked out,
/// so that neither is taken for a link.
fn without_code(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && chars.get(i + 1).is_some_and(char::is_ascii_punctuation) {
            out.push_str("  ");
            i += 2;
            continue;
        }
        if c != '`' {
            out.push(c);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        // The span ends at the next run of exactly as many backticks.
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let n = chars[j..].iter().take_while(|&&c| c == '`').count();
                if n == run {
                    close = Some(j + n);
                    break;
                }
                j += n;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                for &c in &chars[i..end] {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                }
                i = end;
            }
            None => {
                // No closing run: the backticks are literal text.
                for _ in 0..run {
                    out.push('`');
                }
                i += run;
            }
        }
    }
    out
}

/// The links of a paragraph (code already blanked), with their lines.
fn links_in(text: &str, first_line: usize, links: &mut Vec<Link>) {
    let chars: Vec<char> = text.chars().collect();
    let line_of = |at: usize| first_line + chars[..at].iter().filter(|&&c| c == '\n').count();
    // Inline links and images: `](destination "title")`.
    let mut i = 0;
    while i + 1 < chars.len() {
        if chars[i] == ']' && chars[i + 1] == '(' {
            let mut j = i + 2;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let mut target = String::new();
            if chars.get(j) == Some(&'<') {
                j += 1;
                while j < chars.len() && chars[j] != '>' && chars[j] != '\n' {
                    target.push(chars[j]);
                    j += 1;
                }
            } else {
                let mut depth = 0usize;
                while j < chars.len() && !chars[j].is_whitespace() {
                    match chars[j] {
                        '(' => depth += 1,
                        ')' if depth == 0 => break,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    target.push(chars[j]);
                    j += 1;
                }
            }
            if !target.is_empty() {
                links.push(Link {
                    line: line_of(i),
                    target,
                });
            }
            i = j;
            continue;
        }
        i += 1;
    }
    // Reference definitions: `[label]: destination` at the start of a line.
    for (line, l) in (first_line..).zip(text.split('\n')) {
        let t = l.trim_start();
        if l.len() - t.len() <= 3 && t.starts_with('[') && !t.starts_with("[^") {
            if let Some(end) = t.find("]:") {
                let rest = t[end + 2..].trim();
                let dest = rest.split_whitespace().next().unwrap_or("");
                let dest = dest.trim_start_matches('<').trim_end_matches('>');
                if !dest.is_empty() {
                    links.push(Link {
                        line,
                        target: dest.to_string(),
                    });
                }
            }
        }
    }
}

/// `id="…"` and `name="…"` of `<a>` tags on a line.
fn html_anchors(line: &str, anchors: &mut BTreeSet<String>) {
    let mut rest = line;
    while let Some(at) = rest.find("<a ") {
        let tag = &rest[at..];
        let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
        for attr in ["id=\"", "name=\""] {
            if let Some(p) = tag.find(attr) {
                let v = &tag[p + attr.len()..];
                if let Some(end) = v.find('"') {
                    anchors.insert(v[..end].to_string());
                }
            }
        }
        rest = &rest[at + 3..];
    }
}

fn indent(line: &str) -> usize {
    let mut n = 0;
    for c in line.chars() {
        match c {
            ' ' => n += 1,
            '\t' => n += 4 - n % 4,
            _ => break,
        }
    }
    n
}

fn is_list_item(line: &str) -> bool {
    let t = line.trim_start();
    let bullet =
        ["- ", "* ", "+ "].iter().any(|b| t.starts_with(b)) || ["-", "*", "+"].contains(&t);
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    let ordered = (1..=9).contains(&digits)
        && (t[digits..].starts_with(". ") || t[digits..].starts_with(") "));
    bullet || ordered
}

/// A fence line: its character and the length of its run.
fn fence(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let c = t.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = t.chars().take_while(|&x| x == c).count();
    // A backtick fence's info string holds no backtick.
    (n >= 3 && (c == '~' || !t[n..].contains('`'))).then_some((c, n))
}

/// Headings become anchors (duplicates numbered `-1`, `-2`, as GitHub
/// does); paragraphs outside code give their links.
fn parse(text: &str) -> Doc {
    #[derive(PartialEq, Clone, Copy)]
    enum Last {
        Start,
        Text,
        List,
    }
    let mut doc = Doc::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut add_heading = |doc: &mut Doc, heading: &str| {
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_insert(0);
        let anchor = if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        *n += 1;
        doc.anchors.insert(anchor);
    };
    let mut para = String::new();
    let mut para_line = 0;
    let flush = |doc: &mut Doc, para: &mut String, line: usize| {
        if !para.is_empty() {
            links_in(&without_code(para), line, &mut doc.links);
            para.clear();
        }
    };
    let mut open_fence: Option<(char, usize)> = None;
    let mut in_indented_code = false;
    let mut prev_blank = true;
    let mut last = Last::Start;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some((c, len)) = open_fence {
            let t = line.trim();
            if t.chars().all(|x| x == c) && t.chars().count() >= len {
                open_fence = None;
            }
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut doc, &mut para, para_line);
            prev_blank = true;
            continue;
        }
        let ind = indent(line);
        // An indented code block starts after a blank line that follows
        // text (not a list, whose items indent their own paragraphs).
        if ind >= 4 && (in_indented_code || (prev_blank && last != Last::List)) {
            in_indented_code = true;
            prev_blank = false;
            continue;
        }
        in_indented_code = false;
        let was_blank = prev_blank;
        prev_blank = false;
        if let Some(f) = fence(line) {
            flush(&mut doc, &mut para, para_line);
            open_fence = Some(f);
            continue;
        }
        html_anchors(line, &mut doc.anchors);
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if ind <= 3
            && (1..=6).contains(&hashes)
            && t[hashes..]
                .chars()
                .next()
                .is_none_or(|c| c == ' ' || c == '\t')
        {
            flush(&mut doc, &mut para, para_line);
            let heading = t[hashes..].trim();
            // An optional closing run of `#`s.
            let heading = match heading.trim_end_matches('#') {
                h if h.ends_with(' ') || h.is_empty() => h.trim_end(),
                _ => heading,
            };
            add_heading(&mut doc, heading);
            links_in(&without_code(heading), n, &mut doc.links);
            last = Last::Text;
            continue;
        }
        // A setext underline turns the paragraph above into a heading.
        let u = line.trim();
        if ind <= 3
            && !para.is_empty()
            && !was_blank
            && last == Last::Text
            && (u.chars().all(|c| c == '=') || u.chars().all(|c| c == '-'))
        {
            let heading = para.trim().replace('\n', " ");
            add_heading(&mut doc, &heading);
            flush(&mut doc, &mut para, para_line);
            continue;
        }
        if is_list_item(line) {
            last = Last::List;
        } else if ind == 0 {
            last = Last::Text;
        }
        if para.is_empty() {
            para_line = n;
        } else {
            para.push('\n');
        }
        para.push_str(line);
    }
    flush(&mut doc, &mut para, para_line);
    doc
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn has_scheme(target: &str) -> bool {
    let scheme: String = target
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
        .collect();
    !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && target[scheme.len()..].starts_with(':')
}

/// `base/rel` with `.` and `..` taken out, or None when it leaves `root`.
fn resolve(root: &Path, base: &Path, rel: &str) -> Option<PathBuf> {
    let joined = if let Some(abs) = rel.strip_prefix('/') {
        root.join(abs)
    } else {
        base.join(rel)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out.starts_with(root).then_some(out)
}

/// The parsed file at `path`, read once.
fn load<'a>(docs: &'a mut HashMap<PathBuf, Doc>, path: &Path) -> Option<&'a Doc> {
    if !docs.contains_key(path) {
        let text = std::fs::read_to_string(path).ok()?;
        docs.insert(path.to_path_buf(), parse(&text));
    }
    docs.get(path)
}

/// Every broken link of `files` (paths under `root`), one message each.
fn check(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut docs: HashMap<PathBuf, Doc> = HashMap::new();
    let mut errors = Vec::new();
    for file in files {
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let Some(doc) = load(&mut docs, file) else {
            errors.push(format!("{shown}: cannot be read"));
            continue;
        };
        let links: Vec<(usize, String)> = doc
            .links
            .iter()
            .map(|l| (l.line, l.target.clone()))
            .collect();
        let base = file.parent().unwrap_or(root);
        for (line, target) in links {
            if has_scheme(&target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let path = path.split('?').next().unwrap_or("");
            let dest = if path.is_empty() {
                file.clone()
            } else {
                match resolve(root, base, &percent_decode(path)) {
                    Some(d) => d,
                    None => {
                        errors.push(format!("{shown}:{line}: {target}: leaves the repository"));
                        continue;
                    }
                }
            };
            if !dest.exists() {
                errors.push(format!("{shown}:{line}: {target}: no such file"));
                continue;
            }
            let Some(anchor) = anchor.map(percent_decode) else {
                continue;
            };
            if dest.extension().is_none_or(|e| e != "md") {
                // GitHub's line anchors of a source file: `#L10`, `#L10-L20`.
                let line_anchor = |s: &str| {
                    s.strip_prefix('L')
                        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                };
                let ok = dest.is_file()
                    && match anchor.split_once('-') {
                        Some((a, b)) => line_anchor(a) && line_anchor(b),
                        None => line_anchor(&anchor),
                    };
                if !ok {
                    errors.push(format!(
                        "{shown}:{line}: {target}: no anchor #{anchor} in a file that is not markdown"
                    ));
                }
                continue;
            }
            match load(&mut docs, &dest) {
                Some(d) if d.anchors.contains(&anchor) => {}
                Some(_) => errors.push(format!(
                    "{shown}:{line}: {target}: no heading or anchor #{anchor}"
                )),
                None => errors.push(format!("{shown}:{line}: {target}: cannot be read")),
            }
        }
    }
    errors
}

/// README.md and every markdown file under docs/.
fn docs_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = workspace_root();
    let files = docs_files(&root);
    assert!(
        files.iter().any(|f| f.starts_with(root.join("docs"))),
        "no markdown file under docs/"
    );
    let errors = check(&root, &files);
    assert!(
        errors.is_empty(),
        "{} broken link(s) in README.md and docs/:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

#[test]
fn the_checker_reports_each_broken_link_and_ignores_code() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().canonicalize().expect("canonical temp dir");
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(root.join("src.rs"), "fn main() {}\n").unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Title\n\
         \n\
         Good: [a](docs/a.md), [b](docs/a.md#the-second-part), [c](#title),\n\
         [d](docs/a.md#same-1), [e](src.rs#L1), [f](https://example.org/x#y),\n\
         [g](<docs/a.md#the-second-part>) and ![h](docs/).\n\
         \n\
         Broken: [missing file](docs/nope.md), [missing anchor](docs/a.md#nothing),\n\
         [missing local](#nothing-here), [outside](../elsewhere.md),\n\
         [source anchor](src.rs#main).\n\
         \n\
         Code: `[x](docs/nope.md)` and ``[y](`#z`)``.\n\
         \n\
         ```md\n\
         [in a fence](docs/nope.md)\n\
         ```\n\
         \n\
         Text before an indented block:\n\
         \n\
         \x20   [indented code](docs/nope.md)\n\
         \n\
         - a list item\n\
         \n\
         \x20   [a list's paragraph](docs/missing-too.md)\n\
         \n\
         [ref]: docs/gone.md\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n\n## The second part\n\n## Same\n\n## Same\n\n<a id=\"custom\"></a>\n\n\
         Back: [readme](../README.md#title), [custom](#custom), [wrapped\nlink](#the-second-part).\n",
    )
    .unwrap();
    let files = docs_files(&root);
    let errors = check(&root, &files);
    let want = [
        "README.md:7: docs/nope.md: no such file",
        "README.md:7: docs/a.md#nothing: no heading or anchor #nothing",
        "README.md:8: #nothing-here: no heading or anchor #nothing-here",
        "README.md:8: ../elsewhere.md: leaves the repository",
        "README.md:9: src.rs#main: no anchor #main in a file that is not markdown",
        "README.md:23: docs/missing-too.md: no such file",
        "README.md:25: docs/gone.md: no such file",
    ];
    assert_eq!(errors, want, "the checker's report");
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(slug("Quick start"), "quick-start");
    assert_eq!(slug("`run_code`"), "run_code");
    assert_eq!(slug("HTTP beside `/mcp`"), "http-beside-mcp");
    assert_eq!(
        slug("Against the original's approach"),
        "against-the-originals-approach"
    );
    assert_eq!(
        slug("Network access (allowlist mode)"),
        "network-access-allowlist-mode"
    );
    assert_eq!(
        slug("One `run_code`, hop by hop"),
        "one-run_code-hop-by-hop"
    );
    assert_eq!(
        slug("The .deb (Debian 12; systemd with cgroup v2)"),
        "the-deb-debian-12-systemd-with-cgroup-v2"
    );
    assert_eq!(
        slug("See [the guide](docs/x.md) — now"),
        "see-the-guide--now"
    );
    assert_eq!(slug("Größe × 2"), "größe--2");
    let doc = parse("# A\n## A\n## A\nA\n-\n");
    let want: BTreeSet<String> = ["a", "a-1", "a-2", "a-3"].map(String::from).into();
    assert_eq!(doc.anchors, want);
}
