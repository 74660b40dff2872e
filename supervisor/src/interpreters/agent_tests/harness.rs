//! Starting the agent and driving it as the supervisor will.

use crate::interpreters::agent::{AgentDir, CHANNEL_FD, IPYTHON_ENV, PREWARM_ENV};
use crate::interpreters::channel::{
    spawn_reader_within, AgentOutput, AgentWriter, CellDone, ChannelError, FromAgent, Incoming,
    Named, ToAgent, FRAME_DEADLINE,
};
use crate::interpreters::output::{new_marker, MarkerScan};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

pub(super) const PYTHON: &str = "/usr/bin/python3";

/// A hang guard only: every wait here ends long before it.
pub(super) const GUARD: Duration = Duration::from_secs(30);

/// Reads of this size split most markers across chunks.
const READ_BYTES: usize = 61;

/// Python that finds the agent's channel among the process's fds.
pub(super) const FIND_CHANNEL: &str = r#"
def _channel():
    import os
    for f in os.listdir('/proc/self/fd'):
        try:
            if os.readlink('/proc/self/fd/' + f).startswith('socket:'):
                return int(f)
        except OSError:
            pass
chan = _channel()
"#;

pub(super) struct Start {
    pub python: PathBuf,
    pub dir: PathBuf,
    pub prewarm: Option<String>,
    pub deadline: Duration,
    /// The IPython layer's site directory (PRIMS_IPYTHON): cells run
    /// through IPython.
    pub ipython: Option<PathBuf>,
}

impl Start {
    pub fn new(dir: &Path) -> Start {
        Start {
            python: PYTHON.into(),
            dir: dir.to_path_buf(),
            prewarm: None,
            deadline: FRAME_DEADLINE,
            ipython: None,
        }
    }

    /// With the tests' IPython layer (see [`ipython_site`]): cells run
    /// through IPython.
    pub fn ipython(dir: &Path) -> Start {
        Start {
            ipython: Some(ipython_site()),
            ..Start::new(dir)
        }
    }
}

/// The tests' IPython layer, which `scripts/ipython-site.sh` makes and
/// which must hold IPython: `$PRIMS_IPYTHON_SITE`, else
/// `/var/lib/prims-tests/ipython-site` (as `prims_tests::harness` finds it).
pub(super) fn ipython_site() -> PathBuf {
    let site = std::env::var_os("PRIMS_IPYTHON_SITE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/prims-tests/ipython-site"));
    assert!(
        site.join("IPython").is_dir(),
        "{} has no IPython: run scripts/ipython-site.sh (scripts/test.sh does)",
        site.display()
    );
    site
}

/// One cell's outcome and its output, cut at its markers.
#[derive(Debug)]
pub(super) struct CellRun {
    pub done: CellDone,
    pub stdout: String,
    pub stderr: String,
    /// Its `output` frames, in order.
    pub outputs: Vec<AgentOutput>,
}

/// What the agent's `ready` said.
#[derive(Debug)]
pub(super) struct Ready {
    pub python: String,
    pub imported: Vec<String>,
    pub failed: Vec<Named>,
    pub ipython: Option<String>,
    pub ipython_error: Option<String>,
}

/// A running agent and the supervisor's side of it.
pub(super) struct Live {
    pub pid: Pid,
    pub ready: Ready,
    pub frames: Incoming,
    pub stdout: Cutter,
    pub stderr: Cutter,
    writer: AgentWriter,
    next_id: u64,
    _child: tokio::process::Child,
}

impl Live {
    pub async fn start(dir: &Path) -> Live {
        Self::start_with(Start::new(dir)).await
    }

    pub async fn start_with(start: Start) -> Live {
        let (ours, theirs) = StdUnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let (rd, wr) = UnixStream::from_std(ours).unwrap().into_split();
        let mut frames = spawn_reader_within(rd, start.deadline);
        let theirs = OwnedFd::from(theirs);
        let mut child = spawn(&start, &theirs);
        drop(theirs);
        let stdout = Cutter::spawn(child.stdout.take().unwrap());
        let stderr = Cutter::spawn(child.stderr.take().unwrap());
        let pid = Pid::from_raw(child.id().unwrap() as i32);
        let ready = match tokio::time::timeout(GUARD, frames.recv()).await {
            Ok(Some(Ok(FromAgent::Ready {
                python,
                imported,
                failed,
                import_ms: _,
                ipython,
                ipython_error,
            }))) => Ready {
                python,
                imported,
                failed,
                ipython,
                ipython_error,
            },
            other => panic!("no ready from the agent: {other:?}"),
        };
        Live {
            pid,
            ready,
            frames,
            stdout,
            stderr,
            writer: AgentWriter::new(wr),
            next_id: 1,
            _child: child,
        }
    }

    /// Sends a cell without waiting.
    pub async fn send_cell(&mut self, code: &str) {
        let id = self.next_id;
        self.next_id += 1;
        let cell = ToAgent::Cell {
            id,
            code: code.into(),
        };
        self.writer.send(&cell).await.unwrap();
    }

    /// After a cell's `done`, as the supervisor does: a fresh marker for
    /// the agent to end the cell's output with; the marker.
    pub async fn mark(&mut self) -> String {
        let marker = new_marker();
        let mark = ToAgent::Mark {
            marker: marker.clone(),
        };
        self.writer.send(&mark).await.unwrap();
        marker
    }

    pub async fn next_frame(&mut self) -> Option<Result<FromAgent, ChannelError>> {
        tokio::time::timeout(GUARD, self.frames.recv())
            .await
            .expect("the channel reader hung")
    }

    /// The `done` of the cell sent last.
    pub async fn done(&mut self) -> CellDone {
        self.done_and_outputs().await.0
    }

    /// The `done` of the cell sent last, and the outputs it sent first.
    pub async fn done_and_outputs(&mut self) -> (CellDone, Vec<AgentOutput>) {
        let mut outputs = Vec::new();
        loop {
            match self.next_frame().await {
                Some(Ok(FromAgent::Output(o))) => {
                    assert_eq!(o.id, self.next_id - 1, "{o:?}");
                    outputs.push(o);
                }
                Some(Ok(FromAgent::Done(done))) => {
                    assert_eq!(done.id, self.next_id - 1, "{done:?}");
                    return (done, outputs);
                }
                other => panic!("expected done, got {other:?}"),
            }
        }
    }

    /// The output of the cell whose `done` came: marked, and cut there.
    pub async fn output(&mut self) -> (String, String) {
        let marker = self.mark().await;
        let out = self.stdout.until(&marker).await;
        let err = self.stderr.until(&marker).await;
        (text(out), text(err))
    }

    pub async fn cell(&mut self, code: &str) -> CellRun {
        self.send_cell(code).await;
        let (done, outputs) = self.done_and_outputs().await;
        let (stdout, stderr) = self.output().await;
        CellRun {
            done,
            stdout,
            stderr,
            outputs,
        }
    }

    /// A cell that must succeed; its result.
    pub async fn ok(&mut self, code: &str) -> Option<String> {
        let run = self.cell(code).await;
        assert_eq!(
            run.done.status,
            crate::interpreters::channel::CellStatus::Ok,
            "{code}: {run:?}"
        );
        run.done.result
    }

    pub async fn request(&mut self, msg: &ToAgent) -> FromAgent {
        self.writer.send(msg).await.unwrap();
        match self.next_frame().await {
            Some(Ok(reply)) => reply,
            other => panic!("no reply to {msg:?}: {other:?}"),
        }
    }

    pub fn signal(&self, sig: Signal) {
        kill(self.pid, sig).unwrap();
    }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("output is UTF-8")
}

/// The agent's directory, written once for every test of this process.
fn agent_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<(tempfile::TempDir, AgentDir)> = std::sync::OnceLock::new();
    let (_, agent) = DIR.get_or_init(|| {
        let home = tempfile::tempdir().unwrap();
        let agent = AgentDir::install(home.path()).unwrap();
        (home, agent)
    });
    &agent.dir
}

fn spawn(start: &Start, theirs: &OwnedFd) -> tokio::process::Child {
    let fd = theirs.as_raw_fd();
    let mut cmd = tokio::process::Command::new(&start.python);
    cmd.arg("-I")
        .arg("-u")
        .arg(agent_dir())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(&start.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(prewarm) = &start.prewarm {
        cmd.env(PREWARM_ENV, prewarm);
    }
    if let Some(ipython) = &start.ipython {
        cmd.env(IPYTHON_ENV, ipython);
        cmd.env("IPYTHONDIR", start.dir.join(".ipython"));
    }
    // SAFETY: between fork and exec only async-signal-safe calls (dup2,
    // fcntl) on an fd the parent keeps open until the spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself would leave close-on-exec set.
            let moved = if fd == CHANNEL_FD {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, CHANNEL_FD)
            };
            if moved < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// One of the agent's output pipes, read in small chunks by a task and cut
/// into cells at their markers.
pub(super) struct Cutter {
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    /// Read but not yet given to a cell.
    carry: Vec<u8>,
}

impl Cutter {
    fn spawn(mut r: impl AsyncRead + Unpin + Send + 'static) -> Cutter {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut buf = [0u8; READ_BYTES];
            while let Ok(n @ 1..) = r.read(&mut buf).await {
                if tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Cutter {
            rx,
            carry: Vec::new(),
        }
    }

    async fn recv(&mut self) -> Option<Vec<u8>> {
        tokio::time::timeout(GUARD, self.rx.recv())
            .await
            .expect("output hung")
    }

    /// The bytes up to `marker`; what follows it stays for the next cell.
    pub async fn until(&mut self, marker: &str) -> Vec<u8> {
        let mut scan = MarkerScan::new(marker);
        let mut out = Vec::new();
        let mut chunk = std::mem::take(&mut self.carry);
        loop {
            if let Some(rest) = scan.feed(&chunk, &mut |b| out.extend_from_slice(b)) {
                self.carry = rest;
                return out;
            }
            chunk = self
                .recv()
                .await
                .expect("the stream ended before the marker");
        }
    }

    /// Waits until `needle` has been read (it stays for the cell).
    pub async fn wait_for(&mut self, needle: &str) {
        while !self
            .carry
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
        {
            let chunk = self.recv().await.expect("the stream ended first");
            self.carry.extend(chunk);
        }
    }

    /// Everything until the stream ends.
    pub async fn rest(&mut self) -> Vec<u8> {
        let mut all = std::mem::take(&mut self.carry);
        while let Some(chunk) = self.recv().await {
            all.extend(chunk);
        }
        all
    }
}
