//! `prims-bench idle`: what idle sessions that used pandas hold, measured
//! the way the fork-templates issue asks, over many sessions: the growth
//! of the proportional set size (PSS) summed over every process of the
//! server (python, a forked child's parent, the jail's init, the jailer),
//! which splits a page shared with a template among its sharers; the drop
//! in the host's `MemAvailable`; and the sessions' cgroups. Any template
//! and the warm pool are up and full before the first reading and after
//! the last, so neither is counted.

use crate::fresh::programs::run_pandas;
use crate::fresh::wait_for_templates;
use crate::live::cell::PANDAS;
use crate::live::idle::kb_field;
use crate::live::supervisor::{socket_path, Supervisor};
use crate::mcp::{bench_dir, with_serve};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::Duration;

const MIB: f64 = (1 << 20) as f64;

pub fn main(sessions: usize, prims: PathBuf, policy: Option<PathBuf>) -> Result<()> {
    if sessions < 8 {
        bail!("--sessions must be at least 8");
    }
    let given = match &policy {
        Some(p) => {
            prims_policy::Policy::load(p).with_context(|| format!("reading {}", p.display()))?
        }
        None => prims_policy::Policy::default(),
    };
    let templates = given.interpreters.fork_templates;
    let pool_size = u64::from(given.interpreters.pool_size);
    let dir = bench_dir("idle")?;
    let socket = socket_path(&dir);
    let state = dir.join("state");
    with_serve(&prims, &dir, policy.as_deref(), |_port| async move {
        let sup = Supervisor::connect(&socket, pool_size).await?;
        let client = sup.client().clone();
        // The base environment, and the template when the policy wants one.
        let warm = client.open_session(None).await?.session_id;
        run_pandas(&client, &warm).await?;
        client.close_session(&warm, None).await?;
        wait_for_templates(&client, templates).await?;
        sup.settle(0).await?;
        let before = mem_available().await?;
        let pss_before = tree_pss(&state)?;
        let mut ids = Vec::new();
        for _ in 0..sessions {
            let id = client.open_session(None).await?.session_id;
            run_pandas(&client, &id).await?;
            ids.push(id);
        }
        let stats = sup.settle(sessions as u64).await?;
        let after = mem_available().await?;
        let pss_after = tree_pss(&state)?;
        let n = sessions as f64;
        println!(
            "{sessions} idle sessions that ran `{}`; fork templates {}, {} up; interpreters started forked {}, cold {}\n",
            PANDAS.code,
            if templates { "on" } else { "off" },
            stats.templates_up,
            stats.starts_forked,
            stats.starts_cold,
        );
        println!("| per idle session | MiB |");
        println!("|---|---|");
        println!(
            "| PSS of the server's processes ({:.1} → {:.1} MiB, {} → {} processes) | {:.1} |",
            pss_before.0 as f64 / MIB,
            pss_after.0 as f64 / MIB,
            pss_before.1,
            pss_after.1,
            pss_after.0.saturating_sub(pss_before.0) as f64 / MIB / n
        );
        println!(
            "| MemAvailable drop ({:.1} MiB over {sessions}) | {:.1} |",
            before.saturating_sub(after) as f64 / MIB,
            before.saturating_sub(after) as f64 / MIB / n
        );
        println!(
            "| its interpreter's cgroup | {:.1} |",
            stats.interpreters_memory_bytes as f64 / MIB / n
        );
        for id in &ids {
            client.close_session(id, None).await?;
        }
        Ok(())
    })
}

/// PSS summed over `prims serve --state-dir state` and all its
/// descendants, in bytes, and how many processes that was.
pub(crate) fn tree_pss(state: &std::path::Path) -> Result<(u64, usize)> {
    let mut parent = std::collections::HashMap::new();
    let mut root = None;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The fields after the command name, which may hold anything.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        parent.insert(pid, ppid);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.contains(&b"serve".as_slice())
            && args.contains(&state.as_os_str().as_encoded_bytes())
        {
            root = Some(pid);
        }
    }
    let root = root.context("no `prims serve` process for this benchmark")?;
    let in_tree = |mut pid: u32| loop {
        if pid == root {
            return true;
        }
        match parent.get(&pid) {
            Some(&p) if p != 0 && p != pid => pid = p,
            _ => return false,
        }
    };
    let (mut pss, mut n) = (0, 0);
    for &pid in parent.keys() {
        if !in_tree(pid) {
            continue;
        }
        // A process that ended meanwhile (gone, or a zombie with an empty
        // rollup) counts for nothing.
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        if let Ok(bytes) = kb_field(&text, "Pss") {
            pss += bytes;
            n += 1;
        }
    }
    Ok((pss, n))
}

/// The host's `MemAvailable`, in bytes: the median of five readings a
/// second apart, once what the last calls left behind has settled.
pub(crate) async fn mem_available() -> Result<u64> {
    let mut readings = Vec::new();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let text = std::fs::read_to_string("/proc/meminfo")?;
        let bytes = kb_field(&text, "MemAvailable")?;
        readings.push(bytes);
    }
    readings.sort_unstable();
    Ok(readings[readings.len() / 2])
}
