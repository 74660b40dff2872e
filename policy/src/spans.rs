//! Mapping between byte offsets in the policy text and key paths, so every
//! message can say both *which key* and *where*.

use std::fmt;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A dotted key path such as `filesystem.ro_binds[2]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    pub fn new(keys: &[&str]) -> Self {
        KeyPath(keys.iter().map(|k| Seg::Key((*k).to_string())).collect())
    }

    pub fn index(mut self, i: usize) -> Self {
        self.0.push(Seg::Index(i));
        self
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let bare = !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if bare {
                        f.write_str(k)?;
                    } else {
                        write!(f, "{k:?}")?;
                    }
                }
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// 1-based line and column (in characters) of a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

pub fn location(text: &str, offset: usize) -> Location {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

fn contains(span: &Range<usize>, pos: usize) -> bool {
    span.start <= pos && pos < span.end.max(span.start + 1)
}

/// The deepest key path whose key or value covers `pos`.
pub fn path_at(root: &DeTable<'_>, pos: usize) -> Option<KeyPath> {
    let mut path = KeyPath::default();
    walk_table(root, pos, &mut path).then_some(path)
}

fn walk_table(table: &DeTable<'_>, pos: usize, path: &mut KeyPath) -> bool {
    for (key, value) in table.iter() {
        path.0.push(Seg::Key(key.get_ref().to_string()));
        if contains(&key.span(), pos) || walk_value(value, pos, path) {
            return true;
        }
        path.0.pop();
    }
    false
}

fn walk_value(value: &Spanned<DeValue<'_>>, pos: usize, path: &mut KeyPath) -> bool {
    // Children first: a table made by a `[header]` may have a span that
    // covers only the header, so containment alone cannot prune.
    let found = match value.get_ref() {
        DeValue::Table(t) => walk_table(t, pos, path),
        DeValue::Array(items) => items.iter().enumerate().any(|(i, item)| {
            path.0.push(Seg::Index(i));
            let hit = walk_value(item, pos, path);
            if !hit {
                path.0.pop();
            }
            hit
        }),
        _ => false,
    };
    found || contains(&value.span(), pos)
}

/// The span of the value at `path`, if the file spells it out.
pub fn locate(root: &DeTable<'_>, path: &KeyPath) -> Option<Range<usize>> {
    let mut segs = path.0.iter();
    let first = match segs.next()? {
        Seg::Key(k) => k,
        Seg::Index(_) => return None,
    };
    let mut cur = find_key(root, first)?;
    for seg in segs {
        cur = match (seg, cur.get_ref()) {
            (Seg::Key(k), DeValue::Table(t)) => find_key(t, k)?,
            (Seg::Index(i), DeValue::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur.span())
}

fn find_key<'a, 'i>(table: &'a DeTable<'i>, name: &str) -> Option<&'a Spanned<DeValue<'i>>> {
    table
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_lines_and_chars() {
        let text = "a\nbé = 1\n";
        assert_eq!(location(text, 0), Location { line: 1, column: 1 });
        assert_eq!(location(text, 2), Location { line: 2, column: 1 });
        // 'é' is two bytes but one column.
        assert_eq!(location(text, 5), Location { line: 2, column: 3 });
        assert_eq!(location(text, 999), Location { line: 3, column: 1 });
        // Inside a multi-byte char: snap back, never panic.
        assert_eq!(location(text, 4), Location { line: 2, column: 2 });
    }

    #[test]
    fn key_paths_display_quoted_when_needed() {
        let p = KeyPath::new(&["filesystem", "interpreters", "3.11"]);
        assert_eq!(p.to_string(), "filesystem.interpreters.\"3.11\"");
        let p = KeyPath::new(&["filesystem", "ro_binds"]).index(2);
        assert_eq!(p.to_string(), "filesystem.ro_binds[2]");
    }

    #[test]
    fn finds_paths_both_ways() {
        let text = "[limits]\nmemory = \"1GiB\"\n[filesystem]\nro_binds = [\"/a\", \"/b\"]\n";
        let doc = DeTable::parse(text).expect("valid toml");
        let root = doc.get_ref();
        let span = locate(root, &KeyPath::new(&["limits", "memory"])).expect("present");
        assert_eq!(&text[span.clone()], "\"1GiB\"");
        assert_eq!(
            path_at(root, span.start),
            Some(KeyPath::new(&["limits", "memory"]))
        );
        let b = KeyPath::new(&["filesystem", "ro_binds"]).index(1);
        let span = locate(root, &b).expect("present");
        assert_eq!(&text[span.clone()], "\"/b\"");
        assert_eq!(path_at(root, span.start), Some(b));
        assert_eq!(locate(root, &KeyPath::new(&["limits", "pids"])), None);
    }
}
