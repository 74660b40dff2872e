//! Pure parsers for `/proc/self/mountinfo` and `/proc/self/cgroup`, and the
//! lookup of a controller's mount. No file access here, so every case can be
//! tested on sample text.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// One line of `/proc/<pid>/mountinfo`, reduced to what cgroup lookup needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// The root of the mount inside its filesystem (field 4): for a cgroup
    /// mount, the cgroup path that the mount point shows.
    pub root: String,
    pub mount_point: PathBuf,
    pub fs_type: String,
    /// Per-superblock options (the last field), e.g. `rw,cpu,cpuacct`.
    pub super_options: Vec<String>,
}

/// One line of `/proc/<pid>/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcCgroup {
    pub hierarchy: u32,
    /// Empty for the v2 (unified) line.
    pub controllers: Vec<String>,
    pub path: String,
}

/// Undo the octal escapes (`\040` for a space, etc.) the kernel writes in
/// mountinfo paths.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (u32::from(b[i + 1] - b'0') << 6)
                | (u32::from(b[i + 2] - b'0') << 3)
                | u32::from(b[i + 3] - b'0');
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Parse mountinfo text. Malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

fn parse_mountinfo_line(line: &str) -> Option<MountInfo> {
    let fields: Vec<&str> = line.split(' ').collect();
    // id parent maj:min root mount-point options [optional...] - fstype source super-options
    let sep = fields.iter().position(|f| *f == "-")?;
    if sep < 6 || fields.len() < sep + 4 {
        return None;
    }
    let root = String::from_utf8_lossy(&unescape(fields[3])).into_owned();
    let mount_point = PathBuf::from(OsString::from_vec(unescape(fields[4])));
    Some(MountInfo {
        root,
        mount_point,
        fs_type: fields[sep + 1].to_string(),
        super_options: fields[sep + 3].split(',').map(str::to_string).collect(),
    })
}

/// Parse `/proc/self/cgroup` text. Malformed lines are skipped.
pub fn parse_proc_cgroup(text: &str) -> Vec<ProcCgroup> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.splitn(3, ':');
            let hierarchy = it.next()?.parse().ok()?;
            let controllers = it.next()?;
            let path = it.next()?;
            Some(ProcCgroup {
                hierarchy,
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.strip_suffix(" (deleted)").unwrap_or(path).to_string(),
            })
        })
        .collect()
}

/// The caller's cgroup path in the v1 hierarchy that carries `controller`.
pub fn own_v1_path<'a>(entries: &'a [ProcCgroup], controller: &str) -> Option<&'a str> {
    entries
        .iter()
        .find(|e| e.hierarchy != 0 && e.controllers.iter().any(|c| c == controller))
        .map(|e| e.path.as_str())
}

/// The caller's cgroup path in the v2 (unified) hierarchy.
pub fn own_v2_path(entries: &[ProcCgroup]) -> Option<&str> {
    entries
        .iter()
        .find(|e| e.hierarchy == 0 && e.controllers.is_empty())
        .map(|e| e.path.as_str())
}

/// Every v1 mount carrying `controller` (an exact option: `cpu` does not
/// match `cpuset` or `cpuacct`).
pub fn v1_mounts<'a>(mounts: &'a [MountInfo], controller: &str) -> Vec<&'a MountInfo> {
    mounts
        .iter()
        .filter(|m| m.fs_type == "cgroup" && m.super_options.iter().any(|o| o == controller))
        .collect()
}

/// Every cgroup2 mount, the conventional places first: `/sys/fs/cgroup`
/// (pure v2), then `/sys/fs/cgroup/unified` (hybrid), then the rest in
/// mountinfo order.
pub fn v2_mounts(mounts: &[MountInfo]) -> Vec<&MountInfo> {
    let rank = |m: &MountInfo| match m.mount_point.to_str() {
        Some("/sys/fs/cgroup") => 0,
        Some("/sys/fs/cgroup/unified") => 1,
        _ => 2,
    };
    let mut v: Vec<&MountInfo> = mounts.iter().filter(|m| m.fs_type == "cgroup2").collect();
    v.sort_by_key(|m| rank(m));
    v
}

/// The non-empty components of a cgroup path.
pub fn components(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// The mountinfo of a hybrid host (like CI's): a v1 hierarchy per
/// controller, systemd's named one, and cgroup2 at `/sys/fs/cgroup/unified`.
/// For this module's tests and the parent resolution's.
#[cfg(test)]
pub(crate) const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

#[cfg(test)]
mod tests {
    use super::*;

    const COMOUNTED: &str = "\
25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 /docker/abc /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,memory
32 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,pids
";

    const V2: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    #[test]
    fn v1_separate_mounts() {
        let m = parse_mountinfo(HYBRID);
        assert_eq!(m.len(), 8);
        let cpu = v1_mounts(&m, "cpu");
        assert_eq!(cpu.len(), 1);
        assert_eq!(cpu[0].mount_point, PathBuf::from("/sys/fs/cgroup/cpu"));
        let acct = v1_mounts(&m, "cpuacct");
        assert_eq!(acct[0].mount_point, PathBuf::from("/sys/fs/cgroup/cpuacct"));
        assert_eq!(v1_mounts(&m, "memory")[0].root, "/");
        assert!(v1_mounts(&m, "hugetlb").is_empty());
    }

    #[test]
    fn v1_comounted_cpu_cpuacct() {
        let m = parse_mountinfo(COMOUNTED);
        let cpu = v1_mounts(&m, "cpu");
        let acct = v1_mounts(&m, "cpuacct");
        assert_eq!(cpu.len(), 1);
        assert_eq!(cpu[0].mount_point, acct[0].mount_point);
        assert_eq!(
            cpu[0].mount_point,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
        );
        assert_eq!(v1_mounts(&m, "memory")[0].root, "/docker/abc");
        assert!(v2_mounts(&m).is_empty());
    }

    #[test]
    fn v2_and_hybrid_unified() {
        let m = parse_mountinfo(V2);
        let v2 = v2_mounts(&m);
        assert_eq!(v2.len(), 1);
        assert_eq!(v2[0].mount_point, PathBuf::from("/sys/fs/cgroup"));
        assert!(v1_mounts(&m, "memory").is_empty());

        let h = parse_mountinfo(HYBRID);
        assert_eq!(
            v2_mounts(&h)[0].mount_point,
            PathBuf::from("/sys/fs/cgroup/unified")
        );
        // Both present (odd, but possible): /sys/fs/cgroup wins.
        let both = format!("{HYBRID}99 1 0:50 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
        let b = parse_mountinfo(&both);
        assert_eq!(
            v2_mounts(&b)[0].mount_point,
            PathBuf::from("/sys/fs/cgroup")
        );
    }

    #[test]
    fn mountinfo_escapes_and_garbage() {
        let m = parse_mountinfo(
            "1 2 0:1 /a\\040b /mnt/x\\040y rw - cgroup2 none rw\nnot a line\n1 2 3 - x\n",
        );
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].root, "/a b");
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt/x y"));
    }

    #[test]
    fn proc_cgroup_hybrid_and_v2() {
        let text =
            "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/d4c3\n2:cpuacct:/\n1:cpu:/x\n0::/\n";
        let e = parse_proc_cgroup(text);
        assert_eq!(e.len(), 6);
        assert_eq!(own_v1_path(&e, "memory"), Some("/process_api/d4c3"));
        assert_eq!(own_v1_path(&e, "cpu"), Some("/x"));
        assert_eq!(own_v1_path(&e, "cpuacct"), Some("/"));
        assert_eq!(own_v1_path(&e, "systemd"), None);
        assert_eq!(own_v2_path(&e), Some("/"));

        let co = parse_proc_cgroup("3:cpu,cpuacct:/a/b\n2:memory:/a\n");
        assert_eq!(own_v1_path(&co, "cpuacct"), Some("/a/b"));
        assert_eq!(own_v1_path(&co, "cpu"), Some("/a/b"));
        assert_eq!(own_v2_path(&co), None);

        let v2 = parse_proc_cgroup("0::/system.slice/prims.service\n");
        assert_eq!(own_v2_path(&v2), Some("/system.slice/prims.service"));
        let del = parse_proc_cgroup("0::/gone (deleted)\n");
        assert_eq!(own_v2_path(&del), Some("/gone"));
        // A path may contain a colon.
        let colon = parse_proc_cgroup("0::/a:b\n");
        assert_eq!(own_v2_path(&colon), Some("/a:b"));
    }

    #[test]
    fn components_skip_empty() {
        assert_eq!(components("/"), Vec::<String>::new());
        assert_eq!(components("//a//b/"), vec!["a", "b"]);
    }
}
