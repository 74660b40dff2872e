//! A real `prims supervisor` process for socket tests: its own state dir,
//! socket, cgroup parent (or another daemon's, see [`Daemon::start_beside`])
//! and uid range, killed and cleaned up on drop (including the loop-mounted
//! session images under its state dir).

use crate::harness::{prims_bin, require_root};
use crate::host::unique;
use crate::policy::{with_defaults, TEST_DEFAULTS};
use prims_protocol::client::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT_RANGE: AtomicU32 = AtomicU32::new(0);

pub struct Daemon {
    child: Option<Child>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub policy: PathBuf,
    cgroup_parent: String,
    uid_base: u32,
    /// Extra `prims supervisor` arguments, kept across restarts.
    args: Vec<String>,
    /// Extra keys of the `[python]` section, kept across reloads.
    python: String,
}

fn next_uid_base() -> u32 {
    let range = NEXT_RANGE.fetch_add(1, Ordering::Relaxed) + (std::process::id() % 97) * 8;
    400_000 + range * 1000
}

/// The policy every test daemon gets: `extra` over the tests' defaults, an
/// empty base environment (no downloads) with the `python` keys, a unique
/// cgroup parent and uid range.
fn base_policy(cgroup_parent: &str, uid_base: u32, extra: &str, python: &str) -> String {
    let extra = with_defaults(extra, TEST_DEFAULTS);
    // Interpreters run cells through IPython from the tests' IPython layer,
    // unless the test names its own layer.
    let ipython = if python.contains("ipython_") {
        String::new()
    } else {
        format!(
            "ipython_site = {:?}\n",
            crate::harness::ipython_site().display().to_string()
        )
    };
    format!(
        "{extra}\n[python]\ndefault_packages = []\nbuild_disk = \"1GiB\"\n{ipython}{python}\n[cgroup]\nparent = \"{cgroup_parent}\"\n\
         [identity]\nuid_base = {uid_base}\nuid_count = 1000\n"
    )
}

impl Daemon {
    /// Start a daemon. `extra` is policy TOML for sections other than
    /// `[python]`, `[cgroup]` and `[identity]`.
    pub fn start(extra: &str) -> Daemon {
        Daemon::start_with_args(extra, &[])
    }

    /// [`Daemon::start`] with extra `prims supervisor` arguments, e.g.
    /// `--allow-uid`.
    pub fn start_with_args(extra: &str, args: &[&str]) -> Daemon {
        Daemon::start_full(extra, "", args, None)
    }

    /// [`Daemon::start`] with extra keys of the `[python]` section (whose
    /// `default_packages` stays empty), e.g. `prewarm_imports`.
    pub fn start_with_python(extra: &str, python: &str) -> Daemon {
        Daemon::start_full(extra, python, &[], None)
    }

    /// [`Daemon::start`] on the cgroup parent of `other`, as a second
    /// supervisor of the host would run beside it (with its own state
    /// directory, socket and uid range).
    pub fn start_beside(extra: &str, other: &Daemon) -> Daemon {
        Daemon::start_full(extra, "", &[], Some(&other.cgroup_parent))
    }

    fn start_full(extra: &str, python: &str, args: &[&str], parent: Option<&str>) -> Daemon {
        require_root();
        let tag = unique("sup");
        let dir = PathBuf::from("/var/tmp").join(&tag);
        std::fs::create_dir_all(&dir).expect("test dir");
        let cgroup_parent = parent.map_or_else(|| format!("prims-test-{tag}"), str::to_string);
        let policy = dir.join("policy.toml");
        let uid_base = next_uid_base();
        std::fs::write(
            &policy,
            base_policy(&cgroup_parent, uid_base, extra, python),
        )
        .expect("policy");
        let mut d = Daemon {
            child: None,
            socket: dir.join("supervisor.sock"),
            state: dir.join("state"),
            policy,
            dir,
            cgroup_parent,
            uid_base,
            args: args.iter().map(|a| a.to_string()).collect(),
            python: python.to_string(),
        };
        d.spawn();
        d
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("daemon.log"))
            .expect("log file");
        let child = Command::new(prims_bin())
            .arg("supervisor")
            .arg("--policy")
            .arg(&self.policy)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--socket")
            .arg(&self.socket)
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting prims supervisor");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("the supervisor exited with {status}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the supervisor did not listen within 20 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// [`Daemon::reload`], then waits (at most `within`) until the
    /// supervisor logs that the new policy is in force.
    pub fn reload_and_wait(&self, extra: &str, within: Duration) {
        let before = self.log().matches("policy reloaded").count();
        self.reload(extra);
        let deadline = Instant::now() + within;
        while self.log().matches("policy reloaded").count() == before {
            assert!(Instant::now() < deadline, "no reload:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Replace the policy file (same base sections) and send SIGHUP.
    pub fn reload(&self, extra: &str) {
        std::fs::write(
            &self.policy,
            base_policy(&self.cgroup_parent, self.uid_base, extra, &self.python),
        )
        .expect("policy");
        self.hangup();
    }

    /// Write `text` as the policy file verbatim (e.g. an invalid one) and send SIGHUP.
    pub fn reload_raw(&self, text: &str) {
        std::fs::write(&self.policy, text).expect("policy");
        self.hangup();
    }

    fn hangup(&self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGHUP) };
    }

    /// This daemon's cgroup parent, in every hierarchy that has it.
    pub fn cgroup_parent_dirs(&self) -> Vec<PathBuf> {
        crate::teardown::cgroup_dirs_named(&self.cgroup_parent)
    }

    /// The names of the job cgroups under this daemon's cgroup parent (in
    /// any hierarchy): its own, and those of any daemon started beside it.
    pub fn job_cgroups(&self) -> BTreeSet<String> {
        self.cgroup_parent_dirs()
            .iter()
            .flat_map(|p| std::fs::read_dir(p).into_iter().flatten().flatten())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect()
    }

    /// `cpu.shares` of each job cgroup in the v1 cpu hierarchy, by name.
    pub fn job_cpu_shares(&self) -> BTreeMap<String, String> {
        let mut shares = BTreeMap::new();
        for parent in self.cgroup_parent_dirs() {
            for e in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                if let Ok(v) = std::fs::read_to_string(e.path().join("cpu.shares")) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    shares.insert(name, v.trim().to_string());
                }
            }
        }
        shares
    }

    /// How many jobs run at batch CPU weight once `n` do (or 10 s passed).
    pub fn wait_for_batch_jobs(&self, n: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let batch = self
                .job_cpu_shares()
                .values()
                .filter(|v| *v == "102")
                .count();
            if batch >= n || Instant::now() > deadline {
                return batch;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The prefix of this supervisor's job cgroups (`job-<instance>-`), as
    /// its log names it.
    pub fn job_prefix(&self) -> String {
        let log = self.log();
        let named = log
            .split("are named ")
            .nth(1)
            .and_then(|rest| rest.split('…').next())
            .unwrap_or_else(|| panic!("no job-cgroup prefix in the log:\n{log}"));
        named.to_string()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// kill -9 the daemon and start it again on the same state.
    pub fn crash_and_restart(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.socket);
        self.spawn();
    }

    /// Stops the daemon as systemd does (SIGTERM, then waiting for it to
    /// exit) and starts it again on the same state.
    pub fn restart_gracefully(&mut self) {
        self.stop_gracefully();
        self.spawn();
    }

    /// Stops the daemon as systemd does: SIGTERM, then waits for it to
    /// exit (its clean stop), and returns how it exited. Its state stays.
    pub fn stop_gracefully(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.take().map(|mut c| {
            // SAFETY: kill(2) of our own child, which has not been reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(status) = c.try_wait().ok().flatten() {
                    break status;
                }
                assert!(
                    Instant::now() < deadline,
                    "the supervisor did not stop within 60 s of SIGTERM:\n{}",
                    self.log()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let _ = std::fs::remove_file(&self.socket);
        status
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.socket, "prims-tests")
            .await
            .unwrap_or_else(|e| panic!("connecting: {e}\n{}", self.log()))
    }

    /// Where the daemon keeps session `session_id`: under its name, the
    /// keyed hash of the id.
    pub fn workspace(&self, session_id: &str) -> PathBuf {
        let key = prims_supervisor::sessions::SessionKey::load_or_create(&self.state)
            .expect("the daemon's session key");
        self.state.join("sessions").join(key.name_of(session_id))
    }
}

/// A run of `code` in session `session_id` with no tenant, no
/// requirements and the policy's limits.
pub fn run_req(session_id: &str, code: &str) -> prims_protocol::wire::RunRequest {
    prims_protocol::wire::RunRequest {
        session_id: session_id.to_string(),
        tenant: None,
        code: code.to_string(),
        requirements: vec![],
        limits: prims_protocol::jail::LimitRequest::default(),
        fresh: false,
        network: None,
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
        crate::teardown::unmount_below(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
        crate::teardown::remove_cgroup_parent(&self.cgroup_parent);
    }
}
