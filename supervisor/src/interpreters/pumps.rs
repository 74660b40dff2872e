//! The jail's stdout and stderr pipes, read for the interpreter's whole
//! life. While a cell runs, what arrives goes to that cell (capped) up to
//! the agent's end-of-cell marker; between cells it is read and dropped, so
//! a background process never blocks on a full pipe.

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
}

#[derive(Debug)]
enum Route {
    /// No cell runs: bytes are dropped.
    Idle,
    Cell(Capture),
    /// The pipe ended: python and every process that held it are gone.
    /// A cell that was running keeps what it got, for `end` to collect.
    Ended(Option<Capture>),
}

#[derive(Debug)]
struct Capture {
    scan: Option<MarkerScan>,
    kept: Capped,
    out: OutputTx,
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
    /// Starts reading `fd` (a pipe's read end).
    pub fn start(stream: Stream, fd: OwnedFd) -> std::io::Result<Pump> {
        let mut rx = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
        let shared = Arc::new(Shared {
            route: Mutex::new(Route::Idle),
            changed: Notify::new(),
        });
        let sh = shared.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match rx.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                sh.feed(stream, &buf[..n]);
            }
            {
                let mut route = lock(&sh.route);
                let cell = match std::mem::replace(&mut *route, Route::Idle) {
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

    /// From now on, output belongs to the cell whose marker is `marker`.
    pub fn begin(&self, marker: &str, cap: usize, out: OutputTx) {
        let mut route = lock(&self.shared.route);
        if !matches!(*route, Route::Ended(_)) {
            *route = Route::Cell(Capture {
                scan: Some(MarkerScan::new(marker)),
                kept: Capped::new(cap),
                out,
            });
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
            Route::Cell(c) => c.scan.is_none(),
            Route::Idle | Route::Ended(_) => true,
        }
    }

    /// The cell is over: what it got; later bytes are dropped.
    pub fn end(&self) -> Captured {
        let mut route = lock(&self.shared.route);
        let ended = matches!(*route, Route::Ended(_));
        let next = if ended {
            Route::Ended(None)
        } else {
            Route::Idle
        };
        let prev = std::mem::replace(&mut *route, next);
        drop(route);
        match prev {
            Route::Cell(mut c) | Route::Ended(Some(mut c)) => {
                if let Some(scan) = c.scan.take() {
                    // No marker: what the scanner held back was output.
                    let (stream, kept, out) = (self.stream, &mut c.kept, &c.out);
                    scan.finish(&mut |b| forward(stream, kept, out, b));
                }
                let (bytes, truncated) = c.kept.into_parts();
                Captured { bytes, truncated }
            }
            _ => Captured::default(),
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    fn feed(&self, stream: Stream, chunk: &[u8]) {
        let mut route = lock(&self.route);
        let Route::Cell(c) = &mut *route else {
            return;
        };
        let Some(scan) = c.scan.as_mut() else {
            // After the marker: a background process's output, dropped.
            return;
        };
        let (kept, out) = (&mut c.kept, &c.out);
        if scan
            .feed(chunk, &mut |b| forward(stream, kept, out, b))
            .is_some()
        {
            c.scan = None;
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
