//! The install jail's program (`session_install.py`) killed at every step
//! of its moves into a session's site directory: run on the host's python
//! against a site directory in a temporary directory, with a stand-in for
//! uv, and SIGKILLed by an audit hook just before its n-th rename, for
//! every n. Whatever the step, no distribution's metadata is in the site
//! directory without its files; once the tidy step (or the next install)
//! has run, no file is there without its distribution's metadata, and a
//! package is importable exactly when its metadata is there. And the
//! session's installs take turns: one waits while another holds the lock.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const PROGRAM: &str = include_str!("../src/envs/session_install.py");
const PYTHON: &str = "/usr/bin/python3";

/// Runs the program from `PRIMS_PROGRAM` with its JSON in `argv[1]`,
/// SIGKILLed just before its `PRIMS_KILL_AT`-th step, a rename or a
/// directory made (`os.rename` and `os.replace` raise the one audit event,
/// `os.makedirs` the other, before they act); prints how many steps it
/// took to stderr when it ends.
const WRAPPER: &str = "import atexit, os, signal, sys\n\
    kill_at = int(os.environ['PRIMS_KILL_AT'])\n\
    seen = [0]\n\
    def hook(event, args):\n\
    \x20   if event in ('os.rename', 'os.mkdir'):\n\
    \x20       seen[0] += 1\n\
    \x20       if seen[0] == kill_at:\n\
    \x20           os.kill(os.getpid(), signal.SIGKILL)\n\
    sys.addaudithook(hook)\n\
    atexit.register(lambda: sys.stderr.write('steps=%d\\n' % seen[0]))\n\
    with open(os.environ['PRIMS_PROGRAM']) as f:\n\
    \x20   code = compile(f.read(), 'session_install.py', 'exec')\n\
    exec(code, {'__name__': '__main__'})\n";

/// uv as the program runs it (`... --target DIR --constraint FILE --
/// REQS`): each requirement becomes a distribution in the target, `alpha`
/// with `beta` as its dependency, and `gamma` (which the session has) is
/// there too, as uv installs every pinned package into an empty target.
/// Each has a package with a subpackage, a module in a namespace package
/// the others share, and a RECORD that lists its metadata first.
const FAKE_UV: &str = "import base64, hashlib, os, sys\n\
    argv = sys.argv\n\
    target = argv[argv.index('--target') + 1]\n\
    reqs = argv[argv.index('--') + 1:]\n\
    names = set(reqs) | {'gamma'}\n\
    if 'alpha' in names:\n\
    \x20   names.add('beta')\n\
    for name in sorted(names):\n\
    \x20   dist = '%s-1.0.dist-info' % name\n\
    \x20   files = {dist + '/METADATA': 'Metadata-Version: 2.1\\nName: %s\\nVersion: 1.0\\n' % name,\n\
    \x20            dist + '/INSTALLER': 'uv\\n'}\n\
    \x20   files[name + '/__init__.py'] = 'from . import sub\\nVALUE = %r\\n' % name\n\
    \x20   files[name + '/sub/__init__.py'] = 'from . import m0, m1, m2\\n'\n\
    \x20   for i in range(3):\n\
    \x20       files['%s/sub/m%d.py' % (name, i)] = 'X = %d\\n' % i\n\
    \x20   files['nsp/%s.py' % name] = ''\n\
    \x20   record = []\n\
    \x20   for path, text in files.items():\n\
    \x20       full = os.path.join(target, path)\n\
    \x20       os.makedirs(os.path.dirname(full), exist_ok=True)\n\
    \x20       with open(full, 'w') as f:\n\
    \x20           f.write(text)\n\
    \x20       digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()\n\
    \x20       record.append('%s,sha256=%s,%d' % (path, digest, len(text)))\n\
    \x20   record.append(dist + '/RECORD,,')\n\
    \x20   with open(os.path.join(target, dist, 'RECORD'), 'w') as f:\n\
    \x20       f.write('\\n'.join(record) + '\\n')\n\
    print('Installed %d packages' % len(names))\n";

/// A session's workspace in a temporary directory: its site directory
/// holds `gamma` 1.0, whole.
struct Workspace {
    dir: tempfile::TempDir,
    program: PathBuf,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = dir.path().join("session_install.py");
        std::fs::write(&program, PROGRAM).expect("the program");
        std::fs::create_dir_all(dir.path().join("venv-site")).expect("venv site");
        let ws = Workspace { dir, program };
        let out = ws.run(&ws.install(&[]), None);
        assert_eq!(
            verdict(&out),
            r#"{"status": "installed", "added": ["gamma==1.0"]}"#
        );
        ws
    }

    fn prims(&self) -> PathBuf {
        self.dir.path().join(".prims")
    }

    fn site(&self) -> PathBuf {
        self.prims().join("site-packages")
    }

    fn install(&self, reqs: &[&str]) -> String {
        serde_json::json!({
            "uv": [PYTHON, "-I", "-c", FAKE_UV],
            "requirements": reqs,
            "site": self.site(),
            "venv_site": self.dir.path().join("venv-site"),
        })
        .to_string()
    }

    fn tidy(&self) -> String {
        serde_json::json!({"tidy": true, "site": self.site()}).to_string()
    }

    fn command(&self, args: &str, kill_at: Option<usize>) -> Command {
        let mut cmd = Command::new(PYTHON);
        cmd.args(["-I", "-S", "-c", WRAPPER, args])
            .env("PRIMS_PROGRAM", &self.program)
            .env("PRIMS_KILL_AT", kill_at.unwrap_or(0).to_string());
        cmd
    }

    /// Runs the program with `args`, killed before its `kill_at`-th rename.
    fn run(&self, args: &str, kill_at: Option<usize>) -> Output {
        let out = self
            .command(args, kill_at)
            .output()
            .expect("running python");
        if kill_at.is_none() {
            assert!(out.status.success(), "{}", text(&out));
        }
        out
    }
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The program's verdict (its last line, `PRIMS-INSTALL ` cut off).
fn verdict(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    match last.strip_prefix("PRIMS-INSTALL ") {
        Some(v) => v.to_string(),
        None => panic!("no verdict: {}", text(out)),
    }
}

/// How many steps a whole run took.
fn steps(out: &Output) -> usize {
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("steps="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {}", text(out)))
}

/// Every file under `dir`, relative to `base`.
fn files_under(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            files_under(base, &path, out);
        } else if let Ok(rel) = path.strip_prefix(base) {
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

/// The distributions in `site` (their `.dist-info` names). Fails the test
/// if one's metadata is not whole or a file its RECORD lists is missing.
fn whole_distributions(site: &Path, when: &str) -> BTreeSet<String> {
    let mut dists = BTreeSet::new();
    for e in std::fs::read_dir(site).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".dist-info") {
            continue;
        }
        let record = std::fs::read_to_string(e.path().join("RECORD"))
            .unwrap_or_else(|err| panic!("{when}: {name} has no RECORD ({err})"));
        assert!(
            e.path().join("METADATA").is_file(),
            "{when}: {name} has no METADATA"
        );
        for line in record.lines() {
            let path = line.split(',').next().unwrap_or_default();
            assert!(
                site.join(path).is_file(),
                "{when}: {name} is in the site directory without its {path}"
            );
        }
        dists.insert(name);
    }
    dists
}

/// Directories under `dir` with nothing in them.
fn empty_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    for e in &entries {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            empty_dirs(&e.path(), out);
        }
    }
    if entries.is_empty() {
        out.push(dir.to_path_buf());
    }
}

/// Files in `site` that no distribution's RECORD lists (but for the
/// bytecode of a module one lists).
fn orphans(site: &Path) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    files_under(site, site, &mut all);
    let mut owned = BTreeSet::new();
    for e in std::fs::read_dir(site).into_iter().flatten().flatten() {
        if let Ok(record) = std::fs::read_to_string(e.path().join("RECORD")) {
            owned.extend(
                record
                    .lines()
                    .filter_map(|l| l.split(',').next())
                    .map(str::to_string),
            );
        }
    }
    all.difference(&owned)
        .filter(|f| {
            let source = f.split_once("/__pycache__/").and_then(|(dir, pyc)| {
                let (stem, _) = pyc.split_once('.')?;
                Some(format!("{dir}/{stem}.py"))
            });
            source.is_none_or(|s| !owned.contains(&s))
        })
        .cloned()
        .collect()
}

/// Which of `names` python imports from `site` alone (an empty directory
/// imports, as a namespace package), and which have metadata there, as
/// `name:import:meta`; it writes no bytecode.
fn importable(site: &Path, names: &[&str]) -> String {
    imports(site, names, false)
}

/// [`importable`], writing bytecode into `site` if `write_bytecode`, as
/// a session's interpreter does.
fn imports(site: &Path, names: &[&str], write_bytecode: bool) -> String {
    let code = "import importlib, importlib.metadata, sys\n\
        site, names = sys.argv[1], sys.argv[2:]\n\
        sys.path.insert(0, site)\n\
        for name in names:\n\
        \x20   try:\n\
        \x20       importlib.import_module(name)\n\
        \x20       found = 'yes'\n\
        \x20   except Exception:\n\
        \x20       found = 'no'\n\
        \x20   try:\n\
        \x20       importlib.import_module(name + '.sub.m2')\n\
        \x20   except Exception:\n\
        \x20       pass\n\
        \x20   try:\n\
        \x20       importlib.metadata.version(name)\n\
        \x20       meta = 'yes'\n\
        \x20   except importlib.metadata.PackageNotFoundError:\n\
        \x20       meta = 'no'\n\
        \x20   print('%s:%s:%s' % (name, found, meta))\n";
    let mut cmd = Command::new(PYTHON);
    cmd.args(["-I", "-S"]);
    if !write_bytecode {
        cmd.arg("-B");
    }
    let out = cmd
        .args(["-c", code])
        .arg(site)
        .args(names)
        .output()
        .expect("running python");
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .replace('\n', " ")
}

#[test]
fn a_killed_install_leaves_each_distribution_whole_or_gone() {
    let whole = Workspace::new();
    let out = whole.run(&whole.install(&["alpha"]), None);
    assert_eq!(
        verdict(&out),
        r#"{"status": "installed", "added": ["alpha==1.0", "beta==1.0"]}"#
    );
    let steps = steps(&out);
    assert!(steps >= 20, "alpha and beta take a rename a file: {steps}");
    let gamma = "gamma-1.0.dist-info".to_string();
    for kill_at in 1..=steps {
        let ws = Workspace::new();
        let out = ws.run(&ws.install(&["alpha"]), Some(kill_at));
        assert!(
            out.status.code().is_none(),
            "not killed at step {kill_at}: {}",
            text(&out)
        );
        let when = format!("killed before step {kill_at}");
        let dists = whole_distributions(&ws.site(), &when);
        assert!(dists.contains(&gamma), "{when}: {dists:?}");
        // The session's code imports what it finds meanwhile.
        imports(&ws.site(), &["alpha", "beta", "gamma", "nsp"], true);
        // Half the time the tidy step runs next (as after a cut install),
        // else the next install tidies first.
        let next = if kill_at % 2 == 0 {
            ws.tidy()
        } else {
            ws.install(&[])
        };
        let after = ws.run(&next, None);
        let expected = if kill_at % 2 == 0 {
            r#"{"status": "tidied"}"#
        } else {
            r#"{"status": "installed", "added": []}"#
        };
        assert_eq!(verdict(&after), expected, "{when}");
        let when = format!("{when}, then tidied");
        let dists = whole_distributions(&ws.site(), &when);
        assert!(dists.contains(&gamma), "{when}: {dists:?}");
        assert_eq!(orphans(&ws.site()), BTreeSet::new(), "{when}");
        let mut empty = Vec::new();
        empty_dirs(&ws.site(), &mut empty);
        assert!(
            empty.is_empty(),
            "{when}: empty directories left: {empty:?}"
        );
        let found = importable(&ws.site(), &["alpha", "beta", "gamma"]);
        for part in found.split(' ') {
            assert!(
                part.ends_with(":yes:yes") || part.ends_with(":no:no"),
                "{when}: a package importable without its metadata or the other way round: {found}"
            );
        }
        let left: Vec<_> = std::fs::read_dir(ws.prims().join("installs"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{when}: staging left: {left:?}");
        // And the install, done again, installs what is missing.
        let again = ws.run(&ws.install(&["alpha"]), None);
        let v = verdict(&again);
        assert!(v.starts_with(r#"{"status": "installed""#), "{when}: {v}");
        assert_eq!(
            importable(&ws.site(), &["alpha", "beta", "gamma"]),
            "alpha:yes:yes beta:yes:yes gamma:yes:yes",
            "{when}"
        );
        assert_eq!(orphans(&ws.site()), BTreeSet::new(), "{when}");
    }
}

#[test]
fn a_sessions_installs_take_turns() {
    let ws = Workspace::new();
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(ws.prims().join("install.lock"))
        .expect("the lock file");
    // SAFETY: flock has no memory-safety preconditions; the fd is open.
    let held = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(held, 0, "{}", std::io::Error::last_os_error());
    // A tidy step leaves it to the install that holds the lock.
    let tidy = ws.run(&ws.tidy(), None);
    assert_eq!(verdict(&tidy), r#"{"status": "busy"}"#);
    // An install waits for it, and touches nothing meanwhile.
    let mut child = ws
        .command(&ws.install(&["alpha"]), None)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running python");
    let mut stdout = BufReader::new(child.stdout.take().expect("its stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("a line");
    assert_eq!(
        line,
        "waiting for another install into this session to end\n"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        importable(&ws.site(), &["alpha", "beta"]),
        "alpha:no:no beta:no:no"
    );
    assert!(
        !ws.prims().join("installs").exists()
            || std::fs::read_dir(ws.prims().join("installs"))
                .expect("installs")
                .next()
                .is_none(),
        "it staged while another install held the lock"
    );
    let started = Instant::now();
    drop(lock);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("its output");
    let status = child.wait().expect("waiting for python");
    assert!(status.success(), "{rest}");
    assert!(
        rest.ends_with(
            "PRIMS-INSTALL {\"status\": \"installed\", \"added\": [\"alpha==1.0\", \"beta==1.0\"]}\n"
        ),
        "{rest}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(
        importable(&ws.site(), &["alpha", "beta"]),
        "alpha:yes:yes beta:yes:yes"
    );
}
