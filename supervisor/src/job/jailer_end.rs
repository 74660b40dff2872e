//! How the end of a jailer reads as an outcome: the record it wrote when
//! it wrote one, else what ended it.

use prims_protocol::jail::{Outcome, SetupError, Status};
use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

/// The record a jailer wrote to its outcome memfd, if it wrote a whole one.
pub(super) fn record(file: &mut File) -> Option<Outcome> {
    let mut json = Vec::new();
    file.rewind()
        .and_then(|_| file.read_to_end(&mut json))
        .ok()?;
    serde_json::from_slice(&json).ok()
}

fn jailer_error(message: String) -> Outcome {
    Outcome {
        status: Status::SetupError,
        setup_error: Some(SetupError {
            step: "jailer".into(),
            errno: None,
            message,
        }),
        ..Default::default()
    }
}

/// The watchdog killed a jailer that outlived its wall time by `limit`.
pub(super) fn hung(limit: Duration) -> Outcome {
    jailer_error(format!(
        "jailer: the jailer did not finish within {} s and was killed",
        limit.as_secs()
    ))
}

/// The jailer ended without a record, and not by our hand.
pub(super) fn crashed(status: ExitStatus) -> Outcome {
    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (_, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended".to_string(),
    };
    jailer_error(format!(
        "jailer: the jailer {how} without reporting an outcome"
    ))
}

/// The jailer could not be waited for.
pub(super) fn unwaitable(e: &io::Error) -> Outcome {
    jailer_error(format!("jailer: waiting for the jailer failed: {e}"))
}

/// Its owner killed a spawned jail before the jailer wrote a record. The
/// init's parent-death signal took the pid namespace down, so python did
/// end by SIGKILL.
pub(super) fn killed() -> Outcome {
    Outcome {
        status: Status::Signal,
        signal: Some(libc::SIGKILL),
        ..Default::default()
    }
}
