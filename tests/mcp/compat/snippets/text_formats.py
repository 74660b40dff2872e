# Structured text: XML, HTML, e-mail, URLs, diffs, unicode.
import difflib
import email
import html
import unicodedata
import xml.dom.minidom
import xml.etree.ElementTree as ET
from email.message import EmailMessage
from email.utils import formataddr, parseaddr, parsedate_to_datetime
from html.parser import HTMLParser
from urllib.parse import parse_qs, quote, urlencode, urljoin, urlparse, urlunparse

root = ET.fromstring(
    "<catalog><book id='1'><title>Dune</title><price>9.99</price></book>"
    "<book id='2'><title>Emma</title><price>4.50</price></book></catalog>"
)
assert [b.get("id") for b in root.iter("book")] == ["1", "2"]
assert sum(float(p.text) for p in root.findall("./book/price")) == 14.49
new = ET.SubElement(root, "book", id="3")
ET.SubElement(new, "title").text = "Ulysses & co"
out = ET.tostring(root, encoding="unicode")
assert "Ulysses &amp; co" in out
assert xml.dom.minidom.parseString(out).getElementsByTagName("book").length == 3


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append(dict(attrs)["href"])


p = Links()
p.feed('<p>See <a href="/a">a</a> and <A HREF="http://x.org/b?q=1">b</a></p>')
assert p.links == ["/a", "http://x.org/b?q=1"]
assert html.escape("<b>&'") == "&lt;b&gt;&amp;&#x27;" and html.unescape("&eacute;&#x41;") == "éA"

msg = EmailMessage()
msg["From"] = formataddr(("Ann Example", "ann@example.com"))
msg["To"] = "bob@example.com"
msg["Subject"] = "Report ✓"
msg["Date"] = "Tue, 01 Oct 2024 10:00:00 +0000"
msg.set_content("Body text\n")
msg.add_attachment(b"a,b\n1,2\n", maintype="text", subtype="csv", filename="r.csv")
parsed = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
assert parsed["Subject"] == "Report ✓"
assert parseaddr(parsed["From"]) == ("Ann Example", "ann@example.com")
assert [a.get_filename() for a in parsed.iter_attachments()] == ["r.csv"]
assert parsedate_to_datetime(parsed["Date"]).year == 2024

u = urlparse("https://user@example.com:8443/a/b;p?q=1&q=2&x=%20y#frag")
assert (u.hostname, u.port, u.path) == ("example.com", 8443, "/a/b")
assert parse_qs(u.query) == {"q": ["1", "2"], "x": [" y"]}
assert urlencode({"a": "x y", "b": "é"}) == "a=x+y&b=%C3%A9"
assert urljoin("http://h/a/b/c", "../d") == "http://h/a/d"
assert quote("a b/c") == "a%20b/c"
assert urlunparse(("http", "h", "/p", "", "k=v", "")) == "http://h/p?k=v"

diff = list(difflib.unified_diff(["a\n", "b\n", "c\n"], ["a\n", "B\n", "c\n"], "old", "new"))
assert diff[2:] == ["@@ -1,3 +1,3 @@\n", " a\n", "-b\n", "+B\n", " c\n"]
assert difflib.get_close_matches("appel", ["ape", "apple", "peach"]) == ["apple", "ape"]
assert unicodedata.normalize("NFC", "e\u0301") == "é"
assert unicodedata.name("☃") == "SNOWMAN"
assert "straße".casefold() == "strasse"
assert "Ǆemo".title() == "ǅemo"
print("OK text_formats")
