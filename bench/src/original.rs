//! `prims-bench original`: PRIMS's `run_code print(1)` through MCP against the
//! original's approach to the same call — a fresh `python -m venv`, `pip
//! install` of the default packages, then the code — interleaved in one run.

use crate::mcp::{connect, free_port, run_code, start, Conn};
use crate::stats::{stats, Stats};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The original installed these on every call, on top of the requested ones.
const DEFAULT_PACKAGES: [&str; 3] = ["pandas", "openpyxl", "requests"];

pub fn main(runs: usize, prims_per: usize, prims: PathBuf, python: PathBuf) -> Result<()> {
    if runs < 1 || prims_per < 1 {
        bail!("--runs and --prims-per must be at least 1");
    }
    let dir = PathBuf::from("/var/tmp").join(format!("prims-bench-orig-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let port = free_port()?;
    let serve = start(&prims, &dir, port, None)?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(measure(&dir, port, runs, prims_per, &python));
    drop(serve);
    prims_tests::teardown::unmount_below(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// One call the original's way, timed from the request to the output.
fn original_call(dir: &Path, python: &Path) -> Result<f64> {
    let work = tempfile::tempdir_in(dir)?;
    let venv = work.path().join("venv");
    let t = Instant::now();
    run(Command::new(python).arg("-m").arg("venv").arg(&venv))?;
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(DEFAULT_PACKAGES))?;
    let out = Command::new(venv.join("bin/python"))
        .args(["-c", "print(1)"])
        .current_dir(work.path())
        .output()?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if out.stdout != b"1\n" {
        bail!(
            "the original's run printed {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok(ms)
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

async fn measure(dir: &Path, port: u16, runs: usize, per: usize, python: &Path) -> Result<()> {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mcp = connect(&url, Conn::PerCall).await?;
    eprintln!("warming up (the first run waits for PRIMS's base environment)...");
    let (_, sid) = run_code(&mcp, None).await?;
    let (mut orig, mut fast) = (Vec::new(), Vec::new());
    for i in 0..runs {
        eprintln!("original approach, call {}/{runs}...", i + 1);
        let d = dir.to_owned();
        let py = python.to_owned();
        orig.push(tokio::task::spawn_blocking(move || original_call(&d, &py)).await??);
        for _ in 0..per {
            fast.push(run_code(&mcp, Some(&sid)).await?.0);
        }
    }
    let _ = mcp.cancel().await;
    let first = orig[0];
    let (o, p): (Stats, Stats) = (stats(orig), stats(fast));
    println!(
        "{runs} calls the original's way, {} PRIMS calls, interleaved; pip's cache as the first call left it",
        runs * per
    );
    println!("| `run_code print(1)` | min ms | p50 ms | p90 ms |");
    println!("|---|---|---|---|");
    println!(
        "| original: fresh venv + pip install {} + run | {:.0} | {:.0} | {:.0} |",
        DEFAULT_PACKAGES.join(" "),
        o.min,
        o.median,
        o.p90
    );
    println!(
        "{}",
        p.row("PRIMS: MCP run_code, jailed, cached environment")
    );
    println!("original's first call: {first:.0} ms");
    println!("speed-up at p50: {:.0}x", o.median / p.median);
    Ok(())
}
