//! The fork wing's messages (the architecture guide's "Fork templates" and
//! "Fresh in place"). A template's forked child, *python's parent*, speaks
//! twice:
//!
//! - with the jailer that adopts it, on the `--adopt-fd` socket:
//!   [`FromChild::Hello`], the jailer's [`ToChild::Plan`],
//!   [`FromChild::Unshared`], the jailer's [`ToChild::Go`]; then, once
//!   python ends, how it ended ([`FromChild::Exited`] or
//!   [`FromChild::Signaled`]);
//! - with the supervisor, on the second socket of its `fork` frame:
//!   [`ToParent::Fresh`] asks for a fresh python in place of the one it
//!   has, and [`FromParent`] answers.
//!
//! Each message is one JSON object in one `SOCK_SEQPACKET` datagram, with
//! fds beside it (`SCM_RIGHTS`): which fds each carries is said where it
//! is declared. The child is as trusted as its template and no more: each
//! side reads the other's messages within these bounds and shapes. The
//! agent's half (`prims_agent/fork/`) spells the same names and limits, and
//! a test of the supervisor checks that the two agree.

use serde::{Deserialize, Serialize};

/// The largest message on either socket (a plan, with its seccomp
/// programs).
pub const MESSAGE_MAX: usize = 256 << 10;

/// The most fds a message to the child carries: a plan's stdout, stderr,
/// channel, and a job cgroup's v1 `tasks` files (memory, pids, cpu,
/// cpuacct), with room to spare.
pub const TO_CHILD_FDS_MAX: usize = 8;

/// The most fds a message from the child or its parent carries (the
/// parent's answer: a pidfd of the fresh python).
pub const FROM_CHILD_FDS_MAX: usize = 4;

/// The most characters of a `why` that a reader keeps.
pub const WHY_MAX_CHARS: usize = 512;

/// What the child says to its adopting jailer. (Variants without fields
/// are written `{}` so that a stray field is refused too.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromChild {
    /// Its first word: the kernel attaches its pid (`SCM_CREDENTIALS`).
    Hello {},
    /// It unshared its user, mount, net, IPC and UTS namespaces.
    Unshared {},
    /// python exited with `code`.
    Exited { code: i32 },
    /// python was killed by `signal`.
    Signaled { signal: i32 },
    /// It gave up; nothing of the jail is its any more.
    Failed { why: String },
}

/// What the adopting jailer (or the jail's init) says to the child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToChild {
    /// What the child applies to itself. Carries its stdout, stderr and
    /// channel, then `attach` v1 `tasks` files of its job cgroup to move
    /// itself into (it writes `0` to each).
    Plan {
        rlimits: Vec<Rlimit>,
        /// The highest capability number the kernel knows.
        cap_last_cap: u32,
        /// The job's seccomp programs, each in hex, in the order they are
        /// installed.
        filters: Vec<String>,
        attach: u32,
    },
    /// The jail is built around it. Carries the init's pid namespace, then
    /// python's Landlock ruleset when there is one.
    Go {},
    /// The jail's init gave up: the child ends.
    Stop {},
}

/// One resource limit; `None` is unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rlimit {
    /// The name python's `resource` module knows, after `RLIMIT_`, in
    /// lower case (`nofile`).
    pub resource: String,
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// What the supervisor asks of python's parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToParent {
    /// A fresh python in place of the one it has. Carries the fresh
    /// python's stdout, stderr and channel.
    Fresh {},
}

/// python's parent's answer to [`ToParent::Fresh`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromParent {
    /// It forked the fresh python, host pid unknown to it: `pid` is the
    /// jail's. Carries a pidfd of it when the parent could open one.
    Forked { pid: u32 },
    /// It could not; the jail is to end.
    Failed { why: String },
}

/// `why`, cut to [`WHY_MAX_CHARS`] characters.
pub fn capped_why(why: &str) -> String {
    why.chars().take(WHY_MAX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_the_agent_writes_them() {
        let read = |s: &str| serde_json::from_str::<FromChild>(s).unwrap();
        assert_eq!(read(r#"{"op":"hello"}"#), FromChild::Hello {});
        assert_eq!(
            read(r#"{"op":"exited","code":3}"#),
            FromChild::Exited { code: 3 }
        );
        assert_eq!(
            read(r#"{"op":"failed","why":"no"}"#),
            FromChild::Failed { why: "no".into() }
        );
        let answer: FromParent = serde_json::from_str(r#"{"op":"forked","pid":3}"#).unwrap();
        assert_eq!(answer, FromParent::Forked { pid: 3 });
    }

    #[test]
    fn unknown_ops_and_fields_are_refused() {
        for bad in [
            r#"{"op":"hello","pid":1}"#,
            r#"{"op":"plan"}"#,
            r#"{"failed":"old shape"}"#,
            r#"{"op":"exited"}"#,
            r#"[]"#,
        ] {
            assert!(serde_json::from_str::<FromChild>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_plan_writes_unlimited_as_null() {
        let plan = ToChild::Plan {
            rlimits: vec![Rlimit {
                resource: "nproc".into(),
                soft: Some(5),
                hard: None,
            }],
            cap_last_cap: 40,
            filters: vec!["00".into()],
            attach: 0,
        };
        assert_eq!(
            serde_json::to_string(&plan).unwrap(),
            r#"{"op":"plan","rlimits":[{"resource":"nproc","soft":5,"hard":null}],"cap_last_cap":40,"filters":["00"],"attach":0}"#
        );
    }

    #[test]
    fn whys_are_capped_by_characters() {
        assert_eq!(capped_why(&"é".repeat(600)).chars().count(), 512);
    }
}
