//! `prims run SCRIPT.py`: one script in the jail, with no server.

use crate::args::{JailerArg, PolicyArg, StateDirArg};
use anyhow::{anyhow, Context, Result};
use base64::Engine;
use clap::Args;
use prims_protocol::jail::{Outcome, Status};
use prims_supervisor::job::Stream;
use prims_supervisor::script::{run_script, Script, ScriptRun};
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
    #[command(flatten)]
    policy: PolicyArg,
    /// Print one JSON record with the outcome, stdout and stderr.
    #[arg(long)]
    json: bool,
    /// Run the script as the one cell of a live interpreter, the way the
    /// server runs each call: an uncaught exception is status `error`.
    #[arg(long)]
    live: bool,
    /// With --live: fork the interpreter from a fork template started for
    /// this run, as the server does with `interpreters.fork_templates`, and
    /// fail rather than start it cold.
    #[arg(long, requires = "live")]
    forked: bool,
    /// With --forked: run the script in a fresh python forked in place of
    /// the first one, in the same jail, as a `fresh: true` call does.
    #[arg(long, requires = "forked")]
    in_place: bool,
    /// Workspace directory to use and keep (default: a temporary one).
    #[arg(long)]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    state: StateDirArg,
    #[command(flatten)]
    jailer: JailerArg,
    /// The Python script to run.
    script: PathBuf,
}

pub fn main(args: RunArgs) -> i32 {
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("prims: {}", crate::report::render(&e));
            EXIT_SETUP
        }
    }
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
    let policy = args.policy.load_or_fail()?;
    let script = Script {
        code: read_script(&args.script)?,
        jailer: args.jailer.path()?,
        state_dir: args.state.dir.clone(),
        workspace: args.workspace.clone(),
        live: args.live,
        forked: args.forked,
        in_place: args.in_place,
    };
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
    let run = run_script(&policy, script, &sink)?;
    let outcome = &run.result.outcome;
    if json {
        println!("{}", json_record(&run));
    } else if let Some(e) = &outcome.setup_error {
        eprintln!("prims: {}", e.message);
    }
    Ok(exit_code(outcome))
}

fn exit_code(o: &Outcome) -> i32 {
    match o.status {
        Status::Ok => 0,
        Status::Exit | Status::Error => o.exit_code.unwrap_or(1),
        Status::Signal => 128 + o.signal.unwrap_or(0),
        // `prims run` has no server to stop: a Ctrl-C ends it at once.
        Status::Timeout | Status::Stopped => EXIT_TIMEOUT,
        Status::Oom => EXIT_OOM,
        Status::SetupError => EXIT_SETUP,
    }
}

fn json_record(run: &ScriptRun) -> serde_json::Value {
    let (r, ws) = (&run.result, &run.workspace);
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
        obj.insert("host_uid".into(), run.host_uid.into());
    }
    v
}
