//! One `run_code` call of the live benchmark, checked: its stdout, its
//! status and what happened to the session's interpreter must be exactly
//! what the case expects, or the benchmark stops.

use crate::mcp::{call_run_code, Mcp};
use anyhow::{bail, Result};
use serde_json::Value;

/// Code and the stdout it must print.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cell {
    pub code: &'static str,
    pub stdout: &'static str,
}

pub(crate) const PRINT_1: Cell = Cell {
    code: "print(1)",
    stdout: "1\n",
};

/// The pandas cell: an import and a small DataFrame.
pub(crate) const PANDAS: Cell = Cell {
    code: "import pandas as pd; print(pd.DataFrame({'a': [1, 2]}).a.sum())",
    stdout: "3\n",
};

/// What the call must report about the session's interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// The interpreter of the previous call: `state: "kept"`.
    Kept,
    /// The session's first call: `state: "new"`, `first_call`.
    FirstCall,
    /// `fresh: true` replaced the interpreter: `state: "reset"`.
    FreshRequested,
}

impl Expect {
    fn state(self) -> (&'static str, Option<&'static str>) {
        match self {
            Expect::Kept => ("kept", None),
            Expect::FirstCall => ("new", Some("first_call")),
            Expect::FreshRequested => ("reset", Some("fresh_requested")),
        }
    }
}

/// A finished, checked call.
#[derive(Debug)]
pub(crate) struct Done {
    pub ms: f64,
    pub session_id: String,
}

/// Runs `cell` in `session` (a new one when `None`), with `fresh: true`
/// when `fresh`; fails unless the result is what `expect` says.
pub(crate) async fn run(
    c: &Mcp,
    session: Option<&str>,
    cell: Cell,
    fresh: bool,
    expect: Expect,
) -> Result<Done> {
    let mut args = serde_json::Map::new();
    args.insert("code".into(), cell.code.into());
    if let Some(s) = session {
        args.insert("session_id".into(), s.into());
    }
    if fresh {
        args.insert("fresh".into(), true.into());
    }
    let (ms, v) = call_run_code(c, args).await?;
    check(&v, cell, expect, session)?;
    let Some(session_id) = v["session_id"].as_str() else {
        bail!("no session_id in {v}");
    };
    Ok(Done {
        ms,
        session_id: session_id.to_owned(),
    })
}

fn check(v: &Value, cell: Cell, expect: Expect, session: Option<&str>) -> Result<()> {
    let (state, reason) = expect.state();
    let problems: Vec<String> = [
        (v["status"] != "ok").then(|| format!("status {}", v["status"])),
        (v["stdout"] != cell.stdout).then(|| format!("stdout {}", v["stdout"])),
        (v["stderr"] != "").then(|| format!("stderr {}", v["stderr"])),
        (v["state"] != state).then(|| format!("state {} (expected {state:?})", v["state"])),
        (v["state_reason"].as_str() != reason)
            .then(|| format!("state_reason {} (expected {reason:?})", v["state_reason"])),
        session
            .filter(|s| v["session_id"] != *s)
            .map(|s| format!("session_id {} (expected {s:?})", v["session_id"])),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !problems.is_empty() {
        bail!(
            "`{}` (expecting {expect:?}) answered unexpectedly: {}; whole result: {v}",
            cell.code,
            problems.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(state: &str, reason: Option<&str>, stdout: &str) -> Value {
        json!({
            "status": "ok", "stdout": stdout, "stderr": "", "session_id": "s1",
            "state": state, "state_reason": reason,
        })
    }

    #[test]
    fn accepts_exactly_the_expected_state_and_output() {
        let kept = result("kept", None, "1\n");
        check(&kept, PRINT_1, Expect::Kept, Some("s1")).expect("kept");
        let first = result("new", Some("first_call"), "3\n");
        check(&first, PANDAS, Expect::FirstCall, None).expect("first call");
        let fresh = result("reset", Some("fresh_requested"), "1\n");
        check(&fresh, PRINT_1, Expect::FreshRequested, Some("s1")).expect("fresh");
    }

    #[test]
    fn refuses_a_reset_where_state_was_kept() {
        let reset = result("reset", Some("stopped_for_room"), "1\n");
        let e = check(&reset, PRINT_1, Expect::Kept, Some("s1")).unwrap_err();
        assert!(e.to_string().contains("state \"reset\""), "{e}");
        assert!(e.to_string().contains("state_reason"), "{e}");
    }

    #[test]
    fn refuses_wrong_output_status_or_session() {
        let mut v = result("kept", None, "2\n");
        let e = check(&v, PRINT_1, Expect::Kept, Some("s1")).unwrap_err();
        assert!(e.to_string().contains("stdout \"2\\n\""), "{e}");
        v = result("kept", None, "1\n");
        v["status"] = "error".into();
        v["stderr"] = "Traceback".into();
        let e = check(&v, PRINT_1, Expect::Kept, Some("s1")).unwrap_err();
        assert!(e.to_string().contains("status \"error\""), "{e}");
        assert!(e.to_string().contains("stderr \"Traceback\""), "{e}");
        let e = check(
            &result("kept", None, "1\n"),
            PRINT_1,
            Expect::Kept,
            Some("s2"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("session_id"), "{e}");
    }
}
