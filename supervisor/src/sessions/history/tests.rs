use super::*;
use prims_protocol::jail::Status;
use prims_protocol::wire::{CellOutput, OutputKind};

const NAME: &str = "0123456789abcdef0123456789abcdef";

fn cell(code: &str) -> HistoryCell {
    HistoryCell {
        n: 0,
        code: code.into(),
        status: Status::Ok,
        stdout: String::new(),
        stderr: String::new(),
        cut: false,
        outputs: Vec::new(),
        error: None,
        restarted: None,
    }
}

fn codes(p: &HistoryPage) -> Vec<(u64, String)> {
    p.cells.iter().map(|c| (c.n, c.code.clone())).collect()
}

const WIDE: Bounds = Bounds {
    cells: 500,
    bytes: 16 << 20,
};

#[test]
fn numbers_runs_and_keeps_the_newest_within_the_cell_bound() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bounds { cells: 3, ..WIDE };
    for i in 1..=5 {
        append(dir.path(), NAME, cell(&format!("x = {i}")), b, &mut None).unwrap();
    }
    let p = page(dir.path(), NAME, 0, b).unwrap();
    assert_eq!(p.dropped, 2);
    assert_eq!(
        codes(&p),
        [(3, "x = 3"), (4, "x = 4"), (5, "x = 5")].map(|(n, c)| (n, c.to_string()))
    );
    assert_eq!(p.next, None);
    let later = page(dir.path(), NAME, 5, b).unwrap();
    assert_eq!(codes(&later), [(5, "x = 5".to_string())]);
}

#[test]
fn the_byte_bound_drops_the_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bounds {
        cells: 500,
        bytes: 64 * 1024,
    };
    let big = "#".repeat(20_000);
    for _ in 0..10 {
        append(dir.path(), NAME, cell(&big), b, &mut None).unwrap();
    }
    let size = fs::metadata(path(dir.path(), NAME)).unwrap().len();
    assert!(size <= b.bytes, "{size}");
    let p = page(dir.path(), NAME, 0, b).unwrap();
    assert_eq!(p.cells.len(), 3);
    assert_eq!(p.dropped, 7);
    assert_eq!(p.cells.last().unwrap().n, 10);
}

#[test]
fn a_record_larger_than_the_bound_is_cut_to_fit() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bounds {
        cells: 5,
        bytes: 64 * 1024,
    };
    let mut c = cell("print('hi')");
    c.stdout = "\u{1}".repeat(200_000);
    c.outputs.push(CellOutput {
        kind: OutputKind::Display,
        data: [("text/plain".to_string(), "x".repeat(100_000).into())].into(),
        cut: false,
        file: None,
    });
    append(dir.path(), NAME, c, b, &mut None).unwrap();
    let p = page(dir.path(), NAME, 0, b).unwrap();
    let kept = &p.cells[0];
    assert!(kept.cut && kept.outputs.is_empty());
    assert_eq!(kept.code, "print('hi')");
    assert!(fs::metadata(path(dir.path(), NAME)).unwrap().len() <= b.bytes);
}

#[test]
fn a_cut_short_line_is_ignored_and_a_corrupt_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    append(dir.path(), NAME, cell("a = 1"), WIDE, &mut None).unwrap();
    let file = path(dir.path(), NAME);
    let mut f = OpenOptions::new().append(true).open(&file).unwrap();
    f.write_all(b"{\"n\":2,\"co").unwrap();
    assert_eq!(page(dir.path(), NAME, 0, WIDE).unwrap().cells.len(), 1);
    // The next append replaces the torn line.
    append(dir.path(), NAME, cell("b = 2"), WIDE, &mut None).unwrap();
    let p = page(dir.path(), NAME, 0, WIDE).unwrap();
    assert_eq!(codes(&p), [(1, "a = 1".into()), (2, "b = 2".into())]);

    fs::write(&file, b"not json\n").unwrap();
    let e = page(dir.path(), NAME, 0, WIDE).unwrap_err();
    assert!(e.to_string().contains("record 1 is unreadable"), "{e}");
    // A run is never failed by it: the history starts again.
    append(dir.path(), NAME, cell("c = 3"), WIDE, &mut None).unwrap();
    assert_eq!(
        codes(&page(dir.path(), NAME, 0, WIDE).unwrap()),
        [(1, "c = 3".into())]
    );
}

#[test]
fn an_oversized_file_is_refused_and_a_missing_one_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let p = page(dir.path(), NAME, 0, WIDE).unwrap();
    assert!(p.cells.is_empty() && p.dropped == 0);
    let small = Bounds {
        cells: 5,
        bytes: 64 * 1024,
    };
    fs::write(path(dir.path(), NAME), vec![b'x'; 20 << 20]).unwrap();
    let e = page(dir.path(), NAME, 0, small).unwrap_err();
    assert!(e.to_string().contains("larger than"), "{e}");
}

#[test]
fn pages_split_a_large_history() {
    let dir = tempfile::tempdir().unwrap();
    let big = "#".repeat(1 << 20);
    for _ in 0..6 {
        append(dir.path(), NAME, cell(&big), WIDE, &mut None).unwrap();
    }
    let first = page(dir.path(), NAME, 0, WIDE).unwrap();
    let next = first.next.expect("a second page");
    assert!(first.cells.len() < 6);
    let second = page(dir.path(), NAME, next, WIDE).unwrap();
    assert_eq!(first.cells.len() + second.cells.len(), 6);
    assert_eq!(second.next, None);
}

#[test]
fn a_kept_tally_appends_without_reading_and_compacts_at_twice_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bounds { cells: 3, ..WIDE };
    let file = path(dir.path(), NAME);
    let mut tally = None;
    let mut most = 0;
    for i in 1..=10 {
        append(dir.path(), NAME, cell(&format!("x = {i}")), b, &mut tally).unwrap();
        let lines = fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= 2 * b.cells, "{lines} records after {i} appends");
        most = most.max(lines);
        // Whatever the file holds, a read shows the bounds.
        let p = page(dir.path(), NAME, 0, b).unwrap();
        let shown: Vec<u64> = p.cells.iter().map(|c| c.n).collect();
        let want: Vec<u64> = (i.max(3) - 2..=i).filter(|n| *n >= 1).collect();
        assert_eq!(shown, want, "after {i} appends");
        assert_eq!(p.dropped, want[0] - 1);
    }
    assert_eq!(
        most,
        2 * b.cells,
        "the file grew past the bounds before a compaction"
    );
    // A file changed behind the tally's back is read again, not trusted.
    let mut f = OpenOptions::new().append(true).open(&file).unwrap();
    f.write_all(b"{\"n\":99,\"co").unwrap();
    append(dir.path(), NAME, cell("y = 1"), b, &mut tally).unwrap();
    let p = page(dir.path(), NAME, 0, b).unwrap();
    assert_eq!(
        p.cells.last().map(|c| (c.n, c.code.as_str())),
        Some((11, "y = 1"))
    );
}
