//! The jail's stdout and stderr pipes. While a cell runs, what arrives
//! goes to that cell (capped) up to the agent's end-of-cell marker. The
//! marker is made only once the cell's code is over ([`Pump::expect`]):
//! until then every byte is the cell's, so code that writes a marker of
//! its own cannot cut its output short. Between
//! cells nothing is read: output a background process writes then waits in
//! the pipe (a pipe holds 64 KiB), the writer blocks once it is full, and
//! the next cell's output begins with it. So a background flood costs the
//! supervisor nothing, and its process waits instead of burning CPU.

use super::output::{Capped, MarkerScan};
use crate::job::Stream;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, Notify};

/// Kept output as it arrives, for streaming to the caller.
pub(super) type OutputTx = mpsc::UnboundedSender<(Stream, Vec<u8>)>;

/// One pipe's reader task and where its bytes go.
#[derive(Debug)]
pub(super) struct Pump {
    stream: Stream,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    route: Mutex<Route>,
    /// Woken when the marker arrives or the pipe ends.
    changed: Notify,
    /// Woken when a cell begins: the reader reads again.
    resume: Notify,
}

#[derive(Debug)]
enum Route {
    /// No cell runs and nothing is read. `held` came through after the
    /// last cell's marker, in the same read: it goes to the next cell.
    Idle {
        held: Vec<u8>,
    },
    Cell(Capture),
    /// The pipe ended: python and every process that held it are gone.
    /// A cell that was running keeps what it got, for `end` to collect.
    Ended(Option<Capture>),
}

/// Where a cell's output stands against its marker.
#[derive(Debug)]
enum Scan {
    /// The cell runs: no marker exists yet, and every byte is its own.
    Unmarked,
    /// The marker was sent to the agent: bytes up to it are the cell's.
    Looking(MarkerScan),
    /// The marker came through: the cell's output is complete.
    Found,
}

#[derive(Debug)]
struct Capture {
    scan: Scan,
    kept: Capped,
    out: OutputTx,
    /// What followed the marker in its read (a background process's).
    after: Vec<u8>,
}

/// What one cell got from one stream.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

fn lock(m: &Mutex<Route>) -> MutexGuard<'_, Route> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pump {
    /// Starts the reader of `fd` (a pipe's read end); it reads only while
    /// a cell waits for its marker.
    pub fn start(stream: Stream, fd: OwnedFd) -> std::io::Result<Pump> {
        let mut rx = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
        let shared = Arc::new(Shared {
            route: Mutex::new(Route::Idle { held: Vec::new() }),
            changed: Notify::new(),
            resume: Notify::new(),
        });
        let sh = shared.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                loop {
                    let resumed = sh.resume.notified();
                    if sh.reading() {
                        break;
                    }
                    resumed.await;
                }
                let n = match rx.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                sh.feed(stream, &buf[..n]);
            }
            {
                let mut route = lock(&sh.route);
                let cell = match std::mem::replace(&mut *route, Route::Ended(None)) {
                    Route::Cell(c) => Some(c),
                    _ => None,
                };
                *route = Route::Ended(cell);
            }
            sh.changed.notify_waiters();
        });
        Ok(Pump {
            stream,
            shared,
            task,
        })
    }

    /// From now on, output belongs to the cell that begins, starting with
    /// what waited in the pipe since the last cell.
    pub fn begin(&self, cap: usize, out: OutputTx) {
        let mut route = lock(&self.shared.route);
        let held = match &mut *route {
            Route::Ended(_) => return,
            Route::Idle { held } => std::mem::take(held),
            Route::Cell(c) => std::mem::take(&mut c.after),
        };
        *route = Route::Cell(Capture {
            scan: Scan::Unmarked,
            kept: Capped::new(cap),
            out,
            after: Vec::new(),
        });
        drop(route);
        if !held.is_empty() {
            self.shared.feed(self.stream, &held);
        }
        self.shared.resume.notify_one();
    }

    /// The cell's code is over and the agent is told to write `marker`:
    /// output is the cell's up to it.
    pub fn expect(&self, marker: &str) {
        if let Route::Cell(c) = &mut *lock(&self.shared.route) {
            if matches!(c.scan, Scan::Unmarked) {
                c.scan = Scan::Looking(MarkerScan::new(marker));
            }
        }
    }

    /// Waits until the cell's marker came through (or the pipe ended), at
    /// most until `deadline`: code that closed or replaced the agent's copy
    /// of the pipe never sends one.
    pub async fn wait_marker(&self, deadline: tokio::time::Instant) {
        loop {
            let notified = self.shared.changed.notified();
            if self.marker_seen() {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    fn marker_seen(&self) -> bool {
        match &*lock(&self.shared.route) {
            Route::Cell(c) => matches!(c.scan, Scan::Found),
            Route::Idle { .. } | Route::Ended(_) => true,
        }
    }

    /// The cell is over: what it got. What came after its marker waits for
    /// the next cell, as does everything still in the pipe.
    pub fn end(&self) -> Captured {
        let mut route = lock(&self.shared.route);
        let prev = std::mem::replace(&mut *route, Route::Idle { held: Vec::new() });
        let mut c = match prev {
            Route::Cell(c) => c,
            Route::Ended(c) => {
                *route = Route::Ended(None);
                match c {
                    Some(c) => c,
                    None => return Captured::default(),
                }
            }
            idle @ Route::Idle { .. } => {
                *route = idle;
                return Captured::default();
            }
        };
        if let Route::Idle { held } = &mut *route {
            *held = std::mem::take(&mut c.after);
        }
        drop(route);
        if let Scan::Looking(scan) = std::mem::replace(&mut c.scan, Scan::Found) {
            // No marker: what the scanner held back was output.
            let (stream, kept, out) = (self.stream, &mut c.kept, &c.out);
            scan.finish(&mut |b| forward(stream, kept, out, b));
        }
        let (bytes, truncated) = c.kept.into_parts();
        Captured { bytes, truncated }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    /// A cell runs or waits for its marker: the pipe is read.
    fn reading(&self) -> bool {
        matches!(&*lock(&self.route), Route::Cell(c) if !matches!(c.scan, Scan::Found))
    }

    fn feed(&self, stream: Stream, chunk: &[u8]) {
        let mut route = lock(&self.route);
        let c = match &mut *route {
            Route::Cell(c) => c,
            // A read under way when a cell ended early (a kill): at most
            // one read's worth, for the next cell if there is one.
            Route::Idle { held } => return held.extend_from_slice(chunk),
            Route::Ended(_) => return,
        };
        let (kept, out) = (&mut c.kept, &c.out);
        let scan = match &mut c.scan {
            Scan::Unmarked => return forward(stream, kept, out, chunk),
            Scan::Looking(scan) => scan,
            Scan::Found => return c.after.extend_from_slice(chunk),
        };
        if let Some(rest) = scan.feed(chunk, &mut |b| forward(stream, kept, out, b)) {
            c.scan = Scan::Found;
            c.after = rest;
            drop(route);
            self.changed.notify_waiters();
        }
    }
}

fn forward(stream: Stream, kept: &mut Capped, out: &OutputTx, bytes: &[u8]) {
    let taken = kept.push(bytes);
    if !taken.is_empty() {
        let _ = out.send((stream, taken.to_vec()));
    }
}
