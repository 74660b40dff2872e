"""The PRIMS interpreter agent: one live interpreter in a session's jail.

Cells arrive as frames on fd 3 and run in one persistent `__main__`; each
answers with a frame. Stdlib only (IPython comes from the read-only IPython
layer when it is there); CPython 3.8 to 3.13. The supervisor's side of the
channel is `supervisor/src/interpreters/channel.rs`, which documents the
messages; `agent.rs` spells the limits below, and a test checks that the
two agree.

- `main`: start-up, for a cold interpreter, a fork template and a python
  forked from one;
- `channel`: the framing and its limits;
- `agent`: the `Agent`, which runs cells, `%pip` installs and the loop;
- `state`: saving the globals at a stop and restoring them in the next
  interpreter;
- `shell`: cells through IPython's InteractiveShell (the IPython layer);
- `stdio`, `text`: the agent's own stdio and the words it sends;
- `fork/`: the fork wing's half: a template's fork loop (`template`),
  python's parent (`parent`), and the calls they make (`syscalls`).
"""
