//! The header lines of a proxied request, read strictly enough that the
//! upstream reads the request the proxy judged. A line that servers could
//! split, join or name in another way than the proxy did (a bare CR or LF,
//! a folded line, whitespace before the colon, a control character) is
//! refused rather than passed on, and so is a head whose body two servers
//! could frame two ways (RFC 9112 sections 2.2, 5.1, 5.2 and 6.1).

/// One header line: its name and its value without the whitespace around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

impl Field<'_> {
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
    }
}

/// The fields of `lines` (the head's lines after the request line, without
/// their CRLF). The error is one sentence for the client and the run's record.
pub fn parse<'a>(lines: impl Iterator<Item = &'a str>) -> Result<Vec<Field<'a>>, String> {
    let mut out = Vec::new();
    for line in lines {
        if line.contains(['\r', '\n']) {
            return Err(
                "a line of the request head ends in a bare CR or LF, which a server may read as a line end the proxy did not see"
                    .into(),
            );
        }
        if line.starts_with([' ', '\t']) {
            return Err(
                "a header is folded onto a second line (obsolete line folding is not proxied)"
                    .into(),
            );
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("the header line {} has no colon", shown(line)))?;
        if name.ends_with([' ', '\t']) {
            return Err(format!(
                "whitespace between the header name {} and its colon (servers disagree on what it names)",
                shown(name.trim_end())
            ));
        }
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!(
                "the header name {} is not an HTTP token",
                shown(name)
            ));
        }
        let value = value.trim_matches([' ', '\t']);
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!(
                "the value of the header {name} holds a control character"
            ));
        }
        out.push(Field { name, value });
    }
    Ok(out)
}

/// Refuses a body two servers could frame two ways: `Content-Length` and
/// `Transfer-Encoding` together, more than one `Content-Length`, or a
/// transfer coding other than a lone `chunked` (which HTTP/1.0 lacks).
pub fn check_framing(fields: &[Field<'_>], http10: bool) -> Result<(), String> {
    let lengths: Vec<&Field<'_>> = fields.iter().filter(|f| f.is("content-length")).collect();
    let codings: Vec<&Field<'_>> = fields
        .iter()
        .filter(|f| f.is("transfer-encoding"))
        .collect();
    if !lengths.is_empty() && !codings.is_empty() {
        return Err(
            "the request has both Transfer-Encoding and Content-Length, which servers read two ways"
                .into(),
        );
    }
    match lengths.as_slice() {
        [] => {}
        [one] if !one.value.is_empty() && one.value.bytes().all(|b| b.is_ascii_digit()) => {}
        [one] => {
            return Err(format!(
                "the Content-Length {} is not a number",
                shown(one.value)
            ))
        }
        more => {
            return Err(format!(
                "the request has {} Content-Length headers (at most one)",
                more.len()
            ))
        }
    }
    match codings.as_slice() {
        [] => Ok(()),
        _ if http10 => Err("an HTTP/1.0 request has a Transfer-Encoding".into()),
        [one] if one.value.eq_ignore_ascii_case("chunked") => Ok(()),
        _ => Err(
            "the only Transfer-Encoding proxied is one \"chunked\" (servers disagree on the others)"
                .into(),
        ),
    }
}

/// RFC 9110 `tchar`: what a header name is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Client text quoted in a reason: escaped, and cut at 64 characters.
pub fn shown(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((at, _)) => format!("{:?}…", &s[..at]),
        None => format!("{s:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(head: &str) -> Result<Vec<Field<'_>>, String> {
        parse(head.split("\r\n"))
    }

    #[test]
    fn ordinary_headers_parse() {
        let f =
            fields("Host: a.example\r\nAccept:*/*\r\nX-Empty:\r\nUser-Agent: \tpy thon\t").unwrap();
        let got: Vec<(&str, &str)> = f.iter().map(|f| (f.name, f.value)).collect();
        assert_eq!(
            got,
            [
                ("Host", "a.example"),
                ("Accept", "*/*"),
                ("X-Empty", ""),
                ("User-Agent", "py thon")
            ]
        );
    }

    #[test]
    fn lines_a_server_could_read_otherwise_are_refused() {
        for (head, why) in [
            ("X: 1\nHost: b.example", "bare CR or LF"),
            ("X: 1\rHost: b.example", "bare CR or LF"),
            ("X: 1\r\n Host: b.example", "folded"),
            ("X: 1\r\n\tmore", "folded"),
            (
                "Host : b.example",
                "whitespace between the header name \"Host\"",
            ),
            (
                "Host\t: b.example",
                "whitespace between the header name \"Host\"",
            ),
            ("Ho st: b.example", "not an HTTP token"),
            (": b.example", "not an HTTP token"),
            ("Hoſt: b.example", "not an HTTP token"),
            ("Host b.example", "has no colon"),
            ("X: a\0b", "control character"),
            ("X: a\x7fb", "control character"),
        ] {
            let err = fields(head).expect_err(head);
            assert!(err.contains(why), "{head:?}: {err}");
        }
    }

    #[test]
    fn framing_that_servers_read_two_ways_is_refused() {
        let check = |head: &str, http10| check_framing(&fields(head).unwrap(), http10);
        assert!(check("Content-Length: 5", false).is_ok());
        assert!(check("Transfer-Encoding: Chunked", false).is_ok());
        assert!(check("Accept: */*", true).is_ok());
        for (head, http10, why) in [
            (
                "Content-Length: 5\r\nTransfer-Encoding: chunked",
                false,
                "both Transfer-Encoding and Content-Length",
            ),
            (
                "Content-Length: 5\r\ncontent-length: 5",
                false,
                "2 Content-Length headers",
            ),
            ("Content-Length: 5, 5", false, "is not a number"),
            ("Content-Length: -1", false, "is not a number"),
            ("Transfer-Encoding: gzip, chunked", false, "one \"chunked\""),
            (
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
                false,
                "one \"chunked\"",
            ),
            ("Transfer-Encoding: xchunked", false, "one \"chunked\""),
            ("Transfer-Encoding: chunked", true, "HTTP/1.0"),
        ] {
            let err = check(head, http10).expect_err(head);
            assert!(err.contains(why), "{head:?}: {err}");
        }
    }

    #[test]
    fn quoted_client_text_is_escaped_and_short() {
        assert_eq!(shown("a\"b"), "\"a\\\"b\"");
        let long = "x".repeat(100);
        assert_eq!(shown(&long), format!("{:?}…", "x".repeat(64)));
    }
}
