//! Tests that drive the real agent: a python running the agent's directory
//! as `python -I -u <dir>`, with a socket pair on fd 3 and its stdout and
//! stderr piped, but no jail. Cells go through channel.rs and the output is cut
//! with output.rs, as the supervisor will.

mod harness;

mod cells;
mod charts;
mod exits;
mod hostile;
mod ipython;
mod signals;
mod state;
mod streams;
mod versions;
