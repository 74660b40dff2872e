//! A call's requirements against the session's. They accumulate: the
//! first call's pick the environment, a later call that leaves them out or
//! repeats some keeps the interpreter, and one that adds packages has them
//! installed into the session, the interpreter kept, unless they conflict
//! with what it has; only then does a new environment (for everything the
//! session asked for, the new versions in place of the old) replace it.

use crate::interpreters::SessionRequirements;

/// What a call's requirements mean for the session.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// The session's first call: its environment is built for these.
    Base(Vec<String>),
    /// Nothing new: the session's environment and interpreter serve.
    Keep(SessionRequirements),
    /// These are new to the session: installed into it.
    Add {
        had: SessionRequirements,
        missing: Vec<String>,
    },
}

/// `asked` (validated, normalized) against what the session `had`.
pub(super) fn plan(had: Option<SessionRequirements>, asked: &[String]) -> Plan {
    let Some(had) = had else {
        return Plan::Base(asked.to_vec());
    };
    let missing: Vec<String> = asked
        .iter()
        .filter(|r| !had.all.contains(r))
        .cloned()
        .collect();
    if missing.is_empty() {
        Plan::Keep(had)
    } else {
        Plan::Add { had, missing }
    }
}

/// Everything in `all` and `missing`, a requirement of `missing` in place
/// of those in `all` that name the same package; sorted, no duplicates.
pub(super) fn merged(all: &[String], missing: &[String]) -> Vec<String> {
    let mut out: Vec<String> = all
        .iter()
        .filter(|r| !missing.iter().any(|m| name_of(m) == name_of(r)))
        .chain(missing)
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The (normalized) package name a normalized requirement starts with.
fn name_of(req: &str) -> &str {
    let end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(req.len());
    &req[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn had(base: &[&str], all: &[&str]) -> SessionRequirements {
        SessionRequirements {
            base: v(base),
            all: v(all),
        }
    }

    #[test]
    fn requirements_accumulate() {
        assert_eq!(plan(None, &v(&["pandas"])), Plan::Base(v(&["pandas"])));
        let h = had(&["pandas"], &["pandas", "six"]);
        assert_eq!(plan(Some(h.clone()), &[]), Plan::Keep(h.clone()));
        assert_eq!(plan(Some(h.clone()), &v(&["six"])), Plan::Keep(h.clone()));
        assert_eq!(
            plan(Some(h.clone()), &v(&["pandas", "seaborn"])),
            Plan::Add {
                had: h,
                missing: v(&["seaborn"])
            }
        );
    }

    #[test]
    fn a_new_version_replaces_the_old_requirement_of_its_package() {
        assert_eq!(
            merged(
                &v(&["numpy==1.26.4", "pandas", "six"]),
                &v(&["numpy>=2", "x-y[a]"])
            ),
            v(&["numpy>=2", "pandas", "six", "x-y[a]"])
        );
        assert_eq!(name_of("requests[socks]>=2"), "requests");
        assert_eq!(name_of("a-b==1"), "a-b");
    }
}
