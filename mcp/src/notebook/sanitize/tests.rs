//! Each finding of the review of exported notebooks, and the payload
//! classes that already came out inert (so that a change to the cleaners'
//! configuration that lets one back in fails here). The end-to-end proof,
//! nbconvert's HTML in a real browser, is tests/mcp/test_notebook_inert.py.

use super::*;

/// No attribute left that acts or reaches out of the document.
fn assert_inert(clean: &str) {
    let lower = clean.to_ascii_lowercase();
    for active in [
        "<script",
        "onerror",
        "onload",
        "onclick",
        "javascript",
        "<iframe",
        "<object",
        "<embed",
        "<base",
        "<meta",
        "<link",
        "<form",
        "<style",
        "srcset",
        "foreignobject",
        "<set",
        "<animate",
        "http:",
        "https:",
        "ftp:",
        "tel:",
        "//",
        "class=",
        "position",
        "alert",
    ] {
        assert!(!lower.contains(active), "{active} in {clean}");
    }
    for attr in ["href=\"", "src=\""] {
        for (i, _) in lower.match_indices(attr) {
            let v = &lower[i + attr.len()..];
            assert!(
                v.starts_with("#prims-out-") || v.starts_with("data:image/"),
                "{attr} keeps an outside URL: {clean}"
            );
        }
    }
}

#[test]
fn html_keeps_tables_and_loses_scripts() {
    let table = "<table border=\"1\" class=\"dataframe\"><thead><tr><th>a</th></tr></thead>\
                 <tbody><tr><td>1</td></tr></tbody></table>";
    assert_eq!(html(table), table.replace(" class=\"dataframe\"", ""));
    let hostile = "<b>x</b><script>alert(1)</script><img src=\"x\" onerror=\"alert(1)\">\
                   <a href=\"javascript:alert(1)\">y</a><iframe src=\"https://e.x\"></iframe>";
    let clean = html(hostile);
    assert_inert(&clean);
    assert_eq!(clean, "<b>x</b><img><a>y</a>");
}

#[test]
fn markdown_is_rendered_and_cleaned() {
    // The High finding: raw HTML in Markdown acted in nbconvert's export.
    for md in [
        "<img src=x onerror=\"fetch('//127.0.0.1:9/m')\">",
        "hi <script>fetch('//127.0.0.1:9/m')</script>",
        "<svg onload=\"fetch('//127.0.0.1:9/m')\"></svg>",
        "<details open ontoggle=alert(1)><summary>s</summary></details>",
        "[click](javascript:alert(1)) [x](https://evil.test/)",
        "![i](http://127.0.0.1:9/img.png) ![j](//127.0.0.1:9/j.png) ![k](/k?x=1)",
        "<a href=\"tel:123\">t</a> <a href=\"ftp://x.test/\">f</a>",
    ] {
        assert_inert(&markdown(md));
    }
    assert_eq!(
        markdown("# Title\n\n**bold** and `a < b`, $x^2$\n\n| a |\n|---|\n| 1 |\n"),
        "<h1>Title</h1>\n<p><strong>bold</strong> and <code>a &lt; b</code>, $x^2$</p>\n\
         <table><thead><tr><th>a</th></tr></thead><tbody>\n<tr><td>1</td></tr>\n</tbody></table>\n"
    );
    // A link keeps its text; a link inside the document keeps its target.
    assert_eq!(
        markdown("[docs](https://x.test/) [up](#top)"),
        "<p><a>docs</a> <a href=\"#prims-out-top\">up</a></p>\n"
    );
    // An autolink is left as text.
    assert_eq!(
        markdown("<https://x.test/>"),
        "<p><a>https://x.test/</a></p>\n"
    );
}

#[test]
fn html_keeps_no_outside_url() {
    // The Medium finding: outside, protocol-relative and relative URLs.
    let clean = html(
        "<img src=\"http://127.0.0.1:9/a.png\"><img src=\"//127.0.0.1:9/b.png\">\
         <img src=\"/c?x=1\"><img src=\"c.png\"><img src=\"#d\">\
         <a href=\"https://x.test/\">1</a><a href=\"ftp://x.test/\">2</a><a href=\"tel:1\">3</a>\
         <a href=\"mailto:a@x.test\">4</a><a href=\"/rel\">5</a><a href=\" //x.test\">6</a>\
         <blockquote cite=\"http://x.test/\">q</blockquote>",
    );
    assert_inert(&clean);
    assert_eq!(
        clean,
        "<img><img><img><img><img><a>1</a><a>2</a><a>3</a><a>4</a><a>5</a><a>6</a>\
         <blockquote>q</blockquote>"
    );
    // What stays: inert data: images, and links inside the document.
    let png = "data:image/png;base64,iVBORw0KGgo=";
    assert_eq!(
        html(&format!(
            "<img src=\"{png}\"><a href=\"#sec\">s</a><h2 id=\"sec\">S</h2>"
        )),
        format!(
            "<img src=\"{png}\"><a href=\"#prims-out-sec\">s</a><h2 id=\"prims-out-sec\">S</h2>"
        )
    );
    for not_an_image in [
        "data:text/html,<script>alert(1)</script>",
        "data:application/javascript,alert(1)",
        "DATA:text/html;base64,PHNjcmlwdD4=",
    ] {
        assert_eq!(html(&format!("<img src=\"{not_an_image}\">")), "<img>");
    }
    assert_eq!(
        html("<a href=\"data:image/png;base64,iVBORw0KGgo=\">x</a>"),
        "<a>x</a>",
        "a data: URL is kept only as an image's source"
    );
}

#[test]
fn classes_go_and_ids_are_prefixed() {
    // The Low findings: borrowing the viewer's classes, DOM clobbering.
    let clean = html(
        "<div class=\"jp-Dialog\"><a id=\"CONFIG\" href=\"#x\">login</a></div>\
         <img name=\"CONFIG2\"><form name=\"f\"></form><span id=\"prims-out-k\">k</span>",
    );
    assert_inert(&clean);
    assert_eq!(
        clean,
        "<div><a id=\"prims-out-CONFIG\" href=\"#prims-out-x\">login</a></div><img>\
         <span id=\"prims-out-k\">k</span>"
    );
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
    assert_eq!(
        local,
        "<svg><defs><path id=\"prims-out-c1\" d=\"M0 0\"></path></defs>\
         <use xlink:href=\"#prims-out-c1\"></use></svg>",
        "a link inside the document stays, to the prefixed id"
    );
}

#[test]
fn svg_stays_a_well_formed_document() {
    // As an image (nbconvert shows SVG as <img src="data:...">), an SVG is
    // XML: xlink:href needs its namespace declared.
    assert_eq!(
        svg("<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\">\
             <use xlink:href=\"#g\"/></svg>"),
        "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\">\
         <use xlink:href=\"#prims-out-g\"></use></svg>"
    );
    assert_eq!(
        svg("<svg xmlns=\"http://x.test/\" xmlns:xlink=\"http://x.test/\"></svg>"),
        "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\"></svg>"
    );
}

#[test]
fn svg_keeps_no_outside_css_and_cannot_cover_the_page() {
    // The Medium finding (outside CSS references) and the Low one (an
    // output over the whole page).
    let clean = svg(
        "<svg style=\"position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:99999\" \
              transform=\"scale(40)\" class=\"jp-Dialog\">\
         <rect style=\"background:url(http://127.0.0.1:9/s)\" width=\"1\" height=\"1\"/>\
         <rect fill=\"url(http://127.0.0.1:9/f#g)\" stroke=\"url(//127.0.0.1:9/k#g)\"/>\
         <rect mask=\"url(http://127.0.0.1:9/m#m)\" clip-path=\"url(http://127.0.0.1:9/c#c)\"/>\
         <path style=\"marker-start:url(http://127.0.0.1:9/k#m);fill:red\" d=\"M0 0\"/>\
         <image href=\"http://127.0.0.1:9/i.png\"/><image href=\"data:image/png;base64,iVBO\"/>\
         </svg>",
    );
    assert_inert(&clean);
    assert_eq!(
        clean,
        "<svg><rect height=\"1\" width=\"1\"></rect><rect></rect><rect></rect>\
         <path style=\"fill: red\" d=\"M0 0\"></path><image></image>\
         <image href=\"data:image/png;base64,iVBO\"></image></svg>"
    );
    // matplotlib's own references inside the figure stay, prefixed.
    assert_eq!(
        svg("<svg><defs><clipPath id=\"p1\"><rect/></clipPath></defs>\
             <path clip-path=\"url(#p1)\" style=\"fill: url(#h2); stroke: #1f77b4\" d=\"M0 0\"/>\
             <g transform=\"translate(1 2)\"></g></svg>"),
        "<svg><defs><clipPath id=\"prims-out-p1\"><rect></rect></clipPath></defs>\
         <path clip-path=\"url(#prims-out-p1)\" style=\"fill: url(#prims-out-h2); stroke: #1f77b4\" \
         d=\"M0 0\"></path><g transform=\"translate(1 2)\"></g></svg>"
    );
}

#[test]
fn what_held_still_holds() {
    // Tag nesting and namespace tricks, javascript: spellings, data: URLs,
    // srcset, <base>, meta refresh, <link>, <object>, <embed>, SVG script,
    // foreignObject, use, set and animate.
    for payload in [
        "<svg><p><style><img src=x onerror=alert(1)></style></p></svg>",
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
        "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
        "<a href=\"jav&#x09;ascript:alert(1)\">1</a><a href=\"JaVaScRiPt:alert(1)\">2</a>",
        "<a href=\"&#106;avascript:alert(1)\">3</a><a href=\" javascript:alert(1)\">4</a>",
        "<a href=\"data:text/html,<script>alert(1)</script>\">5</a>",
        "<img srcset=\"http://127.0.0.1:9/s 1x\"><base href=\"http://127.0.0.1:9/\">",
        "<meta http-equiv=\"refresh\" content=\"0;url=http://127.0.0.1:9/\">",
        "<link rel=\"stylesheet\" href=\"http://127.0.0.1:9/l.css\">",
        "<object data=\"http://127.0.0.1:9/o\"></object><embed src=\"http://127.0.0.1:9/e\">",
        "<svg><script>alert(1)</script><foreignObject><iframe src=\"javascript:alert(1)\">",
        "<svg><use href=\"data:image/svg+xml,<svg id='x'/>#x\"/></svg>",
        "<svg><a><set attributeName=\"href\" to=\"javascript:alert(1)\"/><text>t</text></a></svg>",
        "<svg><animate attributeName=\"href\" values=\"javascript:alert(1)\"/></svg>",
    ] {
        assert_inert(&html(payload));
        assert_inert(&svg(payload));
        assert_inert(&markdown(payload));
    }
}
