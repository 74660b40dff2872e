//! Real S3-compatible servers on loopback, installed by
//! `tests/fixtures/s3.sh`, driven with boto3 through `s3_client.py`.
//! Anything that does not work is a panic with the reason: these tests fail,
//! they never skip.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub const ACCESS_KEY: &str = "AKIDPRIMSEGRESSTEST";
pub const SECRET_KEY: &str = "prims-egress-test-secret";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// moto's server (PyPI): does not check presigned signatures.
    Moto,
    /// s3s-fs (crates.io): checks SigV4, presigned URLs included.
    S3s,
}

struct Fixtures {
    python: PathBuf,
    moto_server: PathBuf,
    s3s_fs: PathBuf,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let script = fixtures_dir().join("s3.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "S3 FIXTURE INSTALL FAILED: {} exited with {}; see its messages above",
            script.display(),
            out.status
        );
        let get = |key: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("s3.sh printed no {key}= line:\n{stdout}"))
        };
        Fixtures {
            python: get("PYTHON"),
            moto_server: get("MOTO_SERVER"),
            s3s_fs: get("S3S_FS"),
        }
    })
}

pub struct S3Server {
    pub kind: Kind,
    pub endpoint: String,
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// Why a start attempt did not give a server.
enum NotReady {
    /// The child exited: most often its port was taken between
    /// `free_port` and its bind, by a process outside this binary.
    Exited(String),
    TimedOut(String),
}

/// Servers start one at a time. `free_port` releases the port before the
/// child binds it, so two starts at once could be handed the same port: the
/// loser's bind fails, and its readiness probe would reach the winner.
static STARTING: Mutex<()> = Mutex::new(());

impl S3Server {
    /// Starts a server of `kind` on 127.0.0.1 and waits until it accepts.
    pub fn start(kind: Kind) -> S3Server {
        let _one_at_a_time = STARTING.lock().unwrap_or_else(|e| e.into_inner());
        let mut last = String::new();
        for _ in 0..3 {
            match S3Server::try_start(kind) {
                Ok(server) => return server,
                Err(NotReady::Exited(why)) => last = why,
                Err(NotReady::TimedOut(why)) => panic!("S3 SERVER {kind:?} DID NOT START: {why}"),
            }
        }
        panic!("S3 SERVER {kind:?} DID NOT START in 3 tries; the last:\n{last}")
    }

    fn try_start(kind: Kind) -> Result<S3Server, NotReady> {
        let f = fixtures();
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("server.log");
        let port = free_port();
        let mut cmd = match kind {
            Kind::Moto => {
                let mut c = Command::new(&f.moto_server);
                c.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
                c
            }
            Kind::S3s => {
                let data = dir.path().join("data");
                std::fs::create_dir(&data).expect("s3s data dir");
                let mut c = Command::new(&f.s3s_fs);
                c.args(["--host", "127.0.0.1", "--port", &port.to_string()])
                    .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
                    .arg(&data);
                c
            }
        };
        let log_file = std::fs::File::create(&log).expect("server log");
        let child = cmd
            .stdout(log_file.try_clone().expect("log fd"))
            .stderr(log_file)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("S3 SERVER {kind:?} DID NOT START: {e}"));
        let mut server = S3Server {
            kind,
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
            dir,
        };
        server.wait_ready(port, &log)?;
        Ok(server)
    }

    /// Waits until the port accepts while our child still runs: a child
    /// that exited did not bind it, whoever answers.
    fn wait_ready(&mut self, port: u16, log: &Path) -> Result<(), NotReady> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let why = |what: String| {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            format!("127.0.0.1:{port} ({what}):\n{text}")
        };
        loop {
            let accepts = TcpStream::connect(("127.0.0.1", port)).is_ok();
            if let Some(status) = self.child.try_wait().ok().flatten() {
                return Err(NotReady::Exited(why(format!("exited: {status}"))));
            }
            if accepts {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(NotReady::TimedOut(why("timed out".to_string())));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `s3_client.py` (boto3) and returns its JSON answer.
    fn client(&self, args: &[&str]) -> serde_json::Value {
        let f = fixtures();
        let out = Command::new(&f.python)
            .arg(fixtures_dir().join("s3_client.py"))
            .args([&self.endpoint, ACCESS_KEY, SECRET_KEY])
            .args(args)
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .current_dir(self.dir.path())
            .output()
            .expect("run s3_client.py");
        assert!(
            out.status.success(),
            "s3_client.py {args:?} against {:?} failed:\n{}",
            self.kind,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("s3_client.py prints JSON")
    }

    pub fn create_bucket(&self, bucket: &str) {
        self.client(&["create-bucket", bucket]);
    }

    /// A SigV4 presigned PUT URL that signs `content_type` too.
    pub fn presign_put(&self, bucket: &str, key: &str, content_type: &str) -> String {
        let v = self.client(&["presign-put", bucket, key, content_type]);
        v["url"].as_str().expect("url").to_string()
    }

    /// The stored object's bytes and Content-Type, or `None` if missing.
    pub fn get(&self, bucket: &str, key: &str) -> Option<(Vec<u8>, Option<String>)> {
        let v = self.client(&["get", bucket, key]);
        if !v["found"].as_bool().expect("found") {
            return None;
        }
        let hex = v["body_hex"].as_str().expect("body_hex");
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        Some((bytes, v["content_type"].as_str().map(str::to_string)))
    }
}
