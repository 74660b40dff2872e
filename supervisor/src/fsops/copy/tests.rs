use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

const ANY: CopyLimits = CopyLimits::ANY;

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

#[test]
fn files_dirs_links_and_fifos_are_copied_and_owned_by_the_new_owner() {
    let (a, b) = dirs();
    let src = a.path();
    std::fs::create_dir_all(src.join("output/deep")).unwrap();
    std::fs::write(src.join("output/deep/r.csv"), b"a,b\n1,2\n").unwrap();
    std::fs::write(src.join("top.txt"), b"hello").unwrap();
    std::fs::set_permissions(src.join("top.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", src.join("evil")).unwrap();
    nix::unistd::mkfifo(&src.join("pipe"), Mode::from_bits_truncate(0o600)).unwrap();
    let sock = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
    std::fs::create_dir_all(src.join(".prims")).unwrap();
    std::fs::write(src.join(".prims/state.pickle"), b"not copied").unwrap();
    std::fs::write(src.join(".prims/keep"), b"copied").unwrap();

    let done = copy_tree(src, b.path(), 4242, &[".prims/state.pickle"], ANY).unwrap();
    drop(sock);
    let dst = b.path();
    assert_eq!(
        std::fs::read(dst.join("output/deep/r.csv")).unwrap(),
        b"a,b\n1,2\n"
    );
    assert_eq!(std::fs::read(dst.join("top.txt")).unwrap(), b"hello");
    assert_eq!(std::fs::read(dst.join(".prims/keep")).unwrap(), b"copied");
    assert!(!dst.join(".prims/state.pickle").exists());
    let top = std::fs::metadata(dst.join("top.txt")).unwrap();
    assert_eq!(
        (top.uid(), top.gid(), top.mode() & 0o777),
        (4242, 4242, 0o640)
    );
    let link = std::fs::symlink_metadata(dst.join("evil")).unwrap();
    assert!(link.file_type().is_symlink());
    assert_eq!(link.uid(), 4242);
    assert_eq!(
        std::fs::read_link(dst.join("evil")).unwrap(),
        Path::new("/etc/shadow")
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(dst.join("pipe"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(
        std::fs::metadata(dst.join("output/deep")).unwrap().uid(),
        4242
    );
    assert_eq!(done.skipped, ["sock"]);
    assert_eq!(done.files, 3);
    assert_eq!(done.bytes, 8 + 5 + 6);
}

#[test]
fn a_sparse_file_costs_its_data_not_its_length() {
    let (a, b) = dirs();
    let f = std::fs::File::create(a.path().join("sparse")).unwrap();
    f.set_len(1 << 40).unwrap();
    nix::sys::uio::pwrite(&f, b"tail", (1 << 40) - 4).unwrap();
    drop(f);
    let done = copy_tree(a.path(), b.path(), 4242, &[], ANY).unwrap();
    assert!(done.bytes <= 1 << 16, "{done:?}");
    let copy = std::fs::metadata(b.path().join("sparse")).unwrap();
    assert_eq!(copy.len(), 1 << 40);
    assert!(copy.blocks() < 1024, "{}", copy.blocks());
    let mut tail = [0u8; 4];
    let f = std::fs::File::open(b.path().join("sparse")).unwrap();
    nix::sys::uio::pread(&f, &mut tail, (1 << 40) - 4).unwrap();
    assert_eq!(&tail, b"tail");
}

#[test]
fn a_copy_past_its_bytes_fails_and_says_so() {
    let (a, b) = dirs();
    std::fs::write(a.path().join("big"), vec![7u8; 3 << 20]).unwrap();
    let err = copy_tree(
        a.path(),
        b.path(),
        4242,
        &[],
        CopyLimits {
            max_bytes: 1 << 20,
            max_inodes: u64::MAX,
        },
    )
    .unwrap_err();
    assert!(matches!(err, FsError::TooLarge { .. }), "{err:?}");
    assert_eq!(names(b.path()), Vec::<String>::new(), "nothing is left");
}

#[test]
fn a_tree_deeper_than_the_limit_is_refused() {
    let (a, b) = dirs();
    let mut p = a.path().to_path_buf();
    for _ in 0..=MAX_COPY_DEPTH + 1 {
        p.push("d");
    }
    std::fs::create_dir_all(&p).unwrap();
    let err = copy_tree(a.path(), b.path(), 4242, &[], ANY).unwrap_err();
    assert!(matches!(err, FsError::TooMany { .. }), "{err:?}");
}

#[test]
fn clear_tree_removes_all_but_what_it_keeps_and_follows_no_link() {
    let (a, outside) = dirs();
    std::fs::write(outside.path().join("victim"), b"safe").unwrap();
    std::fs::create_dir_all(a.path().join("x/y")).unwrap();
    std::fs::write(a.path().join("x/y/f"), b"1").unwrap();
    std::os::unix::fs::symlink(outside.path(), a.path().join("link")).unwrap();
    std::fs::create_dir_all(a.path().join(".prims")).unwrap();
    clear_tree(a.path(), &[".prims"]).unwrap();
    let left: Vec<_> = std::fs::read_dir(a.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from(".prims")]);
    assert_eq!(
        std::fs::read(outside.path().join("victim")).unwrap(),
        b"safe"
    );
}

#[test]
fn copy_path_copies_a_directory_of_stripes_and_replaces_what_was_there() {
    let (a, b) = dirs();
    std::fs::create_dir_all(a.path().join(".prims/branch.pickle")).unwrap();
    std::fs::write(a.path().join(".prims/branch.pickle/0"), b"zero").unwrap();
    std::fs::write(a.path().join(".prims/branch.pickle/1"), b"one").unwrap();
    std::fs::create_dir_all(b.path().join(".prims/state.pickle")).unwrap();
    std::fs::write(b.path().join(".prims/state.pickle/9"), b"stale").unwrap();
    let n = copy_path(
        (a.path(), ".prims/branch.pickle"),
        (b.path(), ".prims/state.pickle"),
        4242,
        ANY,
    )
    .unwrap();
    assert_eq!(n.map(|c| (c.bytes, c.files, c.inodes)), Some((7, 2, 3)));
    let mut names: Vec<_> = std::fs::read_dir(b.path().join(".prims/state.pickle"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["0", "1"]);
    let missing = copy_path((a.path(), "nothing"), (b.path(), "x"), 4242, ANY).unwrap();
    assert_eq!(missing, None);
}

#[test]
fn paths_through_a_planted_symlink_are_refused() {
    let (a, outside) = dirs();
    std::fs::create_dir_all(outside.path().join("branch.pickle")).unwrap();
    std::fs::write(outside.path().join("branch.pickle/0"), b"host").unwrap();
    std::os::unix::fs::symlink(outside.path(), a.path().join(".prims")).unwrap();
    let (b, _) = dirs();
    let err = copy_path(
        (a.path(), ".prims/branch.pickle"),
        (b.path(), "s"),
        4242,
        ANY,
    );
    assert!(err.is_err(), "{err:?}");
    let err = remove_path(a.path(), ".prims/branch.pickle");
    assert!(err.is_err(), "{err:?}");
    assert!(outside.path().join("branch.pickle/0").exists());
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// What the tree under `dir` (not `dir` itself) really takes: each entry's
/// allocated blocks, at least one block of its filesystem; and its entries.
fn real_cost(dir: &Path) -> (u64, u64) {
    let block = block_size(
        open_dir(open_root(dir).unwrap().as_fd(), c".")
            .unwrap()
            .as_fd(),
    );
    let (mut bytes, mut inodes) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        bytes += (m.blocks() * 512).max(block);
        inodes += 1;
        if m.is_dir() {
            let (b, i) = real_cost(&e.path());
            bytes += b;
            inodes += i;
        }
    }
    (bytes, inodes)
}

/// `n` symlinks in `dir`, each to a different target of `len` bytes (too
/// long to live in the inode: each takes a block of its own).
fn symlink_farm(dir: &Path, n: usize, len: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        let target = format!("{i:08}{}", "t".repeat(len - 8));
        std::os::unix::fs::symlink(target, dir.join(format!("l{i}"))).unwrap();
    }
}

#[test]
fn a_symlink_farm_is_charged_its_blocks_and_inodes() {
    let (a, b) = dirs();
    symlink_farm(&a.path().join("farm"), 2000, 4000);
    let done = copy_tree(a.path(), b.path(), 4242, &[], ANY).unwrap();
    // No file data at all, yet a block (4000 bytes of target) and an
    // inode each, and the directory that names them.
    assert_eq!((done.files, done.bytes), (0, 0), "{done:?}");
    assert_eq!(done.inodes, 2001, "{done:?}");
    assert!(done.disk_bytes >= 2000 * 4096, "{done:?}");
    assert_eq!((done.disk_bytes, done.inodes), real_cost(b.path()));
}

#[test]
fn fifos_empty_files_and_directories_cost_a_block_and_an_inode_each() {
    let (a, b) = dirs();
    for i in 0..10 {
        nix::unistd::mkfifo(
            &a.path().join(format!("p{i}")),
            Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::write(a.path().join(format!("e{i}")), b"").unwrap();
        std::fs::create_dir(a.path().join(format!("d{i}"))).unwrap();
        // A short target lives in the inode: no block of its own.
        std::os::unix::fs::symlink("x", a.path().join(format!("s{i}"))).unwrap();
    }
    let done = copy_tree(a.path(), b.path(), 4242, &[], ANY).unwrap();
    let block = block_size(
        open_dir(open_root(b.path()).unwrap().as_fd(), c".")
            .unwrap()
            .as_fd(),
    );
    assert_eq!(done.inodes, 40, "{done:?}");
    assert_eq!(done.disk_bytes, 40 * block, "{done:?}");
    assert_eq!((done.disk_bytes, done.inodes), real_cost(b.path()));
}

#[test]
fn a_sparse_file_is_charged_its_allocated_blocks() {
    let (a, b) = dirs();
    let f = std::fs::File::create(a.path().join("sparse")).unwrap();
    f.set_len(1 << 40).unwrap();
    nix::sys::uio::pwrite(&f, b"tail", (1 << 40) - 4).unwrap();
    drop(f);
    let done = copy_tree(a.path(), b.path(), 4242, &[], ANY).unwrap();
    let copy = std::fs::metadata(b.path().join("sparse")).unwrap();
    assert_eq!(done.inodes, 1);
    assert!(done.disk_bytes < 1 << 20, "{done:?}");
    assert_eq!(done.disk_bytes, (copy.blocks() * 512).max(4096), "{done:?}");
}

#[test]
fn a_copy_past_its_inodes_fails_and_leaves_nothing() {
    let (a, b) = dirs();
    symlink_farm(&a.path().join("farm"), 100, 16);
    std::fs::create_dir_all(a.path().join("output/deep")).unwrap();
    std::fs::write(a.path().join("output/deep/f"), b"data").unwrap();
    // Like a branch's workspace: `output/` is there already, and stays.
    std::fs::create_dir(b.path().join("output")).unwrap();
    std::fs::write(b.path().join("output/mine"), b"kept").unwrap();
    let limits = CopyLimits {
        max_bytes: u64::MAX,
        max_inodes: 50,
    };
    let err = copy_tree(a.path(), b.path(), 4242, &[], limits).unwrap_err();
    assert!(
        matches!(err, FsError::TooManyInodes { max: 50, .. }),
        "{err:?}"
    );
    assert_eq!(names(b.path()), ["output"]);
    assert_eq!(names(&b.path().join("output")), ["mine"]);
    // Just enough: 100 links, the farm, output/, deep/ and its file.
    let limits = CopyLimits {
        max_bytes: u64::MAX,
        max_inodes: 104,
    };
    let done = copy_tree(a.path(), b.path(), 4242, &[], limits).unwrap();
    assert_eq!(done.inodes, 104);
}

#[test]
fn a_copy_past_its_bytes_in_blocks_fails_and_leaves_nothing() {
    let (a, b) = dirs();
    symlink_farm(&a.path().join("farm"), 100, 4000);
    // Under a tenth of the links' blocks: refused though no file data
    // would be copied.
    let limits = CopyLimits {
        max_bytes: 10 * 4096,
        max_inodes: u64::MAX,
    };
    let err = copy_tree(a.path(), b.path(), 4242, &[], limits).unwrap_err();
    assert!(matches!(err, FsError::TooLarge { .. }), "{err:?}");
    assert_eq!(names(b.path()), Vec::<String>::new());
}

#[test]
fn a_copy_path_past_its_budget_leaves_nothing() {
    let (a, b) = dirs();
    std::fs::create_dir_all(a.path().join(".prims/branch.pickle")).unwrap();
    for i in 0..8 {
        std::fs::write(a.path().join(format!(".prims/branch.pickle/{i}")), b"s").unwrap();
    }
    let limits = CopyLimits {
        max_bytes: u64::MAX,
        max_inodes: 4,
    };
    let from = (a.path(), ".prims/branch.pickle");
    let err = copy_path(from, (b.path(), "globals.pickle"), 0, limits).unwrap_err();
    assert!(matches!(err, FsError::TooManyInodes { .. }), "{err:?}");
    assert_eq!(names(b.path()), Vec::<String>::new());
}
