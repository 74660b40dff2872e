use super::*;
use crate::interpreters::agent::is_marker_hex;

const HEX: &str = "0123456789abcdef0123456789abcdef";

/// Feeds `chunks` in order; the bytes passed on and the rest after the marker.
fn scan(scanner: &mut MarkerScan, chunks: &[&[u8]]) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut passed = Vec::new();
    for (n, chunk) in chunks.iter().enumerate() {
        if let Some(rest) = scanner.feed(chunk, &mut |b| passed.extend_from_slice(b)) {
            let mut rest = rest;
            for later in &chunks[n + 1..] {
                rest.extend(
                    scanner
                        .feed(later, &mut |_| panic!("output after the marker"))
                        .unwrap(),
                );
            }
            return (passed, Some(rest));
        }
    }
    (passed, None)
}

fn stream(before: &[u8], after: &[u8]) -> Vec<u8> {
    [before, &marker_bytes(HEX), after].concat()
}

#[test]
fn a_marker_in_one_chunk_splits_it() {
    let (passed, rest) = scan(&mut MarkerScan::new(HEX), &[&stream(b"42\n", b"late")]);
    assert_eq!(passed, b"42\n");
    assert_eq!(rest.unwrap(), b"late");
}

#[test]
fn a_marker_split_at_every_offset_across_two_chunks() {
    let whole = stream(b"hello\0world\0prims", b"after");
    for cut in 0..=whole.len() {
        let (passed, rest) = scan(&mut MarkerScan::new(HEX), &[&whole[..cut], &whole[cut..]]);
        assert_eq!(passed, b"hello\0world\0prims", "cut at {cut}");
        assert_eq!(rest.unwrap(), b"after", "cut at {cut}");
    }
}

#[test]
fn a_marker_split_at_every_pair_of_offsets_across_three_chunks() {
    let whole = stream(b"ab\0c", b"xyz");
    for a in 0..=whole.len() {
        for b in a..=whole.len() {
            let (passed, rest) = scan(
                &mut MarkerScan::new(HEX),
                &[&whole[..a], &whole[a..b], &whole[b..]],
            );
            assert_eq!(passed, b"ab\0c", "cuts {a}, {b}");
            assert_eq!(rest.unwrap(), b"xyz", "cuts {a}, {b}");
        }
    }
}

#[test]
fn a_marker_fed_byte_by_byte() {
    let whole = stream(b"one\0two", b"three");
    let chunks: Vec<&[u8]> = whole.chunks(1).collect();
    let (passed, rest) = scan(&mut MarkerScan::new(HEX), &chunks);
    assert_eq!(passed, b"one\0two");
    assert_eq!(rest.unwrap(), b"three");
}

#[test]
fn prefixes_that_are_not_the_marker_pass_through() {
    let marker = marker_bytes(HEX);
    let mut scanner = MarkerScan::new(HEX);
    let mut passed = Vec::new();
    let mut out = |b: &[u8]| passed.extend_from_slice(b);
    // Every proper prefix, then a byte that breaks it: all of it is output.
    let mut expected = Vec::new();
    for len in 1..marker.len() {
        let chunk = [&marker[..len], b"!"].concat();
        assert!(scanner.feed(&chunk, &mut out).is_none(), "prefix {len}");
        expected.extend_from_slice(&chunk);
        assert_eq!(scanner.held(), 0);
    }
    // Another marker's prefix (a different hex) is not this marker.
    let other = marker_bytes("ffffffffffffffffffffffffffffffff");
    assert!(scanner.feed(&other, &mut out).is_none());
    expected.extend_from_slice(&other);
    // A prefix left hanging at the end is held, then released by finish.
    let hanging = &marker[..marker.len() - 1];
    assert!(scanner.feed(hanging, &mut out).is_none());
    assert_eq!(scanner.held(), marker.len() - 1);
    scanner.finish(&mut out);
    expected.extend_from_slice(hanging);
    assert_eq!(passed, expected);
}

#[test]
fn a_broken_prefix_followed_by_the_real_marker() {
    let marker = marker_bytes(HEX);
    // "\0prims-cell-end-0123" then a real marker: the first \0 run is output.
    let whole = [&marker[..20], &marker, b"tail"].concat();
    for cut in 0..=whole.len() {
        let (passed, rest) = scan(&mut MarkerScan::new(HEX), &[&whole[..cut], &whole[cut..]]);
        assert_eq!(passed, &marker[..20], "cut at {cut}");
        assert_eq!(rest.unwrap(), b"tail", "cut at {cut}");
    }
    // NUL runs before the marker.
    let whole = [b"\0\0\0".as_slice(), &marker].concat();
    let (passed, rest) = scan(&mut MarkerScan::new(HEX), &[&whole]);
    assert_eq!(passed, b"\0\0\0");
    assert_eq!(rest.unwrap(), b"");
}

#[test]
fn only_the_first_of_two_markers_ends_the_cell() {
    let marker = marker_bytes(HEX);
    let whole = [b"a".as_slice(), &marker, b"b", &marker, b"c"].concat();
    for cut in 0..=whole.len() {
        let (passed, rest) = scan(&mut MarkerScan::new(HEX), &[&whole[..cut], &whole[cut..]]);
        assert_eq!(passed, b"a", "cut at {cut}");
        assert_eq!(
            rest.unwrap(),
            [b"b".as_slice(), &marker, b"c"].concat(),
            "cut at {cut}"
        );
    }
}

#[test]
fn without_a_marker_everything_but_a_possible_start_is_passed_on() {
    let mut scanner = MarkerScan::new(HEX);
    let mut passed = Vec::new();
    assert!(scanner
        .feed(b"abc\0prims-c", &mut |b| passed.extend_from_slice(b))
        .is_none());
    assert_eq!(passed, b"abc");
    assert_eq!(scanner.held(), 8);
    scanner.finish(&mut |b| passed.extend_from_slice(b));
    assert_eq!(passed, b"abc\0prims-c");
}

#[test]
fn a_flood_of_megabytes_then_the_marker_holds_no_more_than_a_marker() {
    let mut scanner = MarkerScan::new(HEX);
    let marker = marker_bytes(HEX);
    // NULs and near-markers all through, so the slow path runs too.
    let mut block = vec![b'x'; 64 * 1024];
    for (i, b) in block.iter_mut().enumerate() {
        if i % 97 == 0 {
            *b = 0;
        }
    }
    block[1000..1030].copy_from_slice(&marker[..30]);
    let mut passed = 0usize;
    for _ in 0..(16 * 1024 * 1024 / block.len()) {
        assert!(scanner.feed(&block, &mut |b| passed += b.len()).is_none());
        assert!(scanner.held() < marker.len());
    }
    let tail = [b"end".as_slice(), &marker, b"next"].concat();
    let rest = scanner.feed(&tail, &mut |b| passed += b.len()).unwrap();
    assert_eq!(passed, 16 * 1024 * 1024 + 3);
    assert_eq!(rest, b"next");
}

#[test]
fn a_marker_with_repeats_in_it_is_found_after_a_false_start() {
    // Knuth-Morris-Pratt has to fall back within the marker itself here.
    let mut scanner = MarkerScan::for_marker(b"aab".to_vec());
    let mut passed = Vec::new();
    let rest = scanner
        .feed(b"xaaab!", &mut |b| passed.extend_from_slice(b))
        .unwrap();
    assert_eq!(passed, b"xa");
    assert_eq!(rest, b"!");
}

#[test]
fn capped_keeps_up_to_the_cap_and_counts_the_rest() {
    let mut c = Capped::new(10);
    assert_eq!(c.push(b"12345"), b"12345");
    assert!(!c.truncated());
    assert_eq!(c.push(b"67890"), b"67890");
    assert!(!c.truncated(), "exactly at the cap is not truncated");
    assert_eq!(c.push(b""), b"");
    assert_eq!(c.push(b"x"), b"");
    assert!(c.truncated());
    assert_eq!(c.seen(), 11);
    assert_eq!(c.into_parts(), (b"1234567890".to_vec(), true));

    let mut c = Capped::new(4);
    assert_eq!(c.push(b"abcdef"), b"abcd", "a chunk across the cap is cut");
    assert_eq!(c.into_parts(), (b"abcd".to_vec(), true));

    let mut c = Capped::new(0);
    assert_eq!(c.push(b"a"), b"");
    assert_eq!(c.into_parts(), (Vec::new(), true));
    assert_eq!(Capped::new(0).into_parts(), (Vec::new(), false));
}

#[test]
fn markers_are_fresh_lowercase_hex() {
    let a = new_marker();
    let b = new_marker();
    assert!(is_marker_hex(&a), "{a}");
    assert!(is_marker_hex(&b), "{b}");
    assert_ne!(a, b);
}
