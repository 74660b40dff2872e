//! `prims run SCRIPT.py`: one script in the jail, with no server.

use anyhow::{anyhow, Context, Result};
use base64::Engine;
use clap::Args;
use prims_policy::Policy;
use prims_protocol::jail::{LimitRequest, Outcome, Status};
use prims_supervisor::spec::{self, Placement};
use prims_supervisor::{cgroups, runner, venv, workspace, RunResult, Stream};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The exit status for a failure before python ran, as `env` and `timeout` do.
const EXIT_SETUP: i32 = 125;
const EXIT_TIMEOUT: i32 = 124;
const EXIT_OOM: i32 = 137;
/// Scripts larger than this are refused before a jail is built.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

#[derive(Args)]
pub struct RunArgs {
    /// Policy TOML (default: built-in defaults).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Print one JSON record with the outcome, stdout and stderr.
    #[arg(long)]
    json: bool,
    /// Workspace directory to use and keep (default: a temporary one).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// State directory; the empty venv is cached in its `run-envs/`.
    #[arg(long, default_value = crate::STATE_DIR)]
    state_dir: PathBuf,
    /// Path of prims-jailer (default: next to this binary).
    #[arg(long, env = "PRIMS_JAILER")]
    jailer: Option<PathBuf>,
    /// The Python script to run.
    script: PathBuf,
}

pub fn main(args: RunArgs) -> i32 {
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("prims: {}", render(&e));
            EXIT_SETUP
        }
    }
}

/// The error and its causes on one line, skipping a cause whose text the
/// message already includes (library errors often embed their source).
pub fn render(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

pub fn jailer_path(flag: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locating this binary")?;
    let candidates = [
        exe.with_file_name("prims-jailer"),
        PathBuf::from("/usr/libexec/prims/prims-jailer"),
    ];
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        anyhow!(
            "prims-jailer not found next to {}; pass --jailer",
            exe.display()
        )
    })
}

fn read_script(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.len() > MAX_SCRIPT_BYTES {
        return Err(anyhow!(
            "{} is {} bytes; scripts are limited to {MAX_SCRIPT_BYTES}",
            path.display(),
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| anyhow!("{} is not UTF-8 text", path.display()))
}

fn run(args: &RunArgs) -> Result<i32> {
    let policy = match &args.policy {
        Some(p) => Policy::load(p).map_err(|e| anyhow!("{e}"))?,
        None => Policy::default(),
    };
    let code = read_script(&args.script)?;
    let jailer = jailer_path(&args.jailer)?;
    let (version, interpreter) = policy
        .default_interpreter()
        .map(|(v, p)| (v.to_string(), p.to_path_buf()))
        .ok_or_else(|| {
            anyhow!("filesystem.default_interpreter is not in filesystem.interpreters")
        })?;
    let venv = venv::empty(&args.state_dir.join("run-envs"), &interpreter, &version)
        .context("preparing the venv")?;
    let host_uid = policy.identity.uid_base;

    let temp;
    let ws = match &args.workspace {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("prims-run-")
                .tempdir()
                .context("creating a temporary workspace")?;
            temp.path().to_path_buf()
        }
    };
    workspace::prepare(&ws, host_uid, host_uid)?;

    let parents = cgroups::resolve(&policy).context("cgroups")?;
    let job = format!("run-{}", std::process::id());
    let placement = Placement {
        interpreter,
        venv,
        workspace: ws.clone(),
        host_uid,
        cgroup: parents.spec_for(&job),
    };
    let spec = spec::build(&policy, code, &LimitRequest::default(), placement);

    let json = args.json;
    let sink = move |s: Stream, bytes: &[u8]| {
        if json {
            return;
        }
        let _ = match s {
            Stream::Stdout => std::io::stdout().write_all(bytes),
            Stream::Stderr => std::io::stderr().write_all(bytes),
        };
    };
    let result = runner::run_job(&jailer, &spec, &sink, &runner::Cancel::default())?;
    if result.outcome.status == Status::SetupError {
        // A jailer that died mid-run leaves its cgroup behind.
        let _ = cgroups::remove_job(&parents, &job);
    }
    let code = exit_code(&result.outcome);
    if json {
        println!("{}", json_record(&result, &ws, host_uid));
    } else if let Some(e) = &result.outcome.setup_error {
        eprintln!("prims: {}", e.message);
    }
    Ok(code)
}

fn exit_code(o: &Outcome) -> i32 {
    match o.status {
        Status::Ok => 0,
        Status::Exit => o.exit_code.unwrap_or(1),
        Status::Signal => 128 + o.signal.unwrap_or(0),
        Status::Timeout => EXIT_TIMEOUT,
        Status::Oom => EXIT_OOM,
        Status::SetupError => EXIT_SETUP,
    }
}

fn json_record(r: &RunResult, ws: &Path, host_uid: u32) -> serde_json::Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut v = serde_json::to_value(&r.outcome).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("stdout".into(), String::from_utf8_lossy(&r.stdout).into());
        obj.insert("stderr".into(), String::from_utf8_lossy(&r.stderr).into());
        obj.insert("stdout_base64".into(), b64.encode(&r.stdout).into());
        obj.insert("stderr_base64".into(), b64.encode(&r.stderr).into());
        obj.insert(
            "truncated".into(),
            serde_json::json!({"stdout": r.stdout_truncated, "stderr": r.stderr_truncated}),
        );
        obj.insert("workspace".into(), ws.display().to_string().into());
        obj.insert("host_uid".into(), host_uid.into());
    }
    v
}
