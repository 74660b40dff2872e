//! Policy errors, worded for the admin who has the file open in an editor.

use crate::spans::{self, KeyPath, Location};
use std::fmt;
use std::path::{Path, PathBuf};
use toml::de::DeTable;

/// One problem in a policy: which key, what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Dotted key path such as `limits.memory`; empty for plain TOML syntax errors.
    pub key: String,
    pub message: String,
    /// Absent when the key is not spelled out in the file (a default is in effect).
    pub location: Option<Location>,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)?;
        if let Some(loc) = self.location {
            write!(f, " at {loc}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{}: {}", path.display(), describe_io(source))]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", render(file.as_deref(), issues))]
    Invalid {
        /// The file the text came from, when loaded with `Policy::load`.
        file: Option<PathBuf>,
        /// Every problem found; syntax and type errors stop parsing, so they come alone.
        issues: Vec<Issue>,
    },
}

impl PolicyError {
    /// The individual problems; empty for a read error.
    pub fn issues(&self) -> &[Issue] {
        match self {
            PolicyError::Read { .. } => &[],
            PolicyError::Invalid { issues, .. } => issues,
        }
    }

    pub(crate) fn with_file(self, path: &Path) -> Self {
        match self {
            PolicyError::Invalid { issues, .. } => PolicyError::Invalid {
                file: Some(path.to_path_buf()),
                issues,
            },
            other => other,
        }
    }
}

fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "policy file not found".to_string(),
        std::io::ErrorKind::PermissionDenied => {
            "policy file is not readable (permission denied)".to_string()
        }
        _ => format!("cannot read policy file: {e}"),
    }
}

fn render(file: Option<&Path>, issues: &[Issue]) -> String {
    let lines: Vec<String> = issues
        .iter()
        .map(|issue| match file {
            Some(f) => format!("{}: {issue}", f.display()),
            None => issue.to_string(),
        })
        .collect();
    lines.join("\n")
}

/// Turns a TOML syntax error into an issue, naming the key when the
/// recoverable parse got far enough to know it.
pub(crate) fn syntax_issue(text: &str, err: &toml::de::Error) -> Issue {
    let (root, _) = DeTable::parse_recoverable(text);
    let span = err.span();
    let key = span
        .as_ref()
        .and_then(|s| spans::path_at(root.get_ref(), s.start))
        .map(|p| p.to_string())
        .unwrap_or_default();
    Issue {
        key,
        message: format!("invalid TOML: {}", one_line(err.message())),
        location: span.map(|s| spans::location(text, s.start)),
    }
}

/// Turns a serde error (unknown key, wrong type, bad unit) into an issue.
pub(crate) fn schema_issue(text: &str, root: &DeTable<'_>, err: &toml::de::Error) -> Issue {
    let span = err.span();
    let key = span
        .as_ref()
        .and_then(|s| spans::path_at(root, s.start))
        .map(|p| p.to_string())
        .unwrap_or_default();
    Issue {
        key,
        message: reword(&one_line(err.message())),
        location: span.map(|s| spans::location(text, s.start)),
    }
}

pub(crate) fn semantic_issue(
    text: Option<&str>,
    root: Option<&DeTable<'_>>,
    paths: &[KeyPath],
    message: String,
) -> Issue {
    let location = match (text, root) {
        (Some(text), Some(root)) => paths
            .iter()
            .find_map(|p| spans::locate(root, p))
            .map(|s| spans::location(text, s.start)),
        _ => None,
    };
    Issue {
        key: paths.first().map(|p| p.to_string()).unwrap_or_default(),
        message,
        location,
    }
}

fn one_line(s: &str) -> String {
    s.trim().replace('\n', "; ")
}

/// The words between backticks, in order.
fn ticked(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// Rewrites serde's Rust-flavoured messages into policy-file vocabulary.
fn reword(msg: &str) -> String {
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let names = ticked(rest.split_once('`').map_or("", |(_, r)| r));
        return if names.is_empty() {
            "unknown key (this table takes no keys)".to_string()
        } else {
            format!("unknown key (expected one of: {})", names.join(", "))
        };
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (value, tail) = rest.split_once('`').unwrap_or((rest, ""));
        return format!(
            "unknown value {value:?} (expected one of: {})",
            ticked(tail).join(", ")
        );
    }
    let mut out = msg.to_string();
    for (from, to) in [
        ("expected u64", "expected a non-negative integer"),
        ("expected usize", "expected a non-negative integer"),
        ("expected u32", "expected an integer from 0 to 4294967295"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected a table"),
        ("invalid type: sequence", "invalid type: array"),
        ("invalid type: map", "invalid type: table"),
        ("invalid type: floating point", "invalid type: float"),
    ] {
        out = out.replace(from, to);
    }
    if let Some(i) = out.find("expected struct ") {
        out.truncate(i);
        out.push_str("expected a table");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewords_serde_messages() {
        assert_eq!(
            reword("unknown field `memroy`, expected one of `wall_time`, `cpu_time`"),
            "unknown key (expected one of: wall_time, cpu_time)"
        );
        assert_eq!(
            reword("unknown field `x`, expected `mode`"),
            "unknown key (expected one of: mode)"
        );
        assert_eq!(
            reword("unknown variant `wifi`, expected `none` or `loopback`"),
            "unknown value \"wifi\" (expected one of: none, loopback)"
        );
        assert_eq!(
            reword("invalid type: string \"a\", expected u64"),
            "invalid type: string \"a\", expected a non-negative integer"
        );
        assert_eq!(
            reword("invalid type: integer `3`, expected struct Limits"),
            "invalid type: integer `3`, expected a table"
        );
        // Junk in, something out, no panic.
        assert_eq!(
            reword("unknown field `"),
            "unknown key (this table takes no keys)"
        );
        assert!(reword("unknown variant `").starts_with("unknown value"));
    }
}
