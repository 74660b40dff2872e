//! The three sessions cases a and c run in, opened from a full pool, and
//! case e: the memory one of them holds while idle, as its cgroup counts
//! it and as the agent process's own RSS and PSS.

use super::cases::Session;
use super::cell::{Cell, Expect, PANDAS, PRINT_1};
use super::socket::SocketSession;
use super::supervisor::Supervisor;
use anyhow::{bail, Result};

/// The cell that reads the agent's memory: it runs in the agent's process.
const SMAPS: &str = "print(open('/proc/self/smaps_rollup').read())";

/// Memory held while idle.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Memory {
    pub pool_ready: u64,
    /// The pool's interpreters, as their cgroups count them.
    pub pool_bytes: u64,
    /// One session's interpreter after its `print(1)` and pandas calls, as
    /// its cgroup counts it.
    pub session_bytes: u64,
    /// That interpreter's python process: resident, and its proportional
    /// share of pages it shares with other processes.
    pub rss_bytes: u64,
    pub pss_bytes: u64,
}

/// Sessions of cases a and c: live, `fresh: true` and the socket's.
pub(crate) struct Open<'a> {
    pub kept: Session,
    pub fresh: Session,
    pub socket: SocketSession<'a>,
    pub memory: Memory,
}

/// Opens the sessions of cases a and c from a settled, full pool, and
/// measures case e. A first session runs `first` and is closed: on cgroup
/// v1 the page cache of the files an interpreter reads first (pandas, the
/// IPython layer) stays charged to the pool's first interpreter, which
/// case e leaves out to measure one like the rest.
pub(crate) async fn open<'a>(url: &str, sup: &'a Supervisor, first: Cell) -> Result<Open<'a>> {
    Session::open(url, first).await?.close().await;
    sup.settle(0).await?;
    let kept = Session::open(url, PRINT_1).await?;
    kept.run(PANDAS, false, Expect::Kept).await?;
    let idle = sup.settle(1).await?;
    let smaps = kept.run_code(SMAPS).await?;
    let Some(text) = smaps["stdout"].as_str() else {
        bail!("no stdout from `{SMAPS}`: {smaps}");
    };
    let memory = Memory {
        pool_ready: idle.pool_ready,
        pool_bytes: idle.pool_memory_bytes,
        session_bytes: idle.interpreters_memory_bytes,
        rss_bytes: kb_field(text, "Rss")?,
        pss_bytes: kb_field(text, "Pss")?,
    };
    let fresh = Session::open(url, PRINT_1).await?;
    let socket = SocketSession::open(sup, PRINT_1).await?;
    socket.run(PANDAS, Expect::Kept).await?;
    sup.settle(3).await?;
    Ok(Open {
        kept,
        fresh,
        socket,
        memory,
    })
}

impl Open<'_> {
    pub async fn close(self) -> Result<()> {
        self.kept.close().await;
        self.fresh.close().await;
        self.socket.close().await
    }
}

/// `field` of a /proc file of `Name:   1234 kB` lines (`smaps_rollup`,
/// `meminfo`), in bytes.
pub(crate) fn kb_field(text: &str, field: &str) -> Result<u64> {
    let key = format!("{field}:");
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some(key.as_str()) {
            if let (Some(n), Some("kB")) = (words.next(), words.next()) {
                return Ok(n.parse::<u64>()? * 1024);
            }
        }
    }
    bail!("no `{field}: N kB` line in {text:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_and_pss_in_bytes() {
        let text = "55d0-7ffd ---p 00000000 00:00 0 [rollup]\n\
                    Rss:               61440 kB\nPss:               40960 kB\n\
                    Pss_Anon:          20480 kB\n";
        assert_eq!(kb_field(text, "Rss").unwrap(), 60 << 20);
        assert_eq!(kb_field(text, "Pss").unwrap(), 40 << 20);
        assert!(kb_field(text, "Swap").is_err());
    }
}
