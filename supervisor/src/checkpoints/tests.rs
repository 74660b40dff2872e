use super::*;

fn info(p: &Pending, bytes: u64) -> CheckpointInfo {
    CheckpointInfo {
        checkpoint_id: p.id.clone(),
        label: None,
        created: 0,
        bytes,
        not_saved: Vec::new(),
        paused_ms: 0,
    }
}

fn budgets() -> Branches {
    Branches {
        max_checkpoints: 4,
        max_checkpoints_per_tenant: 4,
        max_checkpoint_inodes: 100,
        max_checkpoint_inodes_per_tenant: 150,
        max_checkpoint_inodes_total: 250,
        ..Branches::default()
    }
}

/// Keeps a checkpoint of `name` (no tenant, of `lineage`) of `inodes`.
fn keep(c: &Checkpoints, name: &str, lineage: &str, inodes: u64) -> Result<(), ErrorReply> {
    let p = c.begin(name, (None, lineage), &budgets())?;
    let i = info(&p, 4096 * inodes);
    c.commit(p, (i, inodes), &budgets()).map(drop)
}

#[test]
fn without_a_tenant_each_lineage_has_its_own_budget_within_the_node_s() {
    let dir = tempfile::tempdir().unwrap();
    let c = Checkpoints::open(dir.path()).unwrap();
    // A session and its branch share their lineage's 150 inodes.
    keep(&c, "a", "a", 80).unwrap();
    let p = c.begin("a-branch", (None, "a"), &budgets()).unwrap();
    assert_eq!(p.room.max_inodes, 70);
    assert_eq!(p.bound_by.1, "branches.max_checkpoint_inodes_per_tenant");
    let i = info(&p, 4096);
    let e = c.commit(p, (i, 71), &budgets()).unwrap_err();
    assert!(
        e.message.contains("max_checkpoint_inodes_per_tenant"),
        "{}",
        e.message
    );
    keep(&c, "a-branch", "a", 70).unwrap();
    let e = c.begin("a", (None, "a"), &budgets()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Quota);
    assert!(e.message.contains("lineage"), "{}", e.message);
    // Another client's session: a lineage of its own, room for its own.
    let p = c.begin("b", (None, "b"), &budgets()).unwrap();
    assert_eq!(p.room.max_inodes, 100);
    c.abort(p);
    keep(&c, "b", "b", 90).unwrap();
    // The node's 250 bound them all: 10 left for a third.
    let p = c.begin("c", (None, "c"), &budgets()).unwrap();
    assert_eq!(
        (p.room.max_inodes, p.bound_by.1),
        (10, "branches.max_checkpoint_inodes_total")
    );
    c.abort(p);
    // A tenant's sessions share the tenant's budget, whatever their
    // lineages.
    let t = Branches {
        max_checkpoint_inodes_total: 1000,
        ..budgets()
    };
    for name in ["t1", "t2"] {
        let p = c.begin(name, (Some("alice"), name), &t).unwrap();
        let i = info(&p, 4096);
        c.commit(p, (i, 75), &t).unwrap();
    }
    let e = c.begin("t3", (Some("alice"), "t3"), &t).unwrap_err();
    assert!(e.message.contains("the tenant"), "{}", e.message);
}

#[test]
fn budgets_and_lineages_are_read_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c = Checkpoints::open(dir.path()).unwrap();
    keep(&c, "a", "root", 60).unwrap();
    drop(c);
    let c = Checkpoints::open(dir.path()).unwrap();
    let p = c.begin("b", (None, "root"), &budgets()).unwrap();
    assert_eq!(p.room.max_inodes, 90, "the lineage holds 60 of 150");
    c.abort(p);
    assert!(!dir
        .path()
        .join("checkpoints/b")
        .read_dir()
        .unwrap()
        .any(|_| true));
}
