//! A session's recorded runs: `sessions/<name>.cells`, one JSON record a
//! line, oldest first, next to the metadata and never in the workspace
//! (jailed code controls the workspace). Only the supervisor writes it,
//! under the session's run lock, so appends never race; a reader may meet
//! a rewrite (atomic rename) or a half-written last line (ignored).
//!
//! Bounded by `sessions.history_cells` and `history_bytes`: a read shows
//! only the newest records within both. The file may grow to twice the
//! bounds before an append compacts it to them, so an append at the bounds
//! writes one line, not the whole file again. Records are numbered from 1
//! for the session's life, so the first record shown says how many were
//! dropped.

use super::error::SessionError;
use prims_protocol::history::{HistoryCell, HistoryPage, MAX_PAGE_BYTES, MAX_RECORD_BYTES};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// How much history a session keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bounds {
    pub cells: usize,
    pub bytes: u64,
}

/// What a history file holds, kept by its session between appends so an
/// append need not read the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tally {
    /// The number the next record gets.
    next: u64,
    cells: usize,
    bytes: u64,
}

pub(super) fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.cells"))
}

pub(super) fn tmp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.cells.tmp"))
}

fn corrupt(why: String) -> SessionError {
    SessionError::History(why)
}

/// The file's bytes, at most `cap` of them (a larger file is an error); an
/// absent file is empty.
fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, SessionError> {
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::io("opening the session's history")(e)),
    };
    let mut data = Vec::new();
    f.take(cap.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(SessionError::io("reading the session's history"))?;
    if data.len() as u64 > cap {
        return Err(corrupt(format!("it is larger than {cap} bytes")));
    }
    Ok(data)
}

/// The complete lines of `data`; a last line without its newline is a
/// write cut short (or still going) and is left out.
fn lines(data: &[u8]) -> Vec<&[u8]> {
    let end = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    data[..end]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

fn parse(line: &[u8], i: usize) -> Result<HistoryCell, SessionError> {
    serde_json::from_slice(line)
        .map_err(|e| corrupt(format!("record {} is unreadable: {e}", i + 1)))
}

/// The most a history file may hold when read: its bound plus one record,
/// since a bound lowered by a reload applies at the next append.
fn read_cap(b: Bounds) -> u64 {
    b.bytes.max(1 << 20).saturating_add(MAX_RECORD_BYTES as u64) * 2
}

/// `cell` as one line within `budget` bytes (newline included): when it is
/// larger, its outputs go, then its texts are cut; `cut` says so.
pub(super) fn encode(cell: &mut HistoryCell, budget: usize) -> Result<Vec<u8>, SessionError> {
    let max = budget.min(MAX_RECORD_BYTES);
    let to_line = |c: &HistoryCell| {
        let mut v = serde_json::to_vec(c)
            .map_err(|e| corrupt(format!("a record could not be encoded: {e}")))?;
        v.push(b'\n');
        Ok::<_, SessionError>(v)
    };
    let line = to_line(cell)?;
    if line.len() <= max {
        return Ok(line);
    }
    cell.cut = true;
    cell.outputs.clear();
    // JSON may escape a character to six bytes; an eighth of the room each
    // for four texts always fits.
    let room = max / 8 / 6;
    for text in [&mut cell.stdout, &mut cell.stderr, &mut cell.code] {
        truncate_chars(text, room);
    }
    if let Some(e) = cell.error.as_mut() {
        truncate_chars(&mut e.evalue, room);
        e.traceback.clear();
    }
    let line = to_line(cell)?;
    if line.len() <= max {
        return Ok(line);
    }
    cell.error = None;
    cell.code.clear();
    to_line(cell)
}

fn truncate_chars(s: &mut String, max_bytes: usize) {
    if s.len() > max_bytes {
        let mut end = max_bytes;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// The index of the first of `sizes` (record lengths with their newline,
/// oldest first) to keep so that, with `more` records of `extra` bytes
/// after them, the newest stay within the bounds.
fn first_kept(sizes: &[u64], b: Bounds, more: usize, extra: u64) -> usize {
    let (mut kept, mut total) = (0, extra);
    for size in sizes.iter().rev() {
        if kept + more >= b.cells || total + size > b.bytes {
            break;
        }
        kept += 1;
        total += size;
    }
    sizes.len() - kept
}

/// Appends `cell` as the session's next record, numbering it. `tally`
/// (the session's, None until its first append) spares reading the file;
/// past twice the bounds the file is compacted to them. A history that
/// cannot be read is started again (it is a convenience, never worth
/// failing a run for).
pub(super) fn append(
    dir: &Path,
    name: &str,
    mut cell: HistoryCell,
    b: Bounds,
    tally: &mut Option<Tally>,
) -> Result<(), SessionError> {
    let file = path(dir, name);
    let budget = usize::try_from(b.bytes).unwrap_or(usize::MAX);
    let on_disk = fs::symlink_metadata(&file).map(|m| m.len()).ok();
    if let Some(t) = tally.filter(|t| on_disk == Some(t.bytes)) {
        cell.n = t.next;
        let line = encode(&mut cell, budget)?;
        let bytes = t.bytes + line.len() as u64;
        if t.cells < b.cells.saturating_mul(2) && bytes <= b.bytes.saturating_mul(2) {
            let mut f = open_for_write(&file, false)?;
            f.write_all(&line)
                .map_err(SessionError::io("appending to the session's history"))?;
            *tally = Some(Tally {
                next: t.next + 1,
                cells: t.cells + 1,
                bytes,
            });
            return Ok(());
        }
    }
    *tally = None;
    let (data, fresh) = match read_capped(&file, read_cap(b)) {
        Ok(d) => (d, false),
        Err(SessionError::History(why)) => {
            tracing::warn!(session = %name, why, "the session's history is unreadable; starting it again");
            (Vec::new(), true)
        }
        Err(e) => return Err(e),
    };
    let mut old = lines(&data);
    let last = match old.last() {
        Some(l) => match parse(l, old.len() - 1) {
            Ok(c) => Some(c.n),
            Err(e) => {
                tracing::warn!(session = %name, error = %e, "the session's history is unreadable; starting it again");
                old.clear();
                None
            }
        },
        None => None,
    };
    if fresh {
        old.clear();
    }
    cell.n = last.map_or(1, |n| n.saturating_add(1));
    let line = encode(&mut cell, budget)?;
    let sizes: Vec<u64> = old.iter().map(|l| l.len() as u64 + 1).collect();
    let drop = first_kept(&sizes, b, 1, line.len() as u64);
    let tmp = tmp_path(dir, name);
    let mut out = Vec::new();
    for l in &old[drop..] {
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out.extend_from_slice(&line);
    let result = (|| {
        let mut f = open_for_write(&tmp, true)?;
        f.write_all(&out)
            .map_err(SessionError::io("writing the session's history"))?;
        fs::rename(&tmp, &file).map_err(SessionError::io("replacing the session's history"))
    })();
    match &result {
        Ok(()) => {
            *tally = Some(Tally {
                next: cell.n + 1,
                cells: old.len() - drop + 1,
                bytes: out.len() as u64,
            })
        }
        Err(_) => {
            let _ = fs::remove_file(&tmp);
        }
    }
    result
}

fn open_for_write(path: &Path, truncate: bool) -> Result<fs::File, SessionError> {
    let mut o = OpenOptions::new();
    o.create(true).mode(0o600);
    if truncate {
        o.write(true).truncate(true);
    } else {
        o.append(true);
    }
    o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(SessionError::io("opening the session's history"))
}

/// The records numbered `from` on, up to [`MAX_PAGE_BYTES`] of them (at
/// least one).
pub(super) fn page(
    dir: &Path,
    name: &str,
    from: u64,
    b: Bounds,
) -> Result<HistoryPage, SessionError> {
    let data = read_capped(&path(dir, name), read_cap(b))?;
    let all = lines(&data);
    // The file may hold more than the bounds until it is compacted.
    let sizes: Vec<u64> = all.iter().map(|l| l.len() as u64 + 1).collect();
    let all = &all[first_kept(&sizes, b, 0, 0)..];
    let mut out = HistoryPage {
        cells: Vec::new(),
        dropped: 0,
        next: None,
    };
    let mut size = 0;
    for (i, l) in all.iter().enumerate() {
        let cell = parse(l, i)?;
        if i == 0 {
            out.dropped = cell.n.saturating_sub(1);
        }
        if cell.n < from {
            continue;
        }
        if !out.cells.is_empty() && size + l.len() > MAX_PAGE_BYTES {
            out.next = Some(cell.n);
            break;
        }
        size += l.len();
        out.cells.push(cell);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
