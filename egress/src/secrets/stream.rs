//! Bodies as they stream: a request's is searched for placeholders (which
//! a body never carries to an upstream), and an answer's has every value
//! of the session's secrets replaced by its placeholder before the jail
//! reads it. Both keep the tail of one chunk to find what spans two.

use bytes::{Bytes, BytesMut};

/// Finds the first of its patterns in a stream.
#[derive(Debug)]
pub struct Scanner {
    /// (pattern, what it is called)
    patterns: Vec<(Vec<u8>, String)>,
    tail: Vec<u8>,
    keep: usize,
}

impl Scanner {
    /// A scanner for every placeholder of `placements`, each called by
    /// its secret's name.
    pub fn placeholders(placements: &[super::placement::Placement]) -> Scanner {
        Scanner::new(
            placements
                .iter()
                .flat_map(|p| {
                    p.placeholders()
                        .map(|ph| (ph.as_bytes().to_vec(), p.name.clone()))
                })
                .collect(),
        )
    }

    pub fn new(patterns: Vec<(Vec<u8>, String)>) -> Scanner {
        let patterns: Vec<_> = patterns
            .into_iter()
            .filter(|(p, _)| !p.is_empty())
            .collect();
        let keep = patterns.iter().map(|(p, _)| p.len()).max().unwrap_or(1) - 1;
        Scanner {
            patterns,
            tail: Vec::new(),
            keep,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The name of a pattern that `chunk` completes, if one does.
    pub fn feed(&mut self, chunk: &[u8]) -> Option<&str> {
        self.tail.extend_from_slice(chunk);
        let found = self
            .patterns
            .iter()
            .find(|(p, _)| memchr::memmem::find(&self.tail, p).is_some());
        if let Some((_, name)) = found {
            return Some(name);
        }
        let cut = self.tail.len().saturating_sub(self.keep);
        self.tail.drain(..cut);
        None
    }
}

/// Replaces each value with its placeholder in a stream.
#[derive(Debug)]
pub struct Redactor {
    /// (value, placeholder)
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    held: BytesMut,
    keep: usize,
}

impl Redactor {
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Redactor {
        let pairs: Vec<_> = pairs.into_iter().filter(|(v, _)| !v.is_empty()).collect();
        let keep = pairs.iter().map(|(v, _)| v.len()).max().unwrap_or(1) - 1;
        Redactor {
            pairs,
            held: BytesMut::new(),
            keep,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// What of the stream so far can be passed on.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.held.extend_from_slice(chunk);
        let mut out = BytesMut::with_capacity(self.held.len());
        loop {
            let first = self
                .pairs
                .iter()
                .filter_map(|(v, ph)| {
                    memchr::memmem::find(&self.held, v).map(|at| (at, v.len(), ph))
                })
                .min_by_key(|(at, _, _)| *at);
            match first {
                Some((at, len, ph)) => {
                    out.extend_from_slice(&self.held[..at]);
                    out.extend_from_slice(ph);
                    let _ = self.held.split_to(at + len);
                }
                None => break,
            }
        }
        let pass = self.held.len().saturating_sub(self.keep);
        out.extend_from_slice(&self.held.split_to(pass));
        out.freeze()
    }

    /// The rest, at the stream's end.
    pub fn finish(&mut self) -> Bytes {
        self.held.split().freeze()
    }

    /// `text` with every value replaced, at once (a header's value).
    pub fn redact(&self, text: &[u8]) -> Option<Vec<u8>> {
        let mut out = text.to_vec();
        let mut changed = false;
        for (v, ph) in &self.pairs {
            while let Some(at) = memchr::memmem::find(&out, v) {
                out.splice(at..at + v.len(), ph.iter().copied());
                changed = true;
            }
        }
        changed.then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_split_across_chunks_is_found() {
        let mut s = Scanner::new(vec![(b"prims-secret-abc".to_vec(), "T".into())]);
        assert_eq!(s.feed(b"hello prims-se"), None);
        assert_eq!(s.feed(b"cret-a"), None);
        assert_eq!(s.feed(b"bc and more"), Some("T"));
        let mut s = Scanner::new(vec![(b"xyz".to_vec(), "T".into())]);
        for _ in 0..1000 {
            assert_eq!(s.feed(b"aaaaaaaaaaaaaaaaaaaaaaaaaaaa"), None);
        }
        assert!(s.tail.len() <= 2);
    }

    #[test]
    fn values_are_replaced_wherever_the_stream_splits_them() {
        let text = b"{\"echo\":\"s3cr3t-value\",\"again\":\"s3cr3t-value\"}";
        for split in 0..text.len() {
            let mut r = Redactor::new(vec![(b"s3cr3t-value".to_vec(), b"PH".to_vec())]);
            let mut out = r.push(&text[..split]).to_vec();
            out.extend_from_slice(&r.push(&text[split..]));
            out.extend_from_slice(&r.finish());
            assert_eq!(
                out, b"{\"echo\":\"PH\",\"again\":\"PH\"}",
                "split at {split}"
            );
        }
    }
}
