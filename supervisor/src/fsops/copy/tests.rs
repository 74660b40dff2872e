use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

const ANY: CopyLimits = CopyLimits {
    max_bytes: u64::MAX,
};

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
        CopyLimits { max_bytes: 1 << 20 },
    )
    .unwrap_err();
    assert!(matches!(err, FsError::TooLarge { .. }), "{err:?}");
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
    assert_eq!(n, Some(7));
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
