//! The relative paths the tools take, checked here before the supervisor
//! (which has the last word), and what a path tells: its name and type.

use crate::error::ToolError;

/// `path` as a clean relative path (no `.`, `..`, empty parts or leading
/// `/`), or an error naming `what`. An empty path is refused unless
/// `allow_root`, when it becomes `""`.
pub(crate) fn clean_relative(
    path: &str,
    what: &str,
    allow_root: bool,
) -> Result<String, ToolError> {
    let refuse = |why: &str| {
        ToolError(format!(
            "{what} {path:?} {why}; give a relative path such as \"data.csv\" or \"sub/dir/file.txt\""
        ))
    };
    if path.contains('\0') {
        return Err(refuse("contains a NUL byte"));
    }
    if path.starts_with('/') {
        return Err(refuse("is absolute"));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(refuse("leaves its directory with '..'")),
            p => parts.push(p),
        }
    }
    if parts.is_empty() && !allow_root {
        return Err(refuse("names no file"));
    }
    Ok(parts.join("/"))
}

/// The last path component.
pub(crate) fn base_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_owned()
}

pub(crate) fn guess_mime(path: &str) -> String {
    mime_guess::from_path(path)
        .first_raw()
        .unwrap_or("application/octet-stream")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_cleaned_or_refused() {
        assert_eq!(clean_relative("./a//b/", "p", false).unwrap(), "a/b");
        assert_eq!(clean_relative(".", "p", true).unwrap(), "");
        assert!(clean_relative(".", "p", false).is_err());
        assert!(clean_relative("../etc/passwd", "p", false).is_err());
        assert!(clean_relative("a/../../b", "p", false).is_err());
        assert!(clean_relative("/etc/passwd", "p", false).is_err());
        assert!(clean_relative("a\0b", "p", false).is_err());
        assert_eq!(base_name("output/x/plot.png"), "plot.png");
        assert_eq!(guess_mime("a.png"), "image/png");
    }
}
