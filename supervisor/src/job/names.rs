//! The names of job cgroups, all made by [`JobNames::next`].
//!
//! A supervisor names its jobs `job-<instance id>-<tag>-<n>`: the id (see
//! [`super::instance`]) has a fixed length and ends at a `-`, so a name
//! matches one instance exactly and one id is never a prefix of another's
//! names. `prims run`, which is no supervisor instance, names its jobs
//! `run-<pid>-<tag>-<n>`, which no supervisor's start-up sweep touches.

use super::instance::{is_lower_hex, InstanceId, ID_LEN};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Every supervisor's job cgroup names start with this, then the instance id.
const JOB_PREFIX: &str = "job-";
/// Names of the install and compile jails of an earlier version, which
/// did not carry an instance id.
const OLD_BUILD_PREFIX: &str = "envbuild-";
/// At most this much of a tag goes into a name, which keeps every name
/// within the 64 characters a job cgroup name may have.
const MAX_TAG: usize = 20;

/// Makes this process's job names: a fixed prefix, a tag saying what the
/// job is, and a number no other job of this process had. Clones share
/// the count.
#[derive(Debug, Clone)]
pub struct JobNames {
    prefix: String,
    next: Arc<AtomicU64>,
}

/// Whose job a cgroup under the parent is, by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// This instance's: a leftover of an earlier start of it.
    This,
    /// Another supervisor instance's, on the same parent.
    Other(InstanceId),
    /// A supervisor's of an earlier version, whose names say nothing of
    /// whose they are.
    Unknown,
    /// No supervisor's (`prims run`'s, or something else's).
    NotAJob,
}

impl JobNames {
    /// The names of supervisor instance `id`'s jobs.
    pub fn of_instance(id: &InstanceId) -> JobNames {
        JobNames::with_prefix(format!("{JOB_PREFIX}{id}-"))
    }

    /// The names of a process that is no supervisor instance (`prims run`).
    pub fn of_process() -> JobNames {
        JobNames::with_prefix(format!("run-{}-", std::process::id()))
    }

    fn with_prefix(prefix: String) -> JobNames {
        JobNames {
            prefix,
            next: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A live interpreter's job, for the session named `session`.
    pub fn interpreter(&self, session: &str) -> String {
        self.next(&format!("i{}", session.get(..8).unwrap_or(session)))
    }

    /// Step `step` of the build of environment `key`.
    pub fn build(&self, key: &str, step: &str) -> String {
        self.next(&format!("b{}-{step}", key.get(..8).unwrap_or(key)))
    }

    /// A job that takes the place of `name`, one of ours whose cgroup may
    /// still be going away (a failed start's jailer removes it as it ends):
    /// the same tag, the next count.
    pub fn again(&self, name: &str) -> String {
        let tag = name
            .strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.rsplit_once('-'))
            .map_or("again", |(tag, _)| tag);
        self.next(tag)
    }

    /// A script's job (`prims run`).
    pub fn script(&self) -> String {
        self.next("py")
    }

    /// The one place a job name is made. Only `[A-Za-z0-9_-]` of `tag`
    /// is kept, and at most [`MAX_TAG`] of it.
    fn next(&self, tag: &str) -> String {
        let tag: String = tag
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(MAX_TAG)
            .collect();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}{tag}-{n}", self.prefix)
    }
}

/// Whose job cgroup `name` is, seen from instance `me`.
pub fn owner(me: &InstanceId, name: &str) -> Owner {
    if let Some(rest) = name.strip_prefix(JOB_PREFIX) {
        let id = rest.get(..ID_LEN).filter(|id| is_lower_hex(id, ID_LEN));
        let tail = rest.get(ID_LEN..).and_then(|t| t.strip_prefix('-'));
        match (id.and_then(InstanceId::parse), tail) {
            (Some(id), Some(t)) if !t.is_empty() => {
                if id == *me {
                    Owner::This
                } else {
                    Owner::Other(id)
                }
            }
            _ => Owner::Unknown,
        }
    } else if name.starts_with(OLD_BUILD_PREFIX) {
        Owner::Unknown
    } else {
        Owner::NotAJob
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> InstanceId {
        InstanceId::parse(s).unwrap()
    }

    #[test]
    fn names_carry_the_instance_and_stay_valid_cgroup_names() {
        let me = id("0123456789abcdef");
        let names = JobNames::of_instance(&me);
        let session = "f".repeat(32);
        let key = "a".repeat(64);
        let made = [
            names.interpreter(&session),
            names.build(&key, "compile"),
            names.interpreter("x/../y z"),
            names.build("k", &"s".repeat(100)),
            names.script(),
        ];
        assert_eq!(made[0], "job-0123456789abcdef-iffffffff-0");
        assert_eq!(made[1], "job-0123456789abcdef-baaaaaaaa-compile-1");
        for n in &made {
            prims_cgroup::validate_name(n).unwrap();
            assert_eq!(owner(&me, n), Owner::This, "{n}");
        }
        let mut unique = made.to_vec();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), made.len(), "{made:?}");
        // The longest a name can be: a tag of MAX_TAG, the largest count.
        names.next.store(u64::MAX, Ordering::Relaxed);
        prims_cgroup::validate_name(&names.next(&"t".repeat(99))).unwrap();
    }

    #[test]
    fn a_job_again_keeps_its_tag_under_a_new_count() {
        let me = id("0123456789abcdef");
        let names = JobNames::of_instance(&me);
        let first = names.interpreter(&"f".repeat(32));
        let again = names.again(&first);
        assert_eq!(again, "job-0123456789abcdef-iffffffff-1");
        assert_eq!(owner(&me, &again), Owner::This);
        // A name not made here still gets a valid one of ours.
        let stranger = names.again("elsewhere");
        prims_cgroup::validate_name(&stranger).unwrap();
        assert_eq!(owner(&me, &stranger), Owner::This);
    }

    #[test]
    fn clones_share_the_count() {
        let names = JobNames::of_instance(&id("0123456789abcdef"));
        let other = names.clone();
        assert_ne!(names.script(), other.script());
    }

    #[test]
    fn another_instance_never_matches_even_with_a_common_prefix() {
        let me = id("0123456789abcdef");
        let them = id("0123456789abcdee");
        let theirs = JobNames::of_instance(&them).interpreter("abcdef0123");
        assert_eq!(owner(&me, &theirs), Owner::Other(them.clone()));
        // An id that starts like ours, followed by more characters, is
        // not ours: ids have one length and end at a `-`.
        assert_eq!(owner(&me, "job-0123456789abcdef0-i1-0"), Owner::Unknown);
        assert_eq!(owner(&me, "job-0123456789abcde-i1-0"), Owner::Unknown);
        assert_eq!(owner(&me, "job-0123456789abcdef-"), Owner::Unknown);
        assert_eq!(owner(&me, "job-0123456789ABCDEF-i1-0"), Owner::Unknown);
    }

    #[test]
    fn an_earlier_versions_names_are_nobodys_known_and_scripts_are_no_jobs() {
        let me = id("0123456789abcdef");
        // An earlier version's: eight characters of the session, a count.
        assert_eq!(owner(&me, "job-0a1b2c3d-i7"), Owner::Unknown);
        assert_eq!(
            owner(&me, "envbuild-0123456789abcdef-uv-0011223344556677"),
            Owner::Unknown
        );
        for other in ["run-42", "run-42-py-0", "supervisor", "prims-self", "job"] {
            assert_eq!(owner(&me, other), Owner::NotAJob, "{other}");
        }
        assert_eq!(owner(&me, &JobNames::of_process().script()), Owner::NotAJob);
    }
}
