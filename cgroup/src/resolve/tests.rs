use super::*;
use crate::mountinfo::HYBRID;
use std::fs as sfs;

const HYBRID_CG: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

const COMOUNTED: &str = "\
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw shared:12 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 /docker/abc /sys/fs/cgroup/memory rw shared:13 - cgroup cgroup rw,memory
32 25 0:29 / /sys/fs/cgroup/pids rw shared:14 - cgroup cgroup rw,pids
";
const COMOUNTED_CG: &str = "4:pids:/docker/abc\n3:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n";

const V2: &str = "35 24 0:30 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";

fn dir_map(m: BTreeMap<String, Located>) -> BTreeMap<String, String> {
    m.into_iter()
        .map(|(k, v)| (k, v.dir().display().to_string()))
        .collect()
}

#[test]
fn magic_to_version() {
    assert_eq!(version_from_magic(0x6367_7270).unwrap(), Version::V2);
    assert_eq!(version_from_magic(0x0102_1994).unwrap(), Version::V1);
    let e = version_from_magic(0x6265_6572).unwrap_err();
    assert!(e.to_string().contains("0x62656572"), "{e}");
}

#[test]
fn parent_parsing() {
    assert_eq!(
        ParentPath::parse("prims").unwrap(),
        ParentPath::Relative(vec!["prims".into()])
    );
    assert_eq!(
        ParentPath::parse("/a//b/").unwrap(),
        ParentPath::Absolute(vec!["a".into(), "b".into()])
    );
    assert_eq!(
        ParentPath::parse("/").unwrap(),
        ParentPath::Absolute(vec![])
    );
    for bad in ["", "./x", "a/../b", "..", "a\nb"] {
        let e = ParentPath::parse(bad).unwrap_err();
        assert!(matches!(e, CgroupError::BadParent { .. }), "{bad:?}: {e}");
    }
    let own: Vec<String> = vec!["x".into(), "y".into()];
    assert_eq!(
        ParentPath::parse("p/q").unwrap().resolve(&own),
        ["x", "y", "p", "q"]
    );
    assert_eq!(ParentPath::parse("/p").unwrap().resolve(&own), ["p"]);
}

#[test]
fn v1_relative_uses_each_controllers_own_cgroup() {
    let m = dir_map(plan_v1(HYBRID, HYBRID_CG, "prims").unwrap());
    assert_eq!(m["memory"], "/sys/fs/cgroup/memory/process_api/abc/prims");
    assert_eq!(m["pids"], "/sys/fs/cgroup/pids/prims");
    assert_eq!(m["cpu"], "/sys/fs/cgroup/cpu/prims");
    assert_eq!(m["cpuacct"], "/sys/fs/cgroup/cpuacct/prims");
    assert_eq!(m.len(), 4);
}

#[test]
fn v1_absolute_is_from_the_root() {
    let m = dir_map(plan_v1(HYBRID, HYBRID_CG, "/prims/jobs").unwrap());
    assert_eq!(m["memory"], "/sys/fs/cgroup/memory/prims/jobs");
    assert_eq!(m["pids"], "/sys/fs/cgroup/pids/prims/jobs");
}

#[test]
fn v1_comounted_and_mount_root() {
    let m = dir_map(plan_v1(COMOUNTED, COMOUNTED_CG, "prims").unwrap());
    assert_eq!(m["cpu"], "/sys/fs/cgroup/cpu,cpuacct/docker/abc/prims");
    assert_eq!(m["cpu"], m["cpuacct"]);
    // The memory mount shows /docker/abc at its mount point.
    assert_eq!(m["memory"], "/sys/fs/cgroup/memory/prims");
    let e = plan_v1(COMOUNTED, COMOUNTED_CG, "/elsewhere").unwrap_err();
    assert!(matches!(e, CgroupError::OutsideMount { .. }), "{e}");
}

#[test]
fn v1_missing_mount_or_entry() {
    let e = plan_v1(V2, "0::/\n", "prims").unwrap_err();
    assert!(matches!(e, CgroupError::NoMount { .. }), "{e}");
    let e = plan_v1(HYBRID, "0::/\n", "prims").unwrap_err();
    assert!(matches!(e, CgroupError::NoOwnCgroup { .. }), "{e}");
}

#[test]
fn v2_plans() {
    let p = plan_v2(V2, "0::/system.slice/prims.service\n", "jobs", None).unwrap();
    assert_eq!(
        p.target.dir(),
        PathBuf::from("/sys/fs/cgroup/system.slice/prims.service/jobs")
    );
    assert_eq!(
        p.boundary,
        Some(vec![
            "system.slice".to_string(),
            "prims.service".to_string()
        ])
    );

    // After moving into a leaf, relative parents stay under the cgroup left.
    let d = Delegation {
        root: vec!["system.slice".into(), "prims.service".into()],
        leaf: "supervisor".into(),
    };
    let p = plan_v2(
        V2,
        "0::/system.slice/prims.service/supervisor\n",
        "jobs",
        Some(&d),
    )
    .unwrap();
    assert_eq!(
        p.target.dir(),
        PathBuf::from("/sys/fs/cgroup/system.slice/prims.service/jobs")
    );
    assert_eq!(p.own, "/system.slice/prims.service");
    // A delegation that does not match the current cgroup is ignored.
    let p = plan_v2(V2, "0::/other/supervisor\n", "jobs", Some(&d)).unwrap();
    assert_eq!(
        p.target.dir(),
        PathBuf::from("/sys/fs/cgroup/other/supervisor/jobs")
    );

    let p = plan_v2(HYBRID, HYBRID_CG, "/prims", None).unwrap();
    assert_eq!(
        p.target.dir(),
        PathBuf::from("/sys/fs/cgroup/unified/prims")
    );
    assert_eq!(p.boundary, Some(vec![]));

    let e = plan_v2(COMOUNTED, COMOUNTED_CG, "x", None).unwrap_err();
    assert!(matches!(e, CgroupError::NoMount { .. }), "{e}");
}

/// A fake v2 tree: `/` and `/a` (own) and `/a/jobs`, each with the
/// interface files a real cgroupfs would have.
fn fake_v2(root_enabled: &str, own_available: &str) -> (tempfile::TempDir, V2Plan) {
    let t = tempfile::tempdir().unwrap();
    let w = |rel: &str, f: &str, v: &str| {
        let d = t.path().join(rel);
        sfs::create_dir_all(&d).unwrap();
        sfs::write(d.join(f), v).unwrap();
    };
    w("", "cgroup.controllers", "cpu io memory pids hugetlb");
    w("", "cgroup.subtree_control", root_enabled);
    w("a", "cgroup.controllers", own_available);
    w("a", "cgroup.subtree_control", "");
    // What the kernel would show once /a enables them.
    w("a/jobs", "cgroup.controllers", "cpu memory pids");
    w("a/jobs", "cgroup.subtree_control", "");
    let plan = V2Plan {
        target: Located {
            base: t.path().to_path_buf(),
            rel: vec!["a".into(), "jobs".into()],
        },
        boundary: Some(vec!["a".into()]),
        own: "/a".into(),
    };
    (t, plan)
}

#[test]
fn v2_enables_controllers_inside_the_boundary_only() {
    let (t, plan) = fake_v2("cpu memory pids", "cpu memory pids");
    let dir = prepare_v2(&plan, &V2_REQUIRED).unwrap();
    assert_eq!(dir, t.path().join("a/jobs"));
    let r =
        |rel: &str| sfs::read_to_string(t.path().join(rel).join("cgroup.subtree_control")).unwrap();
    assert_eq!(r(""), "cpu memory pids"); // already fine: untouched
    assert_eq!(r("a"), "+memory +pids +cpu");
    assert_eq!(r("a/jobs"), "+memory +pids +cpu");
}

#[test]
fn v2_refuses_to_touch_ancestors_outside_the_boundary() {
    let (t, plan) = fake_v2("cpu", "cpu memory pids");
    let e = prepare_v2(&plan, &V2_REQUIRED).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CgroupError::NotDelegated { .. }), "{msg}");
    assert!(
        msg.contains("outside") && msg.contains("Delegate=yes"),
        "{msg}"
    );
    assert_eq!(
        sfs::read_to_string(t.path().join("cgroup.subtree_control")).unwrap(),
        "cpu"
    );
}

#[test]
fn v2_reports_controllers_not_offered() {
    let (_t, plan) = fake_v2("cpu memory pids", "cpu pids");
    let e = prepare_v2(&plan, &V2_REQUIRED).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CgroupError::NotDelegated { .. }), "{msg}");
    assert!(
        msg.contains("[memory]") && msg.contains("not offered"),
        "{msg}"
    );
}

#[test]
fn v2_removes_the_dirs_it_made_on_failure() {
    let (t, mut plan) = fake_v2("cpu memory pids", "cpu memory pids");
    plan.target.rel = vec!["a".into(), "new".into(), "deeper".into()];
    // A plain mkdir makes no interface files, so reading one fails.
    let e = prepare_v2(&plan, &V2_REQUIRED).unwrap_err();
    assert!(matches!(e, CgroupError::ReadFile { .. }), "{e}");
    assert!(!t.path().join("a/new").exists());
    assert!(t.path().join("a").exists());
}

#[test]
fn move_to_leaf_in_tempdir() {
    let t = tempfile::tempdir().unwrap();
    sfs::create_dir(t.path().join("leaf")).unwrap();
    sfs::write(t.path().join("leaf/cgroup.procs"), "").unwrap();
    let dir = move_pid_to_leaf(t.path(), "leaf", 42).unwrap();
    assert_eq!(sfs::read_to_string(dir.join("cgroup.procs")).unwrap(), "42");
    assert!(matches!(
        move_pid_to_leaf(t.path(), "../x", 42),
        Err(CgroupError::BadJobName { .. })
    ));
}
