//! The Python half of the probe protocol: the prelude every probe script
//! starts with, and quoting a Rust string as a Python literal.

/// Python code every probe script starts with.
///
/// `sc(name, nr, *args)` makes a raw syscall with every argument passed as a
/// C `long` and prints `SC name ret errno`. `err(name, fn, *args)` calls a
/// Python function and prints `ERR name errno` when it raises `OSError`, or
/// `ERR name ok` when it returns. `kv(name, *values)` prints `KV name values`.
/// `W` is bubblewrap's "wrong pointer": a non-NULL address that is never
/// mapped, so a kernel that looks at the argument fails with EFAULT.
pub const PY_PRELUDE: &str = r#"
import ctypes, os, sys, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
W = 1
def sc(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print("SC", name, r, ctypes.get_errno(), flush=True)
    return r
def err(name, fn, *args, **kwargs):
    try:
        r = fn(*args, **kwargs)
    except OSError as e:
        print("ERR", name, e.errno, flush=True)
        return None
    print("ERR", name, "ok", flush=True)
    return r
def kv(name, *values):
    print("KV", name, *values, flush=True)
"#;

/// Python literal for a str.
pub fn py_str(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
