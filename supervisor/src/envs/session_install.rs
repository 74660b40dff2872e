//! Packages a session adds to its environment without a new interpreter:
//! installed into the session's own site directory
//! (`/workspace/.prims/site-packages`, after the environment on
//! `sys.path`) by an install jail that runs as the session's uid, sees the
//! environment read-only and reaches nothing but the package index through
//! the proxy. What it writes is the session's, on the session's disk
//! quota; the packages the session already has keep their versions (uv
//! resolves with them pinned), and a requirement that needs another
//! version of one of them is a conflict, which only a new environment can
//! settle. The jail's program is `session_install.py`.
//!
//! An install may be stopped halfway (its caller's [`Cancel`], its own
//! wall time or memory): the program keeps the site directory whole
//! through a kill at any step (see its header), and one that did not get
//! to its end is followed at once by the program's tidy step, in a jail
//! of its own, which takes out what it was moving.

use super::error::EnvError;
use super::install::{uv_command, UvCommand, SOCKET_FAMILIES};
use super::output::clean_line;
use super::proxy;
use super::state::Core;
use crate::job::{Cancel, Stream};
use prims_protocol::jail::{JobLimits, JobSpec, NetworkMode, Status, VENV_PYTHON};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

const PROGRAM: &str = include_str!("session_install.py");
/// The line that carries the program's verdict.
const VERDICT: &str = "PRIMS-INSTALL ";
/// Lines of uv's output passed on as progress; the rest are counted.
const PROGRESS_LINES: usize = 200;
const INSTALL_PIDS: u64 = 256;
const INSTALL_OPEN_FILES: u64 = 4096;
const INSTALL_TMP: u64 = 64 << 20;
const INSTALL_OUTPUT: u64 = 1 << 20;
/// How long the tidy step after a killed install may take: it removes at
/// most one distribution's files and the staging directories left.
const TIDY_TIMEOUT: Duration = Duration::from_secs(60);

/// The session's own site directory, in its jails: where its packages go,
/// and where the interpreter's agent looks for them (after the environment).
pub const SESSION_SITE: &str = "/workspace/.prims/site-packages";

/// The session an install is for.
#[derive(Debug, Clone, Copy)]
pub struct SessionTarget<'a> {
    /// The session's environment (leased by the caller for the install's
    /// time), which the install sees at `/venv`.
    pub env_dir: &'a Path,
    pub workspace: &'a Path,
    pub uid: u32,
    /// Names the install's job cgroup.
    pub name: &'a str,
}

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// These distributions (`name==version`) are new in the session.
    Installed(Vec<String>),
    /// The requirements need another version of a package the session has.
    Conflict(Conflict),
}

/// A requirement that needs another version of what the session has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The package, the requirement and the version installed, when one
    /// requirement names a package the session has.
    pub package: Option<(String, String, String)>,
    /// uv's explanation, cut short.
    pub said: String,
}

impl Conflict {
    /// Names the package and both versions, or gives uv's words.
    pub fn message(&self) -> String {
        match &self.package {
            Some((name, asked, installed)) => format!(
                "{asked} asks for another version of {name} than the {installed} this session has"
            ),
            None => format!(
                "the new requirements need other versions of packages this session has: {}",
                self.said
            ),
        }
    }
}

impl Core {
    /// See `Envs::install_into_session`.
    pub(super) fn install_into_session(
        &self,
        to: SessionTarget<'_>,
        requirements: &[String],
        progress: &(dyn Fn(String) + Sync),
        cancel: &Cancel,
    ) -> Result<Added, EnvError> {
        let rt = tokio::runtime::Handle::try_current().map_err(|_| EnvError::Jail {
            message: "session installs need the daemon's async runtime (for the proxy)".into(),
        })?;
        let uv = rt.block_on(self.uv.get(
            &self.cfg.state_dir,
            &self.cfg.interpreter,
            &self.settings(),
            &|m| progress(m),
            cancel,
        ))?;
        if cancel.is_cancelled() {
            return Err(EnvError::Cancelled);
        }
        let spec = self.install_spec(to, requirements, &uv);
        let lines = Lines::new(progress);
        let sink = |s: Stream, b: &[u8]| lines.feed(s, b);
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(|e| EnvError::Jail {
                message: format!("the proxy channel: {e}"),
            })?;
        let stop = tokio_util::sync::CancellationToken::new();
        let served = rt.spawn(proxy::serve(
            self.cfg.egress.clone(),
            ours.into(),
            proxy::index_rules(&self.settings()),
            stop.clone(),
        ));
        // A cancel kills the jailer, and with it the jail's whole pid
        // namespace, wherever the program was.
        let res = self
            .cfg
            .jails
            .run(&spec, &sink, cancel, Some(theirs.into()));
        stop.cancel();
        drop(served);
        let res = res.map_err(|e| EnvError::Jail {
            message: format!("running the install jail: {e}"),
        })?;
        let (verdict, said) = lines.finish();
        if verdict.is_none() {
            // The program did not get to its end (killed by a cancel, at
            // its wall time or for memory, or it failed): it may have been
            // moving a distribution into the site directory. Its files go
            // now, not at the session's next install, so that no module of
            // it is importable without its metadata meanwhile.
            self.tidy(to);
        }
        if res.cancelled {
            return Err(EnvError::Cancelled);
        }
        let settings = self.settings();
        match res.outcome.status {
            Status::Ok | Status::Exit => {}
            Status::Timeout => {
                return Err(EnvError::Timeout {
                    after: settings.build_timeout,
                })
            }
            Status::Oom => {
                return Err(EnvError::OutOfMemory {
                    limit_bytes: settings.build_memory,
                })
            }
            _ => {
                let why = res.outcome.setup_error.as_ref().map(ToString::to_string);
                return Err(EnvError::Build {
                    message: why.unwrap_or(said),
                });
            }
        }
        judge(verdict.as_deref(), said)
    }

    /// Runs the program's tidy step in a jail of its own, with no network
    /// and no cancel (it is short, and its point is to run after one):
    /// what a killed install was moving leaves the session's site
    /// directory. Best effort: a failure is logged, and the session's next
    /// install tidies first anyway.
    fn tidy(&self, to: SessionTarget<'_>) {
        let spec = self.tidy_spec(to);
        let quiet = |_: String| {};
        let lines = Lines::new(&quiet);
        let sink = |s: Stream, b: &[u8]| lines.feed(s, b);
        let res = self.cfg.jails.run(&spec, &sink, &Cancel::default(), None);
        let (verdict, said) = lines.finish();
        match (res, verdict) {
            (Ok(_), Some(v)) => {
                tracing::info!(session = %to.name, verdict = %short(&v), "tidied after an install that did not end");
            }
            (Ok(r), None) => {
                tracing::warn!(session = %to.name, status = ?r.outcome.status, said = %said, "the tidy step after an install that did not end failed");
            }
            (Err(e), _) => {
                tracing::warn!(session = %to.name, error = %e, "could not run the tidy step after an install that did not end");
            }
        }
    }

    fn install_spec(&self, to: SessionTarget<'_>, requirements: &[String], uv: &Path) -> JobSpec {
        let s = self.settings();
        let UvCommand {
            argv: uv_argv,
            binds,
            env,
            ro_binds,
        } = uv_command(&s, uv);
        let args = serde_json::json!({
            "uv": uv_argv,
            "requirements": requirements,
            "site": SESSION_SITE,
            "venv_site": format!("/venv/lib/python{}/site-packages", self.cfg.version),
        });
        JobSpec {
            network: NetworkMode::Proxy,
            ro_binds,
            socket_families: SOCKET_FAMILIES.to_vec(),
            env,
            binds,
            proxy_port: crate::egress::JAIL_PORT,
            ..self.program_spec(to, "pip", &args, s.build_timeout)
        }
    }

    /// The tidy step: no network, nothing bound but what any jail has.
    fn tidy_spec(&self, to: SessionTarget<'_>) -> JobSpec {
        let args = serde_json::json!({"tidy": true, "site": SESSION_SITE});
        self.program_spec(to, "tidy", &args, TIDY_TIMEOUT)
    }

    /// The program with `args`, as job `step` of the session, as the
    /// session's uid on its workspace, within `wall` and no network.
    fn program_spec(
        &self,
        to: SessionTarget<'_>,
        step: &str,
        args: &serde_json::Value,
        wall: Duration,
    ) -> JobSpec {
        let s = self.settings();
        let cfg = &self.cfg;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        let wall_ms = u64::try_from(wall.as_millis()).unwrap_or(u64::MAX);
        JobSpec {
            interpreter: cfg.interpreter.clone(),
            venv: to.env_dir.to_path_buf(),
            workspace: to.workspace.to_path_buf(),
            code: String::new(),
            limits: JobLimits {
                wall_time_ms: wall_ms,
                cpu_time_ms: wall_ms.saturating_mul(cores),
                memory_bytes: s.build_memory,
                swap_bytes: 0,
                pids: INSTALL_PIDS,
                open_files: INSTALL_OPEN_FILES,
                // The workspace's quota bounds what it writes.
                file_size_bytes: s.build_disk,
                output_bytes: INSTALL_OUTPUT,
                tmp_size_bytes: INSTALL_TMP,
                cpu_millis: cores.saturating_mul(1000),
            },
            network: NetworkMode::None,
            ro_binds: s.ro_binds.clone(),
            seccomp_extra_deny: s.seccomp_extra_deny.clone(),
            socket_families: vec![libc::AF_UNIX],
            landlock_required: s.landlock_required,
            cgroup: cfg.jails.cgroup(&cfg.jails.names.build(to.name, step)),
            host_uid: to.uid,
            host_gid: to.uid,
            argv: vec![
                VENV_PYTHON.into(),
                "-I".into(),
                "-S".into(),
                "-c".into(),
                PROGRAM.into(),
                args.to_string(),
            ],
            env: Vec::new(),
            binds: Vec::new(),
            venv_writable: false,
            proxy_port: 0,
            cpu: Default::default(),
            fork: Default::default(),
        }
    }
}

/// The program's verdict line, read as hostile input: it ran as the
/// session's uid, beside the session's files.
fn judge(verdict: Option<&str>, said: String) -> Result<Added, EnvError> {
    let failed = |said: String| EnvError::Build {
        message: if said.is_empty() {
            "the install jail ended without output or a result; the supervisor's log \
             (prims_supervisor::envs) says why it stopped"
                .into()
        } else {
            said
        },
    };
    let Some(v) = verdict.and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok()) else {
        return Err(failed(said));
    };
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(short);
    match v.get("status").and_then(|s| s.as_str()) {
        Some("installed") => Ok(Added::Installed(
            v.get("added")
                .and_then(|a| a.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str())
                        .take(500)
                        .map(short)
                        .collect()
                })
                .unwrap_or_default(),
        )),
        Some("conflict") => {
            let package = match (text("package"), text("asked"), text("installed")) {
                (Some(p), Some(a), Some(i)) => Some((p, a, i)),
                _ => None,
            };
            Ok(Added::Conflict(Conflict { package, said }))
        }
        _ => Err(failed(said)),
    }
}

fn short(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// uv's lines as they come: passed on (up to [`PROGRESS_LINES`]) and the
/// tail kept; the verdict line is kept apart and never shown.
struct Lines<'a> {
    state: Mutex<LinesState>,
    progress: &'a (dyn Fn(String) + Sync),
}

#[derive(Default)]
struct LinesState {
    partial: Vec<u8>,
    shown: usize,
    tail: Vec<String>,
    verdict: Option<String>,
}

impl<'a> Lines<'a> {
    fn new(progress: &'a (dyn Fn(String) + Sync)) -> Self {
        Lines {
            state: Mutex::default(),
            progress,
        }
    }

    fn feed(&self, _stream: Stream, chunk: &[u8]) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.partial.extend_from_slice(chunk);
        while let Some(pos) = st.partial.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = st.partial.drain(..=pos).collect();
            self.line(&mut st, clean_line(&raw));
        }
        if st.partial.len() > 4096 {
            let raw = std::mem::take(&mut st.partial);
            self.line(&mut st, clean_line(&raw));
        }
    }

    fn line(&self, st: &mut LinesState, line: String) {
        if let Some(v) = line.strip_prefix(VERDICT) {
            st.verdict = Some(v.to_string());
            return;
        }
        if line.is_empty() {
            return;
        }
        if st.shown < PROGRESS_LINES {
            st.shown += 1;
            (self.progress)(line.clone());
        }
        if st.tail.len() == 20 {
            st.tail.remove(0);
        }
        st.tail.push(line);
    }

    fn finish(&self) -> (Option<String>, String) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let raw = std::mem::take(&mut st.partial);
        let last = clean_line(&raw);
        if !last.is_empty() {
            self.line(&mut st, last);
        }
        (st.verdict.take(), st.tail.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_is_read_as_hostile_input() {
        let ok = judge(
            Some(r#"{"status":"installed","added":["six==1.17.0"]}"#),
            String::new(),
        );
        assert_eq!(ok.unwrap(), Added::Installed(vec!["six==1.17.0".into()]));
        let c = judge(
            Some(r#"{"status":"conflict","package":"six","asked":"six==1.16.0","installed":"1.17.0"}"#),
            "no".into(),
        )
        .unwrap();
        let Added::Conflict(c) = c else {
            panic!("{c:?}")
        };
        assert_eq!(
            c.message(),
            "six==1.16.0 asks for another version of six than the 1.17.0 this session has"
        );
        for bad in [
            None,
            Some("not json"),
            Some(r#"{"status":"who"}"#),
            Some("[]"),
        ] {
            assert!(judge(bad, "uv said".into()).is_err(), "{bad:?}");
        }
        let long = format!(
            r#"{{"status":"installed","added":["{}"]}}"#,
            "x".repeat(5000)
        );
        let Ok(Added::Installed(a)) = judge(Some(&long), String::new()) else {
            panic!()
        };
        assert_eq!(a[0].len(), 200);
    }
}
