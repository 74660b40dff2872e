//! Running a child process with a hard timeout and collecting what it did.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a child process did.
#[derive(Debug, Clone)]
pub struct RawOutput {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The helper killed the child after [`HARD_TIMEOUT`](crate::HARD_TIMEOUT)
    /// (or the given timeout).
    pub killed_by_helper: bool,
    pub elapsed: Duration,
}

impl RawOutput {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    pub fn describe(&self) -> String {
        format!(
            "exit code {:?}, signal {:?}, killed_by_helper {}, elapsed {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            self.signal,
            self.killed_by_helper,
            self.elapsed,
            clip(&self.stdout_str(), 6000),
            clip(&self.stderr_str(), 6000)
        )
    }
}

pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... [{} more bytes]", &s[..end], s.len() - end)
}

/// Runs `cmd` with stdin from /dev/null, collecting stdout and stderr, and
/// kills it (by its own pid) after `timeout`.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> RawOutput {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("stdout pipe");
    let mut err = child.stderr.take().expect("stderr pipe");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut killed = false;
    let status = loop {
        match child.try_wait().expect("try_wait") {
            Some(st) => break st,
            None => {
                if start.elapsed() > timeout && !killed {
                    let _ = child.kill();
                    killed = true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    let elapsed = start.elapsed();
    let stdout = t_out.join().expect("stdout reader");
    let stderr = t_err.join().expect("stderr reader");
    RawOutput {
        code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        killed_by_helper: killed,
        elapsed,
    }
}
