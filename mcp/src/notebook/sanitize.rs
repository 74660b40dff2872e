//! What the exported notebook keeps of the HTML and SVG that user code
//! displayed: only inert markup. Jupyter itself treats an unsigned notebook
//! as untrusted, but other viewers (an editor's preview, a static site) may
//! render its outputs as they are, so a `<script>`, an `onerror` or a
//! `javascript:` link a cell printed would run there as the viewer. Each
//! such output goes through ammonia's allow-list: tables, text formatting,
//! images and SVG's drawing elements stay; scripts, event handlers, styles,
//! frames, forms and links to anywhere but the document itself go.

use ammonia::Builder;
use std::collections::HashSet;
use std::sync::OnceLock;

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
    "class",
    "style",
    "href",
    "xlink:href",
];

/// HTML beyond ammonia's defaults that tables (pandas') need.
const HTML_ATTRIBUTES: &[&str] = &["class", "id", "border", "colspan", "rowspan", "align"];

fn html_cleaner() -> &'static Builder<'static> {
    static B: OnceLock<Builder<'static>> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = Builder::default();
        b.add_generic_attributes(HTML_ATTRIBUTES.iter().copied());
        b
    })
}

fn svg_cleaner() -> &'static Builder<'static> {
    static B: OnceLock<Builder<'static>> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = Builder::empty();
        b.tags(SVG_TAGS.iter().copied().collect::<HashSet<_>>())
            .generic_attributes(SVG_ATTRIBUTES.iter().copied().collect::<HashSet<_>>())
            // An href may point only inside the document (#id).
            .url_schemes(HashSet::new())
            .url_relative(ammonia::UrlRelative::Custom(Box::new(in_document)))
            .link_rel(None)
            .strip_comments(true);
        b
    })
}

/// A URL that points inside the document (`#id`), which SVG's `use` and
/// `clip-path` need; any other relative URL goes.
fn in_document(url: &str) -> Option<std::borrow::Cow<'_, str>> {
    url.starts_with('#')
        .then_some(std::borrow::Cow::Borrowed(url))
}

/// `html` with only inert markup left.
pub(crate) fn html(html: &str) -> String {
    html_cleaner().clean(html).to_string()
}

/// `svg` with only drawing elements and presentation attributes left.
pub(crate) fn svg(svg: &str) -> String {
    svg_cleaner().clean(svg).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_keeps_tables_and_loses_scripts() {
        let table = "<table border=\"1\" class=\"dataframe\"><thead><tr><th>a</th></tr></thead>\
                     <tbody><tr><td>1</td></tr></tbody></table>";
        assert_eq!(html(table), table);
        let hostile = "<b>x</b><script>alert(1)</script><img src=\"x\" onerror=\"alert(1)\">\
                       <a href=\"javascript:alert(1)\">y</a><iframe src=\"https://e.x\"></iframe>";
        let clean = html(hostile);
        for active in ["<script", "onerror", "javascript:", "<iframe", "alert"] {
            assert!(!clean.contains(active), "{active} in {clean}");
        }
        assert!(clean.starts_with("<b>x</b><img src=\"x\">"), "{clean}");
    }

    #[test]
    fn svg_keeps_drawing_and_loses_scripts() {
        let hostile =
            "<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\" viewBox=\"0 0 9 9\">\
                       <script>alert(2)</script><circle cx=\"5\" cy=\"5\" r=\"4\" fill=\"red\"/>\
                       <a href=\"javascript:alert(3)\"><text>t</text></a>\
                       <foreignObject><img src=x onerror=alert(4)></foreignObject>\
                       <use href=\"https://evil.example/x.svg#a\"/><use href=\"#c1\"/></svg>";
        let clean = svg(hostile);
        for active in [
            "onload",
            "<script",
            "javascript:",
            "foreignObject",
            "onerror",
            "alert",
            "evil",
        ] {
            assert!(!clean.contains(active), "{active} in {clean}");
        }
        assert!(
            clean.contains("<circle cx=\"5\" cy=\"5\" r=\"4\" fill=\"red\">"),
            "{clean}"
        );
        assert!(clean.contains("viewBox=\"0 0 9 9\""), "{clean}");
        assert!(clean.contains("<text>t</text>"), "{clean}");
        let local =
            svg("<svg><defs><path id=\"c1\" d=\"M0 0\"/></defs><use xlink:href=\"#c1\"/></svg>");
        assert!(
            local.contains("href=\"#c1\""),
            "a link inside the document stays: {local}"
        );
    }
}
