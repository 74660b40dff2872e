//! What the exported notebook keeps of the HTML, SVG and Markdown that
//! user code displayed: only inert markup. Jupyter itself treats an
//! unsigned notebook as untrusted, but other viewers (nbconvert's HTML
//! export, an editor's preview, a static site) render its outputs as they
//! are, on a page of their own. So each such output goes through ammonia's
//! allow-list, and what is left can neither act nor reach out:
//! - no script, event handler, frame, form or object;
//! - no URL that loads or navigates: `data:` images on `img` and SVG
//!   `image`, and `#fragment` links, are the only URLs kept;
//! - no `class`, and ids prefixed with [`ID_PREFIX`] (fragment links and
//!   `url(#id)` follow), so that an output can neither borrow the viewer's
//!   styles nor shadow its globals (DOM clobbering);
//! - no HTML `style`, and SVG styles and paint attributes only with plain
//!   values and `url(#id)` ([`css`]), so that nothing covers the page or
//!   loads anything;
//! - Markdown is rendered to HTML (pulldown-cmark) and cleaned as HTML is,
//!   since every Markdown renderer passes raw HTML through.
//!
//! The run view (`mcp/app/run-view.html`) cleans the same outputs in the
//! browser with rules of its own: it opens http(s) links through the host,
//! which asks the user, and shows SVG only as an image. A notebook page has
//! no host to ask, so it keeps no outside link at all.

use ammonia::{Builder, UrlRelative};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;

mod css;

/// Put before every id an output keeps, and before every `#fragment` and
/// `url(#id)` that points at one.
pub(crate) const ID_PREFIX: &str = "prims-out-";

/// The image types a `data:` URL may carry: decoded as images, none of them
/// runs a script or loads anything (an SVG image is a static document).
const INERT_IMAGES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/svg+xml",
];

/// SVG attributes that paint or clip with a CSS value, which may name an
/// outside resource as `url(...)`.
const PAINT_ATTRIBUTES: &[&str] = &["fill", "stroke", "clip-path", "mask"];

/// SVG's drawing elements, as matplotlib and most plotting libraries write
/// them.
const SVG_TAGS: &[&str] = &[
    "svg",
    "g",
    "defs",
    "symbol",
    "use",
    "path",
    "rect",
    "circle",
    "ellipse",
    "line",
    "polyline",
    "polygon",
    "text",
    "tspan",
    "title",
    "desc",
    "clipPath",
    "mask",
    "pattern",
    "linearGradient",
    "radialGradient",
    "stop",
    "image",
    "metadata",
    "marker",
];

/// Presentation attributes: none of them names a script or a place.
const SVG_ATTRIBUTES: &[&str] = &[
    "xmlns",
    "version",
    "viewBox",
    "preserveAspectRatio",
    "width",
    "height",
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "cx",
    "cy",
    "r",
    "rx",
    "ry",
    "d",
    "points",
    "transform",
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
    "clipPathUnits",
    "mask",
    "font-family",
    "font-size",
    "font-weight",
    "font-style",
    "text-anchor",
    "dominant-baseline",
    "dx",
    "dy",
    "offset",
    "stop-color",
    "stop-opacity",
    "gradientUnits",
    "gradientTransform",
    "patternUnits",
    "markerWidth",
    "markerHeight",
    "refX",
    "refY",
    "orient",
    "id",
    "style",
    "href",
    "xlink:href",
    // `xmlns:xlink`, by its local name: without it an SVG shown as an image
    // (nbconvert's way) is not well-formed XML, and shows nothing.
    "xlink",
];

/// HTML beyond ammonia's defaults that tables (pandas') need.
const HTML_ATTRIBUTES: &[&str] = &["id", "border", "colspan", "rowspan", "align"];

/// The rules both cleaners share: URLs ([`url`]), styles and paint
/// ([`css`]) and ids. `data` is the one scheme ammonia lets through to
/// [`attribute`], which keeps it only for images.
fn inert(b: &mut Builder<'static>) {
    b.url_schemes(HashSet::from(["data"]))
        .url_relative(UrlRelative::Custom(Box::new(in_document)))
        .id_prefix(Some(ID_PREFIX))
        .link_rel(None)
        .strip_comments(true)
        .attribute_filter(attribute);
}

fn html_cleaner() -> &'static Builder<'static> {
    static B: OnceLock<Builder<'static>> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = Builder::default();
        b.add_generic_attributes(HTML_ATTRIBUTES.iter().copied());
        inert(&mut b);
        b
    })
}

fn svg_cleaner() -> &'static Builder<'static> {
    static B: OnceLock<Builder<'static>> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = Builder::empty();
        b.tags(SVG_TAGS.iter().copied().collect::<HashSet<_>>())
            .generic_attributes(SVG_ATTRIBUTES.iter().copied().collect::<HashSet<_>>());
        inert(&mut b);
        b
    })
}

/// What an allowed attribute keeps of its value, after ammonia's own checks
/// and the id prefix. (`xlink:href` arrives as `href`: its local name.)
fn attribute<'v>(element: &str, attribute: &str, value: &'v str) -> Option<Cow<'v, str>> {
    match attribute {
        "href" | "src" => url(element, value),
        // Not fetched, but an outside URL all the same.
        "cite" => None,
        "style" => css::style(value, ID_PREFIX).map(Cow::Owned),
        a if PAINT_ATTRIBUTES.contains(&a) => css::value(value, ID_PREFIX).map(Cow::Owned),
        // The namespaces are what they must be; nothing else.
        "xmlns" => Some(Cow::Borrowed("http://www.w3.org/2000/svg")),
        "xlink" => Some(Cow::Borrowed("http://www.w3.org/1999/xlink")),
        // Moved, the outer <svg> could cover what is around it.
        "transform" if element == "svg" => None,
        _ => Some(Cow::Borrowed(value)),
    }
}

/// A URL is kept only where it cannot load or navigate anything outside
/// the document: an inert `data:` image as an image's source, or a
/// `#fragment`, which gets the id prefix.
fn url<'v>(element: &str, value: &'v str) -> Option<Cow<'v, str>> {
    if matches!(element, "img" | "image") {
        return inert_image(value).then_some(Cow::Borrowed(value));
    }
    let id = value.strip_prefix('#')?;
    Some(if id.starts_with(ID_PREFIX) {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!("#{ID_PREFIX}{id}"))
    })
}

/// `data:<one of INERT_IMAGES>[;...],...`
fn inert_image(url: &str) -> bool {
    let is_data = url
        .get(..5)
        .is_some_and(|h| h.eq_ignore_ascii_case("data:"));
    let mime = url.get(5..).and_then(|r| r.split([';', ',']).next());
    is_data && mime.is_some_and(|mime| INERT_IMAGES.iter().any(|m| m.eq_ignore_ascii_case(mime)))
}

/// A relative URL is kept only when it points inside the document (`#id`);
/// [`url`] has already given it the id prefix.
fn in_document(url: &str) -> Option<Cow<'_, str>> {
    url.starts_with('#').then_some(Cow::Borrowed(url))
}

/// `html` with only inert markup left.
pub(crate) fn html(html: &str) -> String {
    html_cleaner().clean(html).to_string()
}

/// `svg` with only drawing elements and presentation attributes left.
pub(crate) fn svg(svg: &str) -> String {
    svg_cleaner().clean(svg).to_string()
}

/// `markdown` rendered to HTML (CommonMark with tables, strikethrough and
/// task lists), then cleaned as [`html`] is: raw HTML in it is cleaned like
/// any other, links lose their outside targets. Math keeps its `$`
/// delimiters as text, so that a viewer's MathJax still typesets it.
pub(crate) fn markdown(markdown: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser};
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_MATH;
    let events = Parser::new_ext(markdown, options).map(|e| match e {
        Event::InlineMath(m) => Event::Text(format!("${m}$").into()),
        Event::DisplayMath(m) => Event::Text(format!("$${m}$$").into()),
        e => e,
    });
    let mut rendered = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut rendered, events);
    html(&rendered)
}

#[cfg(test)]
mod tests;
