//! Shared by the socket tests: a server on a temp socket with a handler that
//! exercises the transport only, and raw-socket helpers.
#![allow(dead_code)]

use prims_protocol::client::Client;
use prims_protocol::frame;
use prims_protocol::wire::{
    ErrorCode, ErrorReply, Event, Hello, MountSize, OutputStream, Reply, RequestBody, Response,
    RunReply, Stats, Welcome, PROTOCOL_VERSION,
};
use prims_supervisor::server::{serve, ConnectionLimits, Ctx, Handler, ServerConfig, ServerError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Run codes the test handler understands; anything else is echoed.
pub const HANG: &str = "hang";
pub const PANIC: &str = "panic";
pub const FROM_THREAD: &str = "thread";
/// A `write_mount` to this session fails at once, before reading any chunk.
pub const REFUSE: &str = "refuse";

#[derive(Default)]
pub struct TestHandler {
    pub stats_calls: AtomicU64,
    /// The session id of every `hang` run that saw its token cancelled.
    pub cancelled: Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Each finished upload: its path and the chunks as they arrived.
    pub mounts: Mutex<Vec<(String, Vec<Vec<u8>>)>>,
}

fn err(code: ErrorCode, message: &str) -> ErrorReply {
    ErrorReply {
        code,
        message: message.into(),
    }
}

pub fn run_reply(stdout: &[u8]) -> RunReply {
    RunReply {
        outcome: Default::default(),
        stdout: stdout.to_vec(),
        stderr: Vec::new(),
        stdout_truncated: false,
        stderr_truncated: false,
        files: Vec::new(),
        env_built: false,
        interpreter: prims_protocol::wire::Interpreter {
            state: prims_protocol::wire::InterpreterState::Kept,
            reason: None,
            warm: false,
            result: None,
            result_truncated: false,
            restored: Vec::new(),
            not_restored: Vec::new(),
            reason_message: None,
            installed: Vec::new(),
            saved_at: None,
            last_run_lost: false,
        },
        network: None,
        outputs: Vec::new(),
        outputs_dropped: 0,
    }
}

pub fn output(data: &[u8]) -> Event {
    Event::Output {
        stream: OutputStream::Stdout,
        data: data.to_vec(),
    }
}

impl Handler for TestHandler {
    async fn handle(&self, body: RequestBody, mut ctx: Ctx) -> Result<Reply, ErrorReply> {
        match body {
            RequestBody::Stats => {
                let n = self.stats_calls.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(Reply::Stats(Stats {
                    runs_total: n,
                    ..Default::default()
                }))
            }
            RequestBody::Run(req) if req.code == HANG => {
                ctx.events.send(Event::Started).await;
                ctx.cancel.cancelled().await;
                if let Some(tx) = self.cancelled.lock().unwrap().as_ref() {
                    let _ = tx.send(req.session_id);
                }
                Err(err(ErrorCode::Cancelled, "cancelled"))
            }
            RequestBody::Run(req) if req.code == PANIC => panic!("test handler asked to panic"),
            RequestBody::Run(req) if req.code == FROM_THREAD => {
                let events = ctx.events.clone();
                tokio::task::spawn_blocking(move || {
                    (0..3u8).for_each(|i| events.blocking_send(output(&[i])))
                })
                .await
                .unwrap();
                Ok(Reply::Run(run_reply(b"thread")))
            }
            RequestBody::Run(req) => {
                for _ in 0..3 {
                    ctx.events.send(output(req.code.as_bytes())).await;
                    tokio::task::yield_now().await;
                }
                Ok(Reply::Run(run_reply(req.code.as_bytes())))
            }
            RequestBody::WriteMount { session_id, .. } if session_id == REFUSE => {
                Err(err(ErrorCode::Quota, "refused before reading"))
            }
            RequestBody::WriteMount { path, size, .. } => {
                let mut rx = ctx.chunks.take().expect("write_mount gets a chunk channel");
                let mut chunks = Vec::new();
                while let Some(chunk) = rx.recv().await {
                    chunks.push(chunk);
                }
                let bytes: u64 = chunks.iter().map(|c| c.len() as u64).sum();
                if ctx.cancel.is_cancelled() {
                    return Err(err(ErrorCode::Cancelled, "cut short"));
                }
                let whole = match size {
                    MountSize::Exact(n) => bytes == n,
                    MountSize::AtMost(n) => bytes <= n,
                };
                if !whole {
                    return Err(err(ErrorCode::BadRequest, "short upload"));
                }
                self.mounts.lock().unwrap().push((path.clone(), chunks));
                Ok(Reply::Mounted { path, bytes })
            }
            RequestBody::SessionInfo { .. } => Err(err(ErrorCode::NotFound, "no such session")),
            _ => Err(err(ErrorCode::BadRequest, "not in the test handler")),
        }
    }
}

pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), ServerError>>,
    pub handler: Arc<TestHandler>,
}

pub fn config(path: PathBuf) -> ServerConfig {
    ServerConfig {
        socket: path,
        allowed_uids: Vec::new(),
        socket_group: None,
        limits: ConnectionLimits {
            max_connections: 64,
            max_requests_per_connection: 32,
            ..ConnectionLimits::default()
        },
    }
}

pub async fn start() -> TestServer {
    start_with(|_| {}).await
}

pub async fn start_with(tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prims.sock");
    let mut cfg = config(path.clone());
    tweak(&mut cfg);
    let handler = Arc::new(TestHandler::default());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(serve(cfg, handler.clone(), shutdown.clone()));
    for _ in 0..500 {
        if path.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(path.exists(), "the server did not bind");
    TestServer {
        dir,
        path,
        shutdown,
        task,
        handler,
    }
}

impl TestServer {
    pub async fn client(&self) -> Client {
        Client::connect(&self.path, "test").await.unwrap()
    }

    /// Prove the daemon still serves: a fresh connection gets a reply.
    pub async fn assert_alive(&self) {
        let client = self.client().await;
        let reply = client.request(RequestBody::Stats).await.unwrap();
        assert!(matches!(reply, Reply::Stats(_)));
    }

    /// Subscribe to the session ids of cancelled `hang` runs.
    pub fn watch_cancels(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.handler.cancelled.lock().unwrap() = Some(tx);
        rx
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

pub fn hang(session: &str) -> RequestBody {
    run(session, HANG)
}

pub fn run(session: &str, code: &str) -> RequestBody {
    RequestBody::Run(prims_protocol::wire::RunRequest {
        session_id: session.into(),
        tenant: None,
        code: code.into(),
        requirements: Vec::new(),
        limits: Default::default(),
        fresh: false,
        network: None,
    })
}

/// A raw connection that has done the handshake.
pub async fn raw_hello(server: &TestServer) -> UnixStream {
    let mut s = UnixStream::connect(&server.path).await.unwrap();
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        client: "raw".into(),
    };
    s.write_all(&frame::encode(&hello).unwrap()).await.unwrap();
    let welcome = frame::read_frame(&mut s).await.unwrap().unwrap();
    let _: Welcome = frame::decode(&welcome).unwrap();
    s
}

pub async fn read_response(s: &mut UnixStream) -> Response {
    let body = tokio::time::timeout(Duration::from_secs(5), frame::read_frame(s))
        .await
        .expect("a response in time")
        .unwrap()
        .expect("a response, not the end");
    frame::decode(&body).unwrap()
}

/// The server closes the connection (EOF or reset) within a few seconds,
/// sending nothing but optional error frames first.
pub async fn assert_closed(s: &mut UnixStream) {
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => panic!("the server did not close the connection"),
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
    }
}
