//! `prims-bench mcp`: `run_code print(1)` through MCP over HTTP with rmcp's
//! client, against a fresh `prims serve`, with the supervisor socket measured
//! in the same run so the front-end's own cost is the difference.

use crate::stats::{stats, Stats};
use anyhow::{anyhow, bail, Context, Result};
use prims_protocol::client::Client;
use prims_protocol::jail::LimitRequest;
use prims_protocol::wire::RunRequest;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) type Mcp = RunningService<RoleClient, ()>;

pub(crate) struct Serve {
    child: Child,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SIGTERM: prims serve stops the front-end and the supervisor cleanly.
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub(crate) fn start(prims: &Path, dir: &Path, port: u16, policy: Option<&Path>) -> Result<Serve> {
    let mut cmd = Command::new(prims);
    cmd.arg("serve")
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"));
    if let Some(p) = policy {
        cmd.arg("--policy").arg(p);
    }
    let log = std::fs::File::create(dir.join("serve.log"))?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {} serve", prims.display()))?;
    let serve = Serve { child };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!(
                "prims serve did not listen; see {}/serve.log",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(serve)
}

/// How an MCP client uses HTTP connections.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Conn {
    /// A new connection per request: rmcp's default client.
    PerCall,
    /// Connections kept open between requests, as the Python and TypeScript
    /// SDKs (and most HTTP clients) do.
    KeepAlive,
}

impl Conn {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Conn::PerCall => "a new connection per call (rmcp's default client)",
            Conn::KeepAlive => "kept-alive connections (as the Python and TypeScript SDKs)",
        }
    }
}

pub(crate) async fn connect(url: &str, conn: Conn) -> Result<Mcp> {
    match conn {
        Conn::PerCall => {
            ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
                .await
                .map_err(|e| anyhow!("MCP client: {e}"))
        }
        Conn::KeepAlive => connect_pooled(url, reqwest::Client::new(), ()).await,
    }
}

/// A new MCP session (initialize) of `url` whose requests go through
/// `http`'s pool of kept-alive connections, which clones of one
/// `reqwest::Client` share; `handler` gets the server's notifications.
pub(crate) async fn connect_pooled<H: ClientHandler>(
    url: &str,
    http: reqwest::Client,
    handler: H,
) -> Result<RunningService<RoleClient, H>> {
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    handler
        .serve(transport)
        .await
        .map_err(|e| anyhow!("MCP client: {e}"))
}

/// One `run_code` call with `args`: its latency in ms and its structured
/// result. A tool error (`isError`) fails.
pub(crate) async fn call_run_code(
    c: &Peer<RoleClient>,
    args: serde_json::Map<String, serde_json::Value>,
) -> Result<(f64, serde_json::Value)> {
    let t = Instant::now();
    let r = c
        .call_tool(CallToolRequestParams::new("run_code").with_arguments(args))
        .await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if r.is_error == Some(true) {
        bail!("run_code failed: {:?}", r.content);
    }
    let v = r
        .structured_content
        .ok_or_else(|| anyhow!("no structured content: {:?}", r.content))?;
    Ok((ms, v))
}

pub(crate) async fn run_code(c: &Mcp, session: Option<&str>) -> Result<(f64, String)> {
    let mut args = serde_json::Map::new();
    args.insert("code".into(), "print(1)".into());
    if let Some(s) = session {
        args.insert("session_id".into(), s.into());
    }
    let (ms, v) = call_run_code(c, args).await?;
    if v["stdout"] != "1\n" {
        bail!("unexpected result {v}");
    }
    let sid = v["session_id"].as_str().unwrap_or_default().to_string();
    Ok((ms, sid))
}

/// `n` clients of `url`, each with a session of its own.
pub(crate) async fn sessions(url: &str, n: usize, conn: Conn) -> Result<Vec<(Mcp, String)>> {
    let mut out = Vec::new();
    for _ in 0..n {
        let c = connect(url, conn).await?;
        let (_, sid) = run_code(&c, None).await?;
        out.push((c, sid));
    }
    Ok(out)
}

/// `runs` calls spread over `clients`, all at once: runs per second.
pub(crate) async fn throughput(clients: Vec<(Mcp, String)>, runs: usize) -> Result<f64> {
    let n = clients.len();
    let t = Instant::now();
    let mut tasks = Vec::new();
    for (i, (c, sid)) in clients.into_iter().enumerate() {
        let k = runs / n + usize::from(i < runs % n);
        tasks.push(tokio::spawn(async move {
            for _ in 0..k {
                run_code(&c, Some(&sid)).await?;
            }
            let _ = c.cancel().await;
            Ok::<(), anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(runs as f64 / t.elapsed().as_secs_f64())
}

async fn socket_run(c: &Client, sid: &str) -> Result<f64> {
    let t = Instant::now();
    let reply = c
        .run(
            RunRequest {
                session_id: sid.into(),
                tenant: None,
                code: "print(1)".into(),
                requirements: vec![],
                limits: LimitRequest::default(),
                fresh: false,
                network: None,
            },
            |_| {},
        )
        .await?;
    if reply.stdout != b"1\n" {
        bail!("unexpected socket output {:?}", reply.stdout);
    }
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

/// A fresh, empty directory for one benchmark's `prims serve`: its state
/// directory and `serve.log` go there.
pub(crate) fn bench_dir(name: &str) -> Result<PathBuf> {
    let dir = PathBuf::from("/var/tmp").join(format!("prims-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // The front-end runs unprivileged and must traverse to the socket.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(dir)
}

/// A `prims serve` on a bench directory: dropping it stops the server,
/// unmounts what is left below the directory and removes it.
pub(crate) struct Served {
    serve: Option<Serve>,
    dir: PathBuf,
    pub port: u16,
}

impl Served {
    pub(crate) fn start(prims: &Path, dir: &Path, policy: Option<&Path>) -> Result<Served> {
        let port = free_port()?;
        let serve = start(prims, dir, port, policy)?;
        Ok(Served {
            serve: Some(serve),
            dir: dir.to_owned(),
            port,
        })
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.serve.take());
        prims_tests::teardown::unmount_below(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `prims serve` on `dir`, runs `measure` with its port, then stops
/// it and removes `dir`.
pub(crate) fn with_serve<F, Fut>(
    prims: &Path,
    dir: &Path,
    policy: Option<&Path>,
    measure: F,
) -> Result<()>
where
    F: FnOnce(u16) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let served = Served::start(prims, dir, policy)?;
    let result = tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(measure(served.port)));
    drop(served);
    result
}

pub fn main(runs: usize, prims: PathBuf, policy: Option<PathBuf>) -> Result<()> {
    if runs < 8 {
        bail!("--runs must be at least 8");
    }
    let dir = bench_dir("mcp")?;
    with_serve(&prims, &dir, policy.as_deref(), |port| {
        measure(&dir, port, runs)
    })
}

async fn measure(dir: &Path, port: u16, runs: usize) -> Result<()> {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mcp = connect(&url, Conn::PerCall).await?;
    let kept = connect(&url, Conn::KeepAlive).await?;
    eprintln!("warming up (the first run waits for the base environment)...");
    let (_, sid) = run_code(&mcp, None).await?;
    let (_, ksid) = run_code(&kept, None).await?;
    let sock = Client::connect(&dir.join("state/supervisor.sock"), "prims-bench").await?;
    let ssid = sock.open_session(None).await?.session_id;
    socket_run(&sock, &ssid).await?;
    let (mut via_mcp, mut via_kept, mut via_socket) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        via_mcp.push(run_code(&mcp, Some(&sid)).await?.0);
        via_kept.push(run_code(&kept, Some(&ksid)).await?.0);
        via_socket.push(socket_run(&sock, &ssid).await?);
    }
    let (m, k, s): (Stats, Stats, Stats) = (stats(via_mcp), stats(via_kept), stats(via_socket));

    let seq = Instant::now();
    for _ in 0..runs {
        run_code(&mcp, Some(&sid)).await?;
    }
    let seq_rate = runs as f64 / seq.elapsed().as_secs_f64();
    let par_rate = throughput(sessions(&url, 8, Conn::PerCall).await?, runs).await?;
    let kept_rate = throughput(sessions(&url, 8, Conn::KeepAlive).await?, runs).await?;
    let _ = mcp.cancel().await;
    let _ = kept.cancel().await;

    println!(
        "runs: {runs} of each, interleaved; rmcp client over streamable HTTP vs the socket client"
    );
    println!("| what | min ms | p50 ms | p90 ms |");
    println!("|---|---|---|---|");
    for (what, x) in [
        ("MCP `run_code print(1)`, a new connection per call", &m),
        ("MCP `run_code print(1)`, a kept-alive connection", &k),
        ("supervisor socket `run print(1)`", &s),
    ] {
        println!("{}", x.row(what));
    }
    println!(
        "front-end overhead, p50: {:+.1} ms (new connections), {:+.1} ms (kept alive)",
        m.median - s.median,
        k.median - s.median
    );
    println!();
    println!("| MCP throughput | runs/s |");
    println!("|---|---|");
    println!("| one session, sequential | {seq_rate:.1} |");
    println!("| 8 sessions, concurrent | {par_rate:.1} |");
    println!("| 8 sessions, concurrent, kept-alive connections | {kept_rate:.1} |");
    println!("8-way / sequential: {:.2}x", par_rate / seq_rate);
    Ok(())
}
