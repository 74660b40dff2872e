//! `prims-bench jail`: `prims run` of `pass` against the same venv python
//! run directly, interleaved in one run so both see the same machine noise.

use crate::stats::{stats, Stats};
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub fn main(runs: usize, prims: PathBuf) -> Result<()> {
    if runs < 2 {
        bail!("--runs must be at least 2");
    }
    // A private state dir, so the venv timed unjailed is the one the jail uses.
    let dir = std::env::temp_dir().join(format!("prims-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure(&prims, &dir, runs);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn time_ms(cmd: &mut Command) -> Result<f64> {
    let start = Instant::now();
    let status = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {cmd:?}"))?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(ms)
}

fn find_venv(state_dir: &Path) -> Result<PathBuf> {
    let envs = state_dir.join("run-envs");
    std::fs::read_dir(&envs)
        .with_context(|| format!("reading {}", envs.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("empty-"))
        })
        .ok_or_else(|| anyhow!("no empty venv under {}", envs.display()))
}

fn measure(prims: &Path, dir: &Path, runs: usize) -> Result<()> {
    let script = dir.join("pass.py");
    std::fs::write(&script, "pass\n")?;
    let no_cgroup = dir.join("no-cgroup.toml");
    std::fs::write(&no_cgroup, "[cgroup]\nbackend = \"none\"\n")?;
    let state = dir.join("state");
    let jail = |policy: Option<&Path>| {
        let mut c = Command::new(prims);
        c.arg("run").arg("--state-dir").arg(&state);
        if let Some(p) = policy {
            c.arg("--policy").arg(p);
        }
        c.arg(&script);
        c
    };
    let mut with_cg = jail(None);
    let mut without_cg = jail(Some(&no_cgroup));
    // Warm up: builds the venv and fills the page cache.
    for _ in 0..3 {
        time_ms(&mut with_cg)?;
    }
    let mut plain = Command::new(find_venv(&state)?.join("bin/python"));
    plain.args(["-I", "-c", "pass"]);
    let (mut p, mut j, mut n) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        p.push(time_ms(&mut plain)?);
        j.push(time_ms(&mut with_cg)?);
        n.push(time_ms(&mut without_cg)?);
    }
    let (p, j, n) = (stats(p), stats(j), stats(n));
    println!("runs: {runs} of each, interleaved");
    println!("| what | min ms | median ms | p90 ms | median overhead ms |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, s: &Stats| {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:+.1} |",
            s.min,
            s.median,
            s.p90,
            s.median - p.median
        );
    };
    row("venv python -I -c pass (unjailed)", &p);
    row("prims run pass.py (jailed, cgroups)", &j);
    row("prims run pass.py (jailed, cgroup.backend = none)", &n);
    println!("ratio jailed/unjailed (median): {:.2}", j.median / p.median);
    Ok(())
}
