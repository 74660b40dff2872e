//! The filesystem rows of the escape catalogue of shared/notes/jail-hardening.md
//! that are about host paths bound into the jail: the interpreter, read-only
//! binds, and symlinks planted in the workspace. Every row must fail inside
//! the jail and leave the host untouched. Each test is named for its escape
//! class.

use prims_tests::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

// ------------------------------------------------------------ interpreter

#[test]
fn escape_interpreter_binary_not_writable() {
    // 'r+b' (O_RDWR, no O_TRUNC): the kernel checks permissions before the
    // mount, and the binary belongs to host root, unmapped in the jail, so
    // the answer is EACCES whether or not /usr is read-only.
    // 'wb' (O_TRUNC) and creating a file check the mount first: EROFS proves
    // the bind is read-only (without it the answer would be EACCES).
    let run = Job::probe(
        "err('python_rplus', open, '/usr/bin/python3.11', 'r+b')\n\
         err('python_wb', open, '/usr/bin/python3.11', 'wb')\n\
         err('usr_bin_create', open, '/usr/bin/prims-test-new', 'w')\n\
         err('venv_create', open, '/venv/prims-test-new', 'w')\n\
         err('venv_bin_create', open, '/venv/bin/prims-test-new', 'w')\n\
         kv('python_realpath', os.path.realpath('/venv/bin/python'))\n\
         kv('executable', sys.executable)\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .os_errno("python_rplus", libc::EACCES)
        .os_errno("python_wb", libc::EROFS)
        .os_errno("usr_bin_create", libc::EROFS)
        .os_errno("venv_create", libc::EROFS)
        .os_errno("venv_bin_create", libc::EROFS)
        .kv_eq("executable", "/venv/bin/python")
        .finish();
}

#[test]
fn escape_interpreter_pid1_exe_environ_unreadable() {
    let run = Job::probe(
        "err('pid1_exe', os.readlink, '/proc/1/exe')\n\
         err('pid1_environ', lambda: open('/proc/1/environ', 'rb').read())\n\
         err('pid1_mem', open, '/proc/1/mem', 'rb')\n\
         err('pid1_root', os.listdir, '/proc/1/root')\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .os_errno("pid1_exe", libc::EACCES)
        .os_errno("pid1_environ", libc::EACCES)
        .os_errno("pid1_mem", libc::EACCES)
        .os_errno("pid1_root", libc::EACCES)
        .finish();
}

/// What python can learn of the jail's init (pid 1, the jailer after its
/// clone): its command line is the bare program name and fd numbers, never
/// the jailer's host path; the files that say where it lives or what it
/// maps are ptrace-protected (the init's real and saved uids are not
/// python's); and the rest names no host path: not the jailer's, not the
/// repository's, not the state directory's, not the workspace's.
#[test]
fn escape_interpreter_pid1_names_no_host_path() {
    let run = Job::probe(
        "kv('cmdline', *open('/proc/1/cmdline', 'rb').read().rstrip(b'\\0').decode().split('\\0'))\n\
         kv('comm', open('/proc/1/comm').read().strip())\n\
         err('pid1_exe', os.readlink, '/proc/1/exe')\n\
         err('pid1_cwd', os.readlink, '/proc/1/cwd')\n\
         err('pid1_root', os.readlink, '/proc/1/root')\n\
         err('pid1_environ', lambda: open('/proc/1/environ', 'rb').read())\n\
         err('pid1_maps', lambda: open('/proc/1/maps').read())\n\
         err('pid1_smaps', lambda: open('/proc/1/smaps').read())\n\
         err('pid1_map_files', os.listdir, '/proc/1/map_files')\n\
         err('pid1_auxv', lambda: open('/proc/1/auxv', 'rb').read())\n\
         kv('mountinfo_is_own', open('/proc/1/mountinfo').read() == open('/proc/self/mountinfo').read())\n\
         for _f in ['cmdline', 'comm', 'status', 'stat', 'sched', 'cgroup', 'mountinfo']:\n\
         \x20   print('DUMP', _f, repr(open('/proc/1/' + _f, 'rb').read()), flush=True)\n",
    )
    .run();
    run.assert_ok();
    let jailer = jailer_bin();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root");
    let workspace = run.json["workspace"].as_str().unwrap_or("<missing>");
    // `prims run` keeps its empty venv in the default state directory.
    let host_paths: Vec<String> = [
        jailer.display().to_string(),
        repo.display().to_string(),
        "/var/lib/prims".to_string(),
        workspace.to_string(),
    ]
    .into();
    let mut c = run.checks();
    let mut argv = vec!["prims-jailer", "--spec-fd", "3", "--outcome-fd", "4"];
    if prims_tests::harness::live_mode() {
        argv.extend(["--channel-fd", "6"]);
    }
    if prims_tests::harness::forked_mode() {
        argv.extend(["--adopt-fd", "7"]);
    }
    c.kv_eq("cmdline", &argv.join(" "))
        .kv_eq("comm", "prims-jailer")
        .os_errno("pid1_exe", libc::EACCES)
        .os_errno("pid1_cwd", libc::EACCES)
        .os_errno("pid1_root", libc::EACCES)
        .os_errno("pid1_environ", libc::EACCES)
        .os_errno("pid1_maps", libc::EACCES)
        .os_errno("pid1_smaps", libc::EACCES)
        .os_errno("pid1_map_files", libc::EACCES)
        .os_errno("pid1_auxv", libc::EACCES)
        // The init shares python's mount namespace: its table tells python
        // nothing its own does not. (Under `prims run` that table's bind
        // roots name the temporary workspace and venv; the daemon's sessions
        // and environments are images whose roots are `/`, see
        // supervisor_ids.rs.)
        .kv_eq("mountinfo_is_own", "True");
    let mut dumped = 0;
    for line in run.lines() {
        let Some((file, text)) = line
            .strip_prefix("DUMP ")
            .and_then(|rest| rest.split_once(' '))
        else {
            continue;
        };
        dumped += 1;
        let searched = if file == "mountinfo" {
            &host_paths[..2]
        } else {
            &host_paths[..]
        };
        for p in searched {
            c.check(
                !text.contains(p.as_str()),
                format!("/proc/1/{file} does not name the host path {p}: {text}"),
            );
        }
    }
    c.check(
        dumped == 7,
        format!("seven /proc/1 files read, got {dumped}"),
    )
    .finish();
}

/// Not a catalogue row, but the mechanism behind "interpreter": a path in
/// `filesystem.ro_binds` that the jail user owns on the host (so only the
/// read-only mount stops a write) must answer EROFS.
#[test]
fn escape_ro_bind_owned_by_jail_user_erofs() {
    require_root();
    let base = tempfile::Builder::new()
        .prefix("prims-test-robind-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = base.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("file.txt"), "original").unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    std::fs::set_permissions(
        dir.join("file.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let uid = 200_000;
    for p in [dir.clone(), dir.join("file.txt")] {
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
    }
    let d = dir.to_str().unwrap();
    let policy = format!(
        "[limits]\nwall_time = \"10s\"\n[identity]\nuid_base = {uid}\n[filesystem]\nro_binds = [\"/usr\", \"/lib\", \"/lib64\", \"/bin\", \"{d}\"]\n"
    );
    let code = format!(
        "kv('read', open({f}).read())\n\
         err('rplus', open, {f}, 'r+b')\n\
         err('create', open, {d} + '/new.txt', 'w')\n\
         err('unlink', os.unlink, {f})\n",
        f = py_str(&format!("{d}/file.txt")),
        d = py_str(d)
    );
    let run = Job::probe(&code).policy(policy).run();
    run.assert_ok();
    run.checks()
        .kv_eq("read", "original")
        .os_errno("rplus", libc::EROFS)
        .os_errno("create", libc::EROFS)
        .os_errno("unlink", libc::EROFS)
        .check(
            std::fs::read_to_string(dir.join("file.txt")).unwrap() == "original",
            "host file unchanged",
        )
        .finish();
}

// --------------------------------------------------------------- symlinks

fn meta_fingerprint(p: &Path) -> (u32, u32, u32, u64, i64, i64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.uid(), m.gid(), m.mode(), m.len(), m.mtime(), m.ctime())
}

#[test]
fn escape_symlinks_planted_links_stay_links() {
    require_root();
    let ws = workspace_dir();
    let shadow_before = meta_fingerprint(Path::new("/etc/shadow"));
    let shadow_bytes = std::fs::read("/etc/shadow").unwrap();
    let root_before = meta_fingerprint(Path::new("/"));
    let etc_before = meta_fingerprint(Path::new("/etc"));
    let run1 = Job::new(
        "import os\n\
         os.symlink('/etc/shadow', '/workspace/output/x')\n\
         os.symlink('/', '/workspace/output/up')\n\
         os.symlink('/etc', '/workspace/etc')\n\
         print('planted')\n",
    )
    .workspace(ws.path())
    .run();
    run1.assert_ok();
    // A second run in the same workspace reads through the links: inside
    // the jail they resolve inside the jail.
    let run2 = Job::probe(
        "err('read_x', open, '/workspace/output/x', 'rb')\n\
         err('read_up_shadow', open, '/workspace/output/up/etc/shadow', 'rb')\n\
         err('list_up_root', os.listdir, '/workspace/output/up/root')\n\
         kv('etc_link_has_shadow', 'shadow' in os.listdir('/workspace/etc'))\n\
         kv('etc_link_passwd_has_root', 'root:' in open('/workspace/etc/passwd').read())\n",
    )
    .workspace(ws.path())
    .run();
    run2.assert_ok();
    let out = ws.path().join("output");
    let x = std::fs::symlink_metadata(out.join("x"));
    let up = std::fs::symlink_metadata(out.join("up"));
    run2.checks()
        .os_errno("read_x", libc::ENOENT)
        .os_errno("read_up_shadow", libc::ENOENT)
        .os_errno("list_up_root", libc::ENOENT)
        // /workspace/etc -> /etc resolves to the jail's own small /etc.
        .kv_eq("etc_link_has_shadow", "False")
        .kv_eq("etc_link_passwd_has_root", "False")
        .check(
            x.as_ref()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false)
                && std::fs::read_link(out.join("x")).ok().as_deref()
                    == Some(Path::new("/etc/shadow")),
            format!("host output/x is still a symlink to /etc/shadow ({x:?})"),
        )
        .check(
            up.as_ref()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false),
            format!("host output/up is still a symlink ({up:?})"),
        )
        .check(
            meta_fingerprint(Path::new("/etc/shadow")) == shadow_before
                && std::fs::read("/etc/shadow").unwrap() == shadow_bytes,
            "host /etc/shadow untouched (owner, mode, size, mtime, ctime, bytes)",
        )
        .check(
            meta_fingerprint(Path::new("/")) == root_before,
            "host / ownership and mode untouched",
        )
        .check(
            meta_fingerprint(Path::new("/etc")) == etc_before,
            "host /etc ownership and mode untouched",
        )
        .finish();
}

/// The job replaces `output/` itself with a symlink to a host directory; the
/// next `prims run --workspace` creates and chowns `output/` and must not
/// follow the link.
#[test]
fn escape_symlinks_output_dir_swapped_for_link() {
    require_root();
    let ws = workspace_dir();
    let victim = tempfile::Builder::new()
        .prefix("prims-test-victim-")
        .tempdir()
        .unwrap();
    std::fs::write(victim.path().join("keep.txt"), "keep").unwrap();
    std::fs::set_permissions(
        victim.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let victim_before = meta_fingerprint(victim.path());
    let keep_before = meta_fingerprint(&victim.path().join("keep.txt"));
    let v = victim.path().to_str().unwrap();
    let run1 = Job::new(format!(
        "import os, shutil\n\
         shutil.rmtree('/workspace/output')\n\
         os.symlink({v}, '/workspace/output')\n\
         try:\n    os.rmdir('/workspace/mounts')\nexcept OSError as e:\n    print('mounts', e.errno)\n\
         print('swapped')\n",
        v = py_str(v)
    ))
    .workspace(ws.path())
    .run();
    run1.assert_ok();
    // The next run may refuse the workspace (exit 125 with a message) or run
    // with a fresh output/; either way it must not follow the link.
    let run2 = Job::new("open('/workspace/output/new.txt', 'w').write('x')\n")
        .workspace(ws.path())
        .run_raw();
    let refused = run2.code == Some(125) && run2.stderr_str().starts_with("prims: ");
    let ran = serde_json::from_slice::<serde_json::Value>(run2.stdout.trim_ascii()).is_ok();
    let victim_after = meta_fingerprint(victim.path());
    let mut failures = Vec::new();
    if !(refused || ran) {
        failures.push(
            "the second run either refuses with 125 + `prims: ` or prints an outcome".to_string(),
        );
    }
    if run2.stderr_str().contains("panicked at") {
        failures.push("no panic".to_string());
    }
    if victim_after != victim_before {
        failures.push(format!(
            "victim dir untouched: before {victim_before:?}, after {victim_after:?}"
        ));
    }
    if meta_fingerprint(&victim.path().join("keep.txt")) != keep_before {
        failures.push("victim file untouched".to_string());
    }
    if victim.path().join("new.txt").exists() {
        failures.push("nothing was written into the victim dir through the link".to_string());
    }
    assert!(
        failures.is_empty(),
        "failed: {failures:?}\n{}",
        run2.describe()
    );
    eprintln!(
        "note: the second run over a swapped output/ exited {:?}: {}",
        run2.code,
        run2.stderr_str().trim()
    );
}
