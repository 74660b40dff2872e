//! Requirement strings from callers, checked before uv ever sees them.
//!
//! The accepted grammar is a strict subset of PEP 508: a name, optional
//! extras, and optional comma-separated version clauses, with no whitespace:
//! `pandas`, `numpy==1.26.*`, `requests[socks]>=2,<3`. Everything else is
//! refused: options (`-r`, `--index-url=`), URLs and paths (`file:`, `/`,
//! `./`, `git+`), direct references (`name @ url`), and environment markers
//! (`six; python_version>"3"`): an environment serves exactly one
//! interpreter, so a marker could only ever be true or false, and refusing
//! `;` keeps shell-looking input out entirely.

use super::error::EnvError;

/// Most requirements one call may ask for.
pub(crate) const MAX_REQUIREMENTS: usize = 50;
/// Longest single requirement string.
pub(crate) const MAX_REQUIREMENT_LEN: usize = 200;

const OPERATORS: [&str; 8] = ["===", "==", "!=", "~=", "<=", ">=", "<", ">"];

/// Validate and normalize requirements: names lowercased with runs of
/// `-`, `_`, `.` turned into one `-`, extras and version clauses sorted,
/// then the whole list sorted and deduplicated.
pub(crate) fn validate_requirements(reqs: &[String]) -> Result<Vec<String>, EnvError> {
    if reqs.len() > MAX_REQUIREMENTS {
        return Err(EnvError::TooManyRequirements {
            count: reqs.len(),
            max: MAX_REQUIREMENTS,
        });
    }
    let mut out = reqs
        .iter()
        .map(|r| {
            normalize_one(r).map_err(|reason| EnvError::BadRequirement {
                requirement: r.chars().take(MAX_REQUIREMENT_LEN + 1).collect(),
                reason,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// The PEP 503 normal form of a project or extra name.
pub(crate) fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

fn normalize_one(req: &str) -> Result<String, String> {
    if req.is_empty() {
        return Err("is empty".into());
    }
    if req.len() > MAX_REQUIREMENT_LEN {
        return Err(format!("is longer than {MAX_REQUIREMENT_LEN} characters"));
    }
    if req.starts_with('-') {
        return Err("starts with - (installer options are not accepted)".into());
    }
    if let Some(c) = req.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "contains {c:?} (whitespace and control characters are not accepted; write e.g. numpy>=1.26)"
        ));
    }
    if req.contains('@') || req.contains("://") || req.contains('/') || req.contains(':') {
        return Err(
            "is a URL, a path or a direct reference; only package names with optional \
             extras and version specifiers are accepted (e.g. pandas, numpy==1.26.*)"
                .into(),
        );
    }
    if req.contains(';') {
        return Err("has an environment marker (;), which is not accepted".into());
    }
    let name_end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(req.len());
    let (name, rest) = req.split_at(name_end);
    check_name(name, "package name")?;
    let mut out = normalize_name(name);
    let rest = match rest.strip_prefix('[') {
        Some(after) => {
            let (extras, rest) = after
                .split_once(']')
                .ok_or_else(|| "has an unclosed [ in its extras".to_string())?;
            let mut list = extras
                .split(',')
                .map(|e| check_name(e, "extra").map(|()| normalize_name(e)))
                .collect::<Result<Vec<_>, _>>()?;
            list.sort();
            list.dedup();
            out.push('[');
            out.push_str(&list.join(","));
            out.push(']');
            rest
        }
        None => rest,
    };
    if !rest.is_empty() {
        let mut clauses = rest
            .split(',')
            .map(check_clause)
            .collect::<Result<Vec<_>, _>>()?;
        clauses.sort();
        clauses.dedup();
        out.push_str(&clauses.join(","));
    }
    Ok(out)
}

/// PEP 508 names: ASCII letters and digits, with `-`, `_`, `.` inside.
fn check_name(name: &str, what: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "has an invalid {what} {name:?} (letters, digits, and - _ . inside)"
        ))
    }
}

/// One version clause such as `>=2` or `==1.26.*`.
fn check_clause(clause: &str) -> Result<String, String> {
    let op = OPERATORS
        .iter()
        .find(|op| clause.starts_with(**op))
        .ok_or_else(|| {
            format!(
                "has {clause:?} where a version clause was expected (e.g. ==1.2, >=2, ~=1.4, !=1.5.*)"
            )
        })?;
    let version = &clause[op.len()..];
    let ok = !version.is_empty()
        && version.starts_with(|c: char| c.is_ascii_alphanumeric())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '!' | '-' | '_'));
    if ok {
        Ok(clause.to_string())
    } else {
        Err(format!("has an invalid version in {clause:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(reqs: &[&str]) -> Vec<String> {
        let v: Vec<String> = reqs.iter().map(|s| s.to_string()).collect();
        validate_requirements(&v).unwrap()
    }

    fn refused(req: &str) -> bool {
        matches!(
            validate_requirements(&[req.to_string()]),
            Err(EnvError::BadRequirement { .. })
        )
    }

    #[test]
    fn accepts_and_normalizes() {
        assert_eq!(
            ok(&[
                "Pandas",
                "numpy==1.26.*",
                "requests[socks]>=2,<3",
                "Zope.Interface_x",
                "pandas",
                "PyYAML[B,a]!=6.0.0,>5"
            ]),
            vec![
                "numpy==1.26.*",
                "pandas",
                "pyyaml[a,b]!=6.0.0,>5",
                "requests[socks]<3,>=2",
                "zope-interface-x",
            ]
        );
    }

    #[test]
    fn refuses_junk() {
        for bad in [
            "",
            "--index-url=http://evil",
            "-r /etc/passwd",
            "-e.",
            "six; rm -rf /",
            "six ; python_version>\"3\"",
            "../x",
            "./x",
            "/etc/passwd",
            "git+https://x",
            "file:///x",
            "pkg @ https://x/y.whl",
            "pkg@https://x",
            "a\nb",
            "a\tb",
            "pkg==",
            "pkg=1",
            "pkg[",
            "pkg[x]]",
            "pkg[-x]",
            "pkg>=1;x",
            "_x",
            "x-",
            "x==1 ",
            "x\u{0}",
        ] {
            assert!(refused(bad), "{bad:?} was accepted");
        }
        assert!(refused(&"a".repeat(MAX_REQUIREMENT_LEN + 1)));
        let many: Vec<String> = (0..=MAX_REQUIREMENTS).map(|i| format!("p{i}")).collect();
        assert!(matches!(
            validate_requirements(&many),
            Err(EnvError::TooManyRequirements { .. })
        ));
    }
}
