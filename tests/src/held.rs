//! [`Held`]: a jail kept running while the host looks at it. The job's
//! python calls `hold()` (from [`HOLD_PY`]) once it is ready; that creates
//! `ready` in its workspace and waits until the host creates `release`.

use crate::harness::Job;
use crate::host::workspace_dir;
use crate::outcome::Run;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Python for the job's side (after [`PY_PRELUDE`](crate::PY_PRELUDE)).
/// `hold()` gives up after 30 s, so a test that dies never leaves a jail
/// waiting; give the job a longer wall time than that.
pub const HOLD_PY: &str = r#"
import time as _time
def hold():
    open('ready', 'w').close()
    _end = _time.monotonic() + 30
    while not os.path.exists('release') and _time.monotonic() < _end:
        _time.sleep(0.005)
    kv('released', os.path.exists('release'))
"#;

/// How long [`Held::start`] waits for `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running jail whose python is inside `hold()`.
pub struct Held {
    ws: tempfile::TempDir,
    job: Option<JoinHandle<Run>>,
}

impl Held {
    /// Run `job` in a fresh workspace and return once its python is inside
    /// `hold()`. Panics, with the run's outcome, if the run ends first.
    pub fn start(job: Job) -> Held {
        let ws = workspace_dir();
        let job = job.workspace(ws.path());
        let mut held = Held {
            ws,
            job: Some(std::thread::spawn(move || job.run())),
        };
        let ready = held.ws.path().join("ready");
        let deadline = Instant::now() + READY_TIMEOUT;
        while !ready.exists() {
            if held.job.as_ref().is_some_and(JoinHandle::is_finished) {
                let run = held.join();
                panic!("the job ended before calling hold():\n{}", run.describe());
            }
            assert!(
                Instant::now() < deadline,
                "the job did not call hold() within {READY_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        held
    }

    /// The job's workspace on the host.
    pub fn workspace(&self) -> &Path {
        self.ws.path()
    }

    /// The held python's pid on the host: the one python process working
    /// in this workspace. Found by its working directory, not its command
    /// line, so it is found alike in a one-shot run (whose command line
    /// carries the script) and in a live interpreter (whose carries the
    /// agent's).
    pub fn python_pid(&self) -> i32 {
        let ws = std::fs::metadata(self.ws.path()).expect("the workspace");
        let mut found = Vec::new();
        for ent in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Ok(pid) = ent.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let (Ok(cwd), Ok(exe)) = (
                std::fs::metadata(ent.path().join("cwd")),
                std::fs::read_link(ent.path().join("exe")),
            ) else {
                continue;
            };
            let python = exe
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python"));
            if python && (cwd.dev(), cwd.ino()) == (ws.dev(), ws.ino()) {
                found.push((pid, exe));
            }
        }
        assert_eq!(
            found.len(),
            1,
            "python processes in {}: {found:?}",
            self.ws.path().display()
        );
        found[0].0
    }

    /// Let python leave `hold()` and return the finished run.
    pub fn release(mut self) -> Run {
        std::fs::write(self.ws.path().join("release"), b"").expect("writing release");
        self.join()
    }

    fn join(&mut self) -> Run {
        let handle = self.job.take().expect("the job is joined once");
        match handle.join() {
            Ok(run) => run,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Held {
    /// A test that fails while holding still lets the jail go and waits for
    /// it, so no jail outlives the test.
    fn drop(&mut self) {
        if let Some(handle) = self.job.take() {
            let _ = std::fs::write(self.ws.path().join("release"), b"");
            let _ = handle.join();
        }
    }
}
