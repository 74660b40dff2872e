//! Checking a caller's relative path before any syscall sees it.

use super::error::{shorten, FsError};
use std::ffi::CString;

/// Longest path accepted (PATH_MAX).
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// A checked path relative to some directory: no `..`, not absolute, no NUL,
/// no empty component; `.` components are dropped and trailing slashes
/// ignored. An empty result names the directory itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelPath {
    parts: Vec<String>,
}

impl RelPath {
    pub fn parse(raw: &str) -> Result<RelPath, FsError> {
        let bad = |reason: &'static str| FsError::BadPath {
            path: shorten(raw),
            reason,
        };
        if raw.len() > MAX_PATH_BYTES {
            return Err(bad("is longer than 4096 bytes"));
        }
        if raw.contains('\0') {
            return Err(bad("contains a NUL byte"));
        }
        if raw.starts_with('/') {
            return Err(FsError::Escape {
                path: shorten(raw),
                reason: "absolute paths are not allowed; paths are relative to the workspace",
            });
        }
        let trimmed = raw.trim_end_matches('/');
        let mut parts = Vec::new();
        if trimmed.is_empty() {
            return Ok(RelPath { parts });
        }
        for part in trimmed.split('/') {
            match part {
                "" => return Err(bad("contains an empty component (//)")),
                "." => {}
                ".." => {
                    return Err(FsError::Escape {
                        path: shorten(raw),
                        reason: ".. components are not allowed",
                    })
                }
                p => parts.push(p.to_string()),
            }
        }
        Ok(RelPath { parts })
    }

    /// True when the path names the starting directory itself.
    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// The normalized form: `a/b/c`, or `.` for the directory itself.
    pub(crate) fn as_string(&self) -> String {
        if self.parts.is_empty() {
            ".".to_string()
        } else {
            self.parts.join("/")
        }
    }

    /// The normalized form for openat2.
    pub(crate) fn to_cstring(&self) -> Result<CString, FsError> {
        CString::new(self.as_string()).map_err(|_| FsError::BadPath {
            path: self.as_string(),
            reason: "contains a NUL byte",
        })
    }

    /// `prefix/self`, for reporting paths relative to the workspace root.
    pub fn under(&self, prefix: &str) -> String {
        if self.parts.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}/{}", self.as_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_normal_paths() {
        assert_eq!(
            RelPath::parse("output/a.txt").unwrap().as_string(),
            "output/a.txt"
        );
        assert_eq!(RelPath::parse("./output/").unwrap().as_string(), "output");
        assert!(RelPath::parse(".").unwrap().is_root());
        assert!(RelPath::parse("").unwrap().is_root());
    }

    #[test]
    fn refuses_escapes_and_junk() {
        for p in ["../x", "output/../../x", "a/..", "/etc/passwd", "/"] {
            assert!(
                matches!(RelPath::parse(p), Err(FsError::Escape { .. })),
                "{p}"
            );
        }
        for p in ["a//b", "a\0b"] {
            assert!(
                matches!(RelPath::parse(p), Err(FsError::BadPath { .. })),
                "{p}"
            );
        }
        let long = "a/".repeat(2100);
        assert!(matches!(
            RelPath::parse(&long),
            Err(FsError::BadPath { .. })
        ));
    }
}
