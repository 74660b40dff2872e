//! `prims-bench socket`: a client of a fresh supervisor on a private state
//! dir. `print(1)` latency, the same with a cached `requirements=["six"]`,
//! and the throughput of 8 concurrent sessions against one at a time.

use crate::stats::stats;
use anyhow::{bail, Context, Result};
use prims_protocol::client::Client;
use prims_protocol::jail::LimitRequest;
use prims_protocol::wire::{Event, RunRequest};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Supervisor {
    child: Child,
    dir: PathBuf,
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // SIGTERM lets it unmount nothing in particular; sessions are closed below.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(prims: &Path, dir: &Path, policy: Option<&Path>) -> Result<Supervisor> {
    let mut cmd = Command::new(prims);
    cmd.arg("supervisor")
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--socket")
        .arg(dir.join("sock"));
    if let Some(p) = policy {
        cmd.arg("--policy").arg(p);
    }
    let log = std::fs::File::create(dir.join("supervisor.log"))?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", prims.display()))?;
    let sup = Supervisor {
        child,
        dir: dir.to_path_buf(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(dir.join("sock")).is_err() {
        if Instant::now() > deadline {
            bail!(
                "the supervisor did not start; see {}/supervisor.log",
                sup.dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(sup)
}

fn req(session: &str, code: &str, requirements: &[&str]) -> RunRequest {
    RunRequest {
        session_id: session.into(),
        tenant: None,
        code: code.into(),
        requirements: requirements.iter().map(|r| r.to_string()).collect(),
        limits: LimitRequest::default(),
        fresh: false,
        network: None,
    }
}

async fn timed_run(c: &Client, r: RunRequest) -> Result<f64> {
    let t = Instant::now();
    let reply = c
        .run(r, |ev| {
            if let Event::Building { message } = ev {
                eprintln!("  building: {message}");
            }
        })
        .await?;
    if reply.stdout != b"1\n" {
        bail!(
            "unexpected output {:?}: {:?}",
            String::from_utf8_lossy(&reply.stdout),
            reply.outcome
        );
    }
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

pub fn main(runs: usize, prims: PathBuf, policy: Option<PathBuf>) -> Result<()> {
    if runs < 8 {
        bail!("--runs must be at least 8");
    }
    let dir = PathBuf::from("/var/tmp").join(format!("prims-bench-socket-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sup = start(&prims, &dir, policy.as_deref())?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(measure(&dir, runs));
    drop(sup);
    prims_tests::teardown::unmount_below(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(dir: &Path, runs: usize) -> Result<()> {
    let c = Client::connect(&dir.join("sock"), "prims-bench").await?;
    let s = c.open_session(None).await?.session_id;
    eprintln!("warming up (the first run waits for the base environment)...");
    let base_ms = timed_run(&c, req(&s, "print(1)", &[])).await?;
    let six_ms = timed_run(&c, req(&s, "print(1)", &["six"])).await?;
    let idna_ms = timed_run(&c, req(&s, "print(1)", &["six", "idna"])).await?;
    println!(
        "first runs, each waiting for its environment's build: base {:.1} s (empty package cache), \
         +six {:.1} s, +six+idna {:.1} s (package cache warm)",
        base_ms / 1000.0,
        six_ms / 1000.0,
        idna_ms / 1000.0
    );
    let (mut plain, mut cached) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        plain.push(timed_run(&c, req(&s, "print(1)", &[])).await?);
        cached.push(timed_run(&c, req(&s, "print(1)", &["six"])).await?);
    }
    let (p, q) = (stats(plain), stats(cached));

    let seq_start = Instant::now();
    for _ in 0..runs {
        timed_run(&c, req(&s, "print(1)", &[])).await?;
    }
    let seq_rate = runs as f64 / seq_start.elapsed().as_secs_f64();
    let mut sessions = Vec::new();
    for _ in 0..8 {
        sessions.push(c.open_session(None).await?.session_id);
    }
    let par_start = Instant::now();
    let mut tasks = Vec::new();
    for (i, sid) in sessions.into_iter().enumerate() {
        let c = c.clone();
        let n = runs / 8 + usize::from(i < runs % 8);
        tasks.push(tokio::spawn(async move {
            for _ in 0..n {
                timed_run(&c, req(&sid, "print(1)", &[])).await?;
            }
            Ok::<(), anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let par_rate = runs as f64 / par_start.elapsed().as_secs_f64();

    println!("runs: {runs} of each; one client on the supervisor socket");
    println!("| what | min ms | p50 ms | p90 ms |");
    println!("|---|---|---|---|");
    println!("{}", p.row("run `print(1)`, base environment"));
    println!(
        "{}",
        q.row("run `print(1)`, cached `requirements=[\"six\"]`")
    );
    println!();
    println!("| throughput | runs/s |");
    println!("|---|---|");
    println!("| one session, sequential | {seq_rate:.1} |");
    println!("| 8 sessions, concurrent | {par_rate:.1} |");
    println!("8-way / sequential: {:.2}x", par_rate / seq_rate);
    println!(
        "cached requirements - base, p50: {:+.1} ms",
        q.median - p.median
    );
    Ok(())
}
