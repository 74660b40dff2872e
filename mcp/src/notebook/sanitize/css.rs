//! The CSS an exported SVG output keeps: presentation values (colours,
//! lengths, font names) and references inside the document (`url(#id)`),
//! nothing that loads, positions or escapes.
//!
//! A strict character allow-list rather than a CSS parser: with no
//! backslash there are no escapes, with no `*` no comments, so the only
//! functions CSS can see are the ones spelled out, and each must be one of
//! [`FUNCTIONS`] or a `url(#id)`. A value that is anything more than plain
//! is refused whole; losing a colour is the price of never guessing.

/// What SVG's drawing needs of a `style` attribute (matplotlib's
/// `fill: #1f77b4; stroke-width: 1.5`, `font: 10px 'DejaVu Sans'`). No
/// `position`, `transform`, `z-index`, `overflow`, sizes or margins, so an
/// output cannot leave its own box; no `background`, `cursor`, `mask-image`
/// or `content`, which take outside images.
const PROPERTIES: &[&str] = &[
    "fill",
    "fill-opacity",
    "fill-rule",
    "stroke",
    "stroke-width",
    "stroke-opacity",
    "stroke-linecap",
    "stroke-linejoin",
    "stroke-dasharray",
    "stroke-dashoffset",
    "stroke-miterlimit",
    "opacity",
    "clip-path",
    "clip-rule",
    "mask",
    "color",
    "font",
    "font-family",
    "font-size",
    "font-style",
    "font-weight",
    "font-variant",
    "text-anchor",
    "dominant-baseline",
    "stop-color",
    "stop-opacity",
];

/// Functions a value may call: colours, and `url` for a reference that
/// [`url_argument`] checks.
const FUNCTIONS: &[&str] = &["rgb", "rgba", "hsl", "hsla", "url"];

/// Bounds an attribute's work: a longer value is refused, not scanned.
const VALUE_MAX: usize = 4096;

/// `style` with only the declarations of [`PROPERTIES`] whose values are
/// plain ([`value`]); `None` when none is left. Ids in `url(#id)` get
/// `id_prefix`, as the document's ids do.
pub(crate) fn style(style: &str, id_prefix: &str) -> Option<String> {
    if style.len() > VALUE_MAX {
        return None;
    }
    let kept: Vec<String> = style
        .split(';')
        .filter_map(|declaration| {
            let (name, v) = declaration.split_once(':')?;
            let name = name.trim().to_ascii_lowercase();
            if !PROPERTIES.contains(&name.as_str()) {
                return None;
            }
            Some(format!("{name}: {}", value(v, id_prefix)?))
        })
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// A presentation value (an attribute like `fill` or one declaration's
/// value) if it is plain: letters, digits, spaces and the punctuation of
/// numbers, colours, lists and quoted font names, balanced quotes, and only
/// the calls of [`FUNCTIONS`]. `url(#id)` becomes `url(#<id_prefix>id)`.
pub(crate) fn value(v: &str, id_prefix: &str) -> Option<String> {
    let v = v.trim();
    let plain = v.len() <= VALUE_MAX
        && v.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b' ' | b'#' | b'%' | b'.' | b',' | b'+' | b'-' | b'_')
                || matches!(b, b'(' | b')' | b'\'' | b'"' | b'/')
        })
        && quotes_balanced(v);
    if !plain {
        return None;
    }
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(open) = rest.find('(') {
        let name_start = rest[..open]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .map_or(0, |i| i + 1);
        let name = rest[name_start..open].to_ascii_lowercase();
        let close = open + rest[open..].find(')')?;
        let argument = &rest[open + 1..close];
        if !FUNCTIONS.contains(&name.as_str()) || argument.contains('(') {
            return None;
        }
        out.push_str(&rest[..=open]);
        if name == "url" {
            out.push_str(&url_argument(argument, id_prefix)?);
        } else {
            out.push_str(argument);
        }
        out.push(')');
        rest = &rest[close + 1..];
    }
    if rest.contains(')') {
        return None;
    }
    out.push_str(rest);
    Some(out)
}

/// The argument of `url(...)` if it names an element of the document:
/// `#id`, quoted or not, with `id_prefix` put before the id.
fn url_argument(argument: &str, id_prefix: &str) -> Option<String> {
    let a = argument.trim();
    let a = ["'", "\""]
        .iter()
        .find_map(|q| a.strip_prefix(q).and_then(|a| a.strip_suffix(q)))
        .unwrap_or(a);
    let id = a.strip_prefix('#')?;
    let plain = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !plain {
        return None;
    }
    let prefix = if id.starts_with(id_prefix) {
        ""
    } else {
        id_prefix
    };
    Some(format!("#{prefix}{id}"))
}

/// Every quote is closed by its own kind, so that no value runs into the
/// next declaration.
fn quotes_balanced(v: &str) -> bool {
    let mut open: Option<char> = None;
    for c in v.chars() {
        match (open, c) {
            (None, '\'' | '"') => open = Some(c),
            (Some(q), c) if c == q => open = None,
            _ => {}
        }
    }
    open.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "prims-out-";

    #[test]
    fn matplotlib_styles_stay() {
        for s in [
            "fill: #ffffff",
            "fill: none; stroke: #1f77b4; stroke-width: 1.5; stroke-linecap: square",
            "font: 10px 'DejaVu Sans'; text-anchor: middle",
            "stroke-dasharray: 3.7,1.6; stroke-dashoffset: 0",
            "fill: rgba(31, 119, 180, 0.5); opacity: 0.5",
            "font: 12px/1.2 \"DejaVu Sans\", sans-serif",
        ] {
            assert_eq!(style(s, P).as_deref(), Some(s), "{s}");
        }
        assert_eq!(
            style("fill: url(#h1a2b)", P).as_deref(),
            Some("fill: url(#prims-out-h1a2b)")
        );
        assert_eq!(
            value("url('#p1') none", P).as_deref(),
            Some("url(#prims-out-p1) none")
        );
        assert_eq!(
            value("url(#prims-out-p1)", P).as_deref(),
            Some("url(#prims-out-p1)")
        );
    }

    #[test]
    fn what_loads_or_positions_goes() {
        for (s, kept) in [
            (
                "position: fixed; top: 0; z-index: 99999; fill: red",
                "fill: red",
            ),
            (
                "background: url(http://x.test/a.png); fill: red",
                "fill: red",
            ),
            (
                "fill: url(http://x.test/a.svg#g); stroke: blue",
                "stroke: blue",
            ),
            ("fill: url(//x.test/a#g); stroke: blue", "stroke: blue"),
            (
                "mask: url(data:image/svg+xml,x); stroke: blue",
                "stroke: blue",
            ),
            (
                "fill: \\75 rl(http://x.test/); stroke: blue",
                "stroke: blue",
            ),
            (
                "fill: u/**/rl(http://x.test/); stroke: blue",
                "stroke: blue",
            ),
            ("fill: image-set('x.png' 1x); stroke: blue", "stroke: blue"),
            ("fill: var(--jp-icon); stroke: blue", "stroke: blue"),
            ("transform: scale(50); fill: red", "fill: red"),
            ("cursor: url(x.cur), auto; fill: red", "fill: red"),
            ("font-family: 'a; background: url(http://x.test/)'", ""),
            ("fill: rgb(1, 2, url(#x)); stroke: blue", "stroke: blue"),
            (
                "fill: red) url(http://x.test/); stroke: blue",
                "stroke: blue",
            ),
            ("fill: @import; stroke: blue", "stroke: blue"),
        ] {
            assert_eq!(style(s, P).unwrap_or_default(), kept, "{s}");
        }
        assert_eq!(style(&"fill: red;".repeat(1000), P), None);
        for v in [
            "url(http://x.test/#a)",
            "url(#a b)",
            "url(#)",
            "url(\"#a)",
            "expression(alert(1))",
            "red\tblue",
        ] {
            assert_eq!(value(v, P), None, "{v}");
        }
    }
}
