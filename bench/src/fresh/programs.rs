//! The evaluation harness's load that `prims-bench fresh` runs, and the
//! calls that run it (and the pandas cell) through the supervisor socket.

use crate::live::cell::{Cell, PANDAS};
use anyhow::{bail, Result};
use prims_protocol::client::Client;
use prims_protocol::jail::{LimitRequest, Status};
use prims_protocol::wire::RunRequest;

/// Programs in flight at once, as the harness runs them.
pub(crate) const PARALLEL: usize = 4;

/// Our own set: small functions with the asserts that test them, the
/// shape of HumanEval's problems. Each prints `ok`.
pub(crate) const PROGRAMS: [&str; 16] = [
    "def has_close(xs, t):\n    return any(abs(a - b) < t for i, a in enumerate(xs) for b in xs[i + 1:])\nassert has_close([1.0, 2.8, 3.0], 0.3)\nassert not has_close([1.0, 2.0], 0.5)\nprint('ok')",
    "def separate(s):\n    out, depth, cur = [], 0, ''\n    for c in s.replace(' ', ''):\n        cur += c\n        depth += 1 if c == '(' else -1\n        if depth == 0:\n            out.append(cur)\n            cur = ''\n    return out\nassert separate('( ) (( ))') == ['()', '(())']\nprint('ok')",
    "def below_zero(ops):\n    b = 0\n    for o in ops:\n        b += o\n        if b < 0:\n            return True\n    return False\nassert below_zero([1, -2]) and not below_zero([1, 2])\nprint('ok')",
    "def mad(xs):\n    m = sum(xs) / len(xs)\n    return sum(abs(x - m) for x in xs) / len(xs)\nassert abs(mad([1.0, 2.0, 3.0, 4.0]) - 1.0) < 1e-9\nprint('ok')",
    "def intersperse(xs, d):\n    out = []\n    for x in xs:\n        out += [x, d]\n    return out[:-1]\nassert intersperse([1, 2, 3], 4) == [1, 4, 2, 4, 3]\nprint('ok')",
    "def parse_nested(s):\n    def depth(g):\n        d = m = 0\n        for c in g:\n            d += 1 if c == '(' else -1\n            m = max(m, d)\n        return m\n    return [depth(g) for g in s.split() if g]\nassert parse_nested('(()()) ((()))') == [2, 3]\nprint('ok')",
    "def sum_product(xs):\n    p = 1\n    for x in xs:\n        p *= x\n    return sum(xs), p\nassert sum_product([1, 2, 3, 4]) == (10, 24)\nprint('ok')",
    "def rolling_max(xs):\n    out, m = [], None\n    for x in xs:\n        m = x if m is None else max(m, x)\n        out.append(m)\n    return out\nassert rolling_max([1, 2, 3, 2, 3, 4, 2]) == [1, 2, 3, 3, 3, 4, 4]\nprint('ok')",
    "def make_palindrome(s):\n    for i in range(len(s) + 1):\n        if s[i:] == s[i:][::-1]:\n            return s + s[:i][::-1]\nassert make_palindrome('cat') == 'catac'\nprint('ok')",
    "def string_xor(a, b):\n    return ''.join('0' if x == y else '1' for x, y in zip(a, b))\nassert string_xor('010', '110') == '100'\nprint('ok')",
    "def longest(xs):\n    return max(xs, key=len) if xs else None\nassert longest(['a', 'bb', 'ccc']) == 'ccc'\nprint('ok')",
    "import math\ndef gcd(a, b):\n    return math.gcd(a, b)\nassert gcd(25, 15) == 5\nprint('ok')",
    "def prefixes(s):\n    return [s[:i] for i in range(1, len(s) + 1)]\nassert prefixes('abc') == ['a', 'ab', 'abc']\nprint('ok')",
    "def count_distinct(s):\n    return len(set(s.lower()))\nassert count_distinct('xyzXYZ') == 3\nprint('ok')",
    "import re\ndef parse_music(s):\n    return [{'o': 4, 'o|': 2, '.|': 1}[n] for n in re.split(r' +', s.strip()) if n]\nassert parse_music('o o| .| o|') == [4, 2, 1, 2]\nprint('ok')",
    "from collections import Counter\ndef how_many(s, sub):\n    return sum(1 for i in range(len(s) - len(sub) + 1) if s[i:i + len(sub)] == sub)\nassert how_many('aaaa', 'aa') == 3 and Counter('ab')['a'] == 1\nprint('ok')",
];

/// One program in a new interpreter (`fresh: true`) of `session`; it must
/// print `ok`.
pub(crate) async fn run_fresh(client: &Client, session: &str, code: &'static str) -> Result<()> {
    run_program(client, session, code, true).await
}

/// One program, in a new interpreter or as the session's next cell; it
/// must print `ok`.
pub(crate) async fn run_program(
    client: &Client,
    session: &str,
    code: &'static str,
    fresh: bool,
) -> Result<()> {
    run(
        client,
        session,
        Cell {
            code,
            stdout: "ok\n",
        },
        fresh,
    )
    .await
}

/// The pandas cell in `session`'s interpreter; it must print its sum.
pub(crate) async fn run_pandas(client: &Client, session: &str) -> Result<()> {
    run_cell(client, session, PANDAS).await
}

/// `cell` in `session`'s interpreter; it must print what the cell says.
pub(crate) async fn run_cell(client: &Client, session: &str, cell: Cell) -> Result<()> {
    run(client, session, cell, false).await
}

async fn run(client: &Client, session: &str, cell: Cell, fresh: bool) -> Result<()> {
    let req = RunRequest {
        session_id: session.into(),
        tenant: None,
        code: cell.code.into(),
        requirements: vec![],
        limits: LimitRequest::default(),
        fresh,
        network: None,
    };
    let reply = client.run(req, |_| {}).await?;
    if reply.outcome.status != Status::Ok || reply.stdout != cell.stdout.as_bytes() {
        bail!(
            "{:?} (fresh: {fresh}) answered unexpectedly: {reply:?}",
            cell.code
        );
    }
    Ok(())
}
