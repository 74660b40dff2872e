"""The words the agent sends: every string capped and always valid UTF-8."""

# A last expression's repr is cut to this many characters.
RESULT_MAX_CHARS = 16384
# Entries in any list the agent sends.
LIST_MAX = 1000
# Characters in a name, a why or an exception type name.
NAME_MAX_CHARS = 256
# Characters in an `error` message.
MESSAGE_MAX_CHARS = 1024


def clean(text):
    """`text` with lone surrogates escaped, so it always encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def cap(text, limit):
    """(`text` cut to `limit` characters, whether it was cut)."""
    text = clean(text)
    if len(text) > limit:
        return text[:limit], True
    return text, False


def short(text):
    """`text` as a name: at most NAME_MAX_CHARS characters."""
    return cap(text, NAME_MAX_CHARS)[0]


def why(exc):
    """One line that says why `exc` happened."""
    try:
        detail = str(exc)
    except BaseException:
        detail = "<str() failed>"
    line = type(exc).__name__ + (": " + detail if detail else "")
    return short(" ".join(line.split()))


def exception_name(cls):
    """The name Python's tracebacks give an exception type."""
    qualname = getattr(cls, "__qualname__", None)
    if not isinstance(qualname, str):
        qualname = "<unknown>"
    module = getattr(cls, "__module__", None)
    if isinstance(module, str) and module not in ("builtins", "__main__"):
        qualname = module + "." + qualname
    return short(qualname)


def named(name, reason):
    """A `{name, why}` entry of a list the agent sends."""
    return {"name": short(name), "why": short(reason)}


def error(message):
    """The `error` message."""
    return {"op": "error", "message": cap(message, MESSAGE_MAX_CHARS)[0]}
