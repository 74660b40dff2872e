//! Helpers for end-to-end tests.
//!
//! It owns what the tests and the benchmarks share: starting the real
//! binaries, probing the jail, parsing outcomes, test servers, job specs,
//! and cleaning up after them. It is never part of the product: no crate
//! depends on it but as a dev-dependency, and the benchmarks. Its tests
//! never skip: those that need root refuse to run without it. They assert
//! exact errnos, signals and values; performance is never a test here (the
//! benchmarks measure it). They leave no process, mount or cgroup behind.
//!
//! Every test drives the real binaries: `target/debug/prims run --json` runs a
//! Python script inside the jail and prints one JSON outcome. The helpers here
//! write the script and the policy to a private temp directory, run prims with
//! a hard timeout, parse the outcome, and give the tests small assertion
//! helpers. Python probes print one line per check:
//!
//! - `SC <name> <return> <errno>` for a raw `syscall(2)` made through ctypes
//!   (see [`PY_PRELUDE`]);
//! - `ERR <name> <errno>` or `ERR <name> ok` for a Python call that may raise
//!   `OSError`;
//! - `KV <name> <value...>` for any other observation.
//!
//! The Rust side parses those lines and asserts exact values, collecting every
//! mismatch of a test before failing so one run reports all of them.
//!
//! The helpers are split by concern and re-exported here, so a test only
//! needs `use prims_tests::*;`:
//!
//! - [`harness`]: locating the built binaries, the root check, and [`Job`],
//!   which runs `prims run` with a script and a policy, in the interpreter
//!   `PRIMS_TEST_MODE` names: forked from a template by default (as the
//!   server starts them), or started cold, forked in place, or one-shot;
//! - [`child`]: running any child process with a hard timeout ([`RawOutput`]);
//! - [`outcome`]: [`Run`], a parsed `prims run --json` outcome and its
//!   `SC` / `ERR` / `KV` lines;
//! - [`checks`]: [`Checks`], which collects every mismatch of a test, and
//!   errno names for messages;
//! - [`python`]: the Python prelude every probe starts with and str quoting;
//! - [`probes`]: the probe bodies shared by the jail tests and the host
//!   control test;
//! - [`daemon`]: a real `prims supervisor` process for socket tests;
//! - [`held`]: [`Held`], a jail kept running while the host inspects it;
//! - [`jail_spec`]: job specs for driving the jailer or `Jails` directly;
//! - [`live`]: runs in a supervisor's live interpreters, their state, and
//!   waits on the supervisor's figures;
//! - [`peer`]: talking to a socket as another uid, from a forked child;
//! - [`policy`]: the tests' default policy keys, merged under a test's own;
//! - [`host`]: host-side helpers: unique markers, process-table scans,
//!   workspace directories, file owners, host python runs;
//! - [`teardown`]: unmounting and removing what a killed supervisor left;
//! - [`netns`]: a test host in a network namespace of the test's own;
//! - [`tls_upstream`]: a TLS upstream with a CA of the test's own, which
//!   answers each request with what it received;
//! - [`web`]: test HTTP and HTTPS servers (python's), on loopback or in
//!   such a host;
//! - [`http`]: [`HttpServer`], an in-process HTTP/1.1 server whose handler
//!   a test writes, recording the connections and request heads it saw.

pub mod checks;
pub mod child;
pub mod daemon;
pub mod forked;
pub mod harness;
pub mod held;
pub mod host;
pub mod http;
pub mod jail_spec;
pub mod live;
pub mod netns;
pub mod outcome;
pub mod peer;
pub mod policy;
pub mod probes;
pub mod python;
pub mod teardown;
pub mod tls_upstream;
pub mod web;

pub use checks::{errno_name, Checks};
pub use child::{run_with_timeout, RawOutput};
pub use harness::{
    egress_account, jailer_bin, policy_with, prims_bin, require_root, target_dir, Job,
    DEFAULT_POLICY, HARD_TIMEOUT,
};
pub use held::{Held, HOLD_PY};
pub use host::{
    assert_no_survivors, host_python, owner, processes_with_marker, unique, workspace_dir,
};
pub use http::HttpServer;
pub use outcome::Run;
pub use python::{py_str, PY_PRELUDE};
