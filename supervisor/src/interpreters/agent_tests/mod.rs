//! Tests that drive the real agent: a python running AGENT_SOURCE as
//! `python -I -u -c`, with a socket pair on fd 3 and its stdout and stderr
//! piped, but no jail. Cells go through channel.rs and the output is cut
//! with output.rs, as the supervisor will.

mod harness;

mod cells;
mod exits;
mod hostile;
mod notebook;
mod signals;
mod state;
mod streams;
mod versions;
