//! End-to-end harness for the front-end tests: a real `prims supervisor`
//! (root) and a real `prims mcp` (dropped to the `prims` system user, created
//! as `prims serve` creates it) on a free loopback port, each with its own
//! state dir, cgroup parent and uid range; killed and cleaned up on drop
//! (loop-mounted session images included).
#![allow(dead_code)] // each test binary uses a different part

pub mod client;
pub mod http_server;
pub mod stream_server;
pub mod tasks;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

use prims_supervisor::accounts::{ensure_system_user, FRONTEND_USER};
use prims_tests::policy::{with_defaults, TEST_DEFAULTS};

pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the MCP end-to-end tests need root (they start the supervisor)"
    );
}

/// `target/<profile>/prims`, next to the test's own `deps/` directory.
pub fn prims_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("prims");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p prims` first",
        bin.display()
    );
    bin
}

pub struct Stack {
    sup: Option<Child>,
    front: Option<Child>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub port: u16,
    cgroup_parent: String,
    /// `--node N` for both processes: a cluster's node N.
    node: Option<u16>,
}

impl Stack {
    /// Start both processes. `policy_extra` is TOML for sections other than
    /// `[python]`, `[cgroup]` and `[identity]`; `config` the front-end config.
    pub fn start(policy_extra: &str, config: Option<&str>) -> Stack {
        Stack::start_as(policy_extra, config, None)
    }

    /// Node `node` of a cluster (`--node`), with no warm pool, so that its
    /// session count moves only with the test's calls.
    pub fn start_node(node: u16) -> Stack {
        Stack::start_as("[interpreters]\npool_size = 0\n", None, Some(node))
    }

    fn start_as(policy_extra: &str, config: Option<&str>, node: Option<u16>) -> Stack {
        require_root();
        // The account `prims serve` creates on a first start, made the same way.
        ensure_system_user(FRONTEND_USER, "PRIMS MCP front-end")
            .expect("the front-end's system user");
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("prims-mcpt-{}-{n}", std::process::id());
        let dir = PathBuf::from("/var/tmp").join(&tag);
        std::fs::create_dir_all(&dir).expect("test dir");
        let cgroup_parent = format!("{tag}-cg");
        let uid_base = 700_000 + ((std::process::id() % 50) * 20 + n % 20) * 1000;
        let policy = dir.join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                "{}\n[python]\ndefault_packages = []\n{}[cgroup]\nparent = \"{cgroup_parent}\"\n\
                 [identity]\nuid_base = {uid_base}\nuid_count = 1000\n",
                with_defaults(policy_extra, TEST_DEFAULTS),
                prims_tests::harness::ipython_site_key()
            ),
        )
        .expect("policy");
        let mut s = Stack {
            sup: None,
            front: None,
            socket: dir.join("supervisor.sock"),
            state: dir.join("state"),
            port: 0,
            dir,
            cgroup_parent,
            node,
        };
        s.spawn_supervisor(&policy);
        s.spawn_frontend(&policy, config);
        s
    }

    fn node_args(&self) -> Vec<String> {
        self.node
            .map(|n| vec!["--node".to_owned(), n.to_string()])
            .unwrap_or_default()
    }

    fn log_file(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(name))
            .expect("log file")
    }

    fn spawn_supervisor(&mut self, policy: &Path) {
        let child = Command::new(prims_bin())
            .args(["supervisor", "--policy"])
            .arg(policy)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--socket")
            .arg(&self.socket)
            .args([
                "--allow-uid",
                FRONTEND_USER,
                "--socket-group",
                FRONTEND_USER,
            ])
            .args(self.node_args())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file("supervisor.log"))
            .spawn()
            .expect("starting prims supervisor");
        self.sup = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.socket.exists() {
            assert!(
                Instant::now() < deadline,
                "no supervisor socket:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn spawn_frontend(&mut self, policy: &Path, config: Option<&str>) {
        let mut cmd = Command::new(prims_bin());
        cmd.args([
            "mcp",
            "--listen",
            "127.0.0.1:0",
            "--user",
            FRONTEND_USER,
            "--policy",
        ])
        .arg(policy)
        .arg("--socket")
        .arg(&self.socket)
        .args(self.node_args());
        if let Some(c) = config {
            let path = self.dir.join("frontend.toml");
            std::fs::write(&path, c).expect("config");
            cmd.arg("--config").arg(path);
        }
        let child = cmd
            .env("RUST_LOG", "prims_mcp=debug,info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file("frontend.log"))
            .spawn()
            .expect("starting prims mcp");
        self.front = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.read("frontend.log");
            if let Some(rest) = log.split("serving MCP at http://127.0.0.1:").nth(1) {
                let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
                self.port = port.parse().expect("port");
                return;
            }
            if let Some(Ok(Some(st))) = self.front.as_mut().map(Child::try_wait) {
                panic!("prims mcp exited with {st}:\n{}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "prims mcp did not start:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill the front-end (SIGKILL: no goodbye to anyone) and start a new
    /// one on the same supervisor; its port changes.
    pub fn restart_frontend(&mut self) {
        if let Some(mut c) = self.front.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let log = self.dir.join("frontend.log");
        let n = (1..).find(|i| !self.dir.join(format!("frontend.{i}.log")).exists());
        let old = self.dir.join(format!("frontend.{}.log", n.unwrap_or(0)));
        std::fs::rename(&log, old).expect("keeping the old front-end log");
        let config = self.dir.join("frontend.toml");
        let config = std::fs::read_to_string(config).ok();
        self.spawn_frontend(&self.dir.join("policy.toml"), config.as_deref());
    }

    fn read(&self, name: &str) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.join(name)) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    pub fn logs(&self) -> String {
        format!(
            "--- supervisor.log\n{}\n--- frontend.log\n{}",
            self.read("supervisor.log"),
            self.read("frontend.log")
        )
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn url(&self) -> String {
        format!("{}/mcp", self.base())
    }

    pub fn frontend_pid(&self) -> u32 {
        self.front.as_ref().expect("front-end running").id()
    }

    pub fn supervisor_pid(&self) -> u32 {
        self.sup.as_ref().expect("supervisor running").id()
    }

    /// A session's workspace on the host (the supervisor's view).
    /// Where the supervisor keeps session `session_id`: under its name,
    /// the keyed hash of the id.
    pub fn workspace(&self, session_id: &str) -> PathBuf {
        let key = prims_supervisor::sessions::SessionKey::load_or_create(&self.state)
            .expect("the supervisor's session key");
        self.state.join("sessions").join(key.name_of(session_id))
    }

    /// A root connection to the supervisor, to check its state directly.
    pub async fn supervisor(&self) -> prims_protocol::client::Client {
        prims_protocol::client::Client::connect(&self.socket, "prims-mcp-tests")
            .await
            .expect("connecting to the supervisor")
    }
}

/// Peak resident memory of process `pid` so far (`VmHWM`), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in /proc/{pid}/status"));
    kib * 1024
}

impl Drop for Stack {
    fn drop(&mut self) {
        for c in [self.front.take(), self.sup.take()].into_iter().flatten() {
            let mut c = c;
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        prims_tests::teardown::unmount_below(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
        prims_tests::teardown::remove_cgroup_parent(&self.cgroup_parent);
    }
}
