# Regular expressions and text munging on log-like data.
import re
import string
import textwrap

log = """\
2024-03-01 12:00:01 INFO  user=alice action=login ip=10.0.0.1
2024-03-01 12:00:05 WARN  user=bob action=upload size=12MB ip=10.0.0.2
2024-03-01 12:01:10 ERROR user=alice action=upload size=300MB ip=10.0.0.1
2024-03-02 08:15:00 INFO  user=carol action=logout ip=10.0.0.3
"""
line_re = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>[\d:]{8}) (?P<level>[A-Z]+)\s+(?P<rest>.*)$",
    re.MULTILINE,
)
entries = [m.groupdict() for m in line_re.finditer(log)]
assert len(entries) == 4
assert [e["level"] for e in entries] == ["INFO", "WARN", "ERROR", "INFO"]
kv = [dict(re.findall(r"(\w+)=(\S+)", e["rest"])) for e in entries]
assert kv[1] == {"user": "bob", "action": "upload", "size": "12MB", "ip": "10.0.0.2"}
sizes = [int(m) for m in re.findall(r"size=(\d+)MB", log)]
assert sum(sizes) == 312
assert re.sub(r"ip=(\d+)\.(\d+)\.\d+\.\d+", r"ip=\1.\2.x.x", log).count("10.0.x.x") == 4
assert re.split(r"[,;]\s*", "a, b;c ,d") == ["a", "b", "c ", "d"]
assert re.fullmatch(r"[\w.+-]+@[\w-]+\.[\w.]+", "first.last+tag@example.co.uk")
assert re.search(r"(?i)error", log).start() > 0
assert re.sub(r"(?<=\d)(?=(\d{3})+$)", ",", "1234567") == "1,234,567"
assert re.escape("a.b*c") == r"a\.b\*c"
unicode = "Café naïve — ÆØÅ"
assert re.findall(r"\w+", unicode) == ["Café", "naïve", "ÆØÅ"]

tmpl = string.Template("$who likes $what")
assert tmpl.substitute(who="tim", what="kung pao") == "tim likes kung pao"
para = "The quick brown fox jumps over the lazy dog. " * 5
wrapped = textwrap.wrap(para, width=40)
assert all(len(line) <= 40 for line in wrapped) and len(wrapped) == 6
assert textwrap.dedent("   a\n   b\n") == "a\nb\n"
assert f"{3.14159:.2f}|{42:>6}|{'x':*^5}|{255:#x}|{1234567:,}" == "3.14|    42|**x**|0xff|1,234,567"
print("OK regex_text")
