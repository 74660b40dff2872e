//! The names a job (or leaf) cgroup may have: one path component that can
//! never be `.`, `..` or a path.

use crate::error::CgroupError;

/// Check a job (or leaf) cgroup name: `[A-Za-z0-9_-]{1,64}`.
pub fn validate_name(name: &str) -> Result<(), CgroupError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(CgroupError::BadJobName {
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names() {
        for good in ["a", "job-1_X", &"x".repeat(64)] {
            validate_name(good).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a.b",
            "x\n",
            &"x".repeat(65),
        ] {
            let e = validate_name(bad).unwrap_err();
            assert!(matches!(e, CgroupError::BadJobName { .. }), "{bad:?}");
        }
    }
}
