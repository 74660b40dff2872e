//! User code that attacks its interpreter's channel to the supervisor (the
//! socket the agent reads cells from): garbage, a huge length header, a
//! frame left half written, a forged answer, the channel closed or
//! replaced. Each call gets a clear result, the session's next call works
//! in a new interpreter, and no other session notices.

use prims_protocol::client::Client;
use prims_protocol::jail::Status;
use prims_protocol::wire::{ResetReason, RunReply};
use prims_tests::daemon::Daemon;
use prims_tests::live::*;

/// Finds the channel among the interpreter's fds: the only socket.
const FIND_CHANNEL: &str = r#"import os, time
def _channel():
    for f in os.listdir('/proc/self/fd'):
        try:
            if os.readlink('/proc/self/fd/' + f).startswith('socket:'):
                return int(f)
        except OSError:
            pass
chan = _channel()
print('channel found:', chan is not None, flush=True)
"#;

/// What the supervisor appends to a call whose channel it found broken.
const BROKEN_NOTE: &str = "[prims] The interpreter's channel to the server was broken";

async fn start() -> (Daemon, Client, String) {
    let d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    (d, c, s)
}

/// Runs `attack` after FIND_CHANNEL in a session that holds `x`: the
/// session's next call finds a new interpreter (for `channel_broken`) with
/// no `x`, and works; another session is untouched; the attacked call was
/// stopped with a note and kept what it printed. Returns the attacked call.
async fn attacked(attack: &str) -> RunReply {
    let (_d, c, s) = start().await;
    let other = c.open_session(None).await.unwrap().session_id;
    run(&c, &s, "x = 1").await;
    run(&c, &other, "y = 'untouched'").await;
    let hit = run(&c, &s, &format!("{FIND_CHANNEL}{attack}")).await;
    assert_kept(&hit);
    let next = run(&c, &s, "print('x' in globals())").await;
    assert_reset(&next, ResetReason::ChannelBroken);
    assert_eq!(next.outcome.status, Status::Ok, "{next:?}");
    assert_eq!(stdout(&next), "False\n");
    let again = run(&c, &s, "print('works')").await;
    assert_kept(&again);
    assert_eq!(stdout(&again), "works\n");
    let bystander = run(&c, &other, "print(y)").await;
    assert_kept(&bystander);
    assert_eq!(
        stdout(&bystander),
        "untouched\n",
        "another session is untouched"
    );
    assert_broken(&hit);
    assert_eq!(
        stdout(&hit),
        "channel found: True\n",
        "what the code printed before the attack: {hit:?}"
    );
    hit
}

/// The supervisor stopped the call at a frame it could not accept.
#[track_caller]
fn assert_broken(hit: &RunReply) {
    assert_eq!(hit.outcome.status, Status::Error, "{hit:?}");
    assert_eq!(hit.outcome.exit_code, None);
    assert_eq!(hit.outcome.signal, None);
    assert!(stderr(hit).contains(BROKEN_NOTE), "{hit:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_garbage_on_the_channel() {
    let hit = attacked("os.write(chan, b'garbage')\ntime.sleep(30)").await;
    // b"garb" read as a length is far past the frame cap.
    assert!(
        stderr(&hit).contains("1734439522"),
        "the error names the length read: {}",
        stderr(&hit)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_a_huge_length_header() {
    let hit = attacked("os.write(chan, b'\\xff\\xff\\xff\\xff')\ntime.sleep(30)").await;
    assert!(stderr(&hit).contains("4294967295"), "{}", stderr(&hit));
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_a_frame_left_half_written() {
    // The frame deadline (5 s from its first byte) ends the wait, well
    // before the call's own 30 s limit.
    let hit =
        attacked("os.write(chan, (100).to_bytes(4, 'big') + b'{\"op\"')\ntime.sleep(30)").await;
    assert!(
        hit.outcome.wall_ms < 30_000,
        "not the time limit: {:?}",
        hit.outcome
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_an_answer_for_the_wrong_cell() {
    let forged = concat!(
        "import json\n",
        "body = json.dumps({'op': 'done', 'id': 999, 'status': 'ok', 'exit_code': 0,",
        " 'exception': None, 'result': 'forged', 'result_truncated': False}).encode()\n",
        "os.write(chan, len(body).to_bytes(4, 'big') + body)\n",
        "time.sleep(30)",
    );
    let hit = attacked(forged).await;
    assert_eq!(hit.interpreter.result, None, "the forgery is not believed");
}

/// Python that writes a `done` for the running cell, whose id it finds in
/// the agent's frame, with a made-up result.
const FORGE_DONE: &str = r#"import json, sys
def cell_id():
    f = sys._getframe()
    while 'cid' not in f.f_locals:
        f = f.f_back
    return f.f_locals['cid']
def forge(cid):
    body = json.dumps({'op': 'done', 'id': cid, 'status': 'ok', 'exit_code': 0,
                       'exception': None, 'result': "'forged'", 'result_truncated': False}).encode()
    os.write(chan, len(body).to_bytes(4, 'big') + body)
    print('forged', file=sys.stderr, flush=True)
cid = cell_id()
"#;

/// A forged `done` for the running cell, sent by `how`, while the code
/// runs on for 2 s: the call ends only when the code does, with the
/// agent's own answer, and the channel stays sound.
async fn forged_done_is_held(how: &str) {
    let (_d, c, s) = start().await;
    let other = c.open_session(None).await.unwrap().session_id;
    run(&c, &s, "x = 1").await;
    run(&c, &other, "y = 'untouched'").await;
    let code = format!(
        "{FIND_CHANNEL}{FORGE_DONE}{how}\n\
         time.sleep(2)\n\
         print('finished', flush=True)\n\
         x = 2\n\
         'genuine'"
    );
    let hit = run(&c, &s, &code).await;
    assert_kept(&hit);
    assert_eq!(hit.outcome.status, Status::Ok, "{hit:?}");
    assert_eq!(
        stdout(&hit),
        "channel found: True\nfinished\n",
        "the call ended with the code, not at the forgery: {hit:?}"
    );
    assert_eq!(
        hit.interpreter.result.as_deref(),
        Some("'genuine'"),
        "{}",
        _d.log()
    );
    assert_eq!(stderr(&hit), "forged\n", "the forgery was sent");
    assert!(hit.outcome.wall_ms >= 2000, "{:?}", hit.outcome);
    let next = run(&c, &s, "print(x)").await;
    assert_kept(&next);
    assert_eq!(stdout(&next), "2\n", "the channel is sound: {next:?}");
    let bystander = run(&c, &other, "print(y)").await;
    assert_eq!(stdout(&bystander), "untouched\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_a_done_forged_by_the_running_cell_is_held_until_it_ends() {
    forged_done_is_held("forge(cid)").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_a_done_forged_by_a_thread_of_the_cell_is_held_until_it_ends() {
    forged_done_is_held(
        "import threading\n\
         t = threading.Thread(target=lambda: (time.sleep(0.3), forge(cid)))\n\
         t.start()",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_a_flood_of_forged_dones_breaks_the_channel() {
    let hit = attacked(&format!(
        "{FORGE_DONE}for _ in range(100):\n    forge(cid)\ntime.sleep(30)"
    ))
    .await;
    assert!(
        hit.outcome.wall_ms < 20_000,
        "the flood ended the call, not its time limit: {:?}",
        hit.outcome
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_closing_the_channel() {
    attacked("os.close(chan)").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_dev_null_over_the_channel() {
    attacked("os.dup2(os.open(os.devnull, os.O_WRONLY), chan)").await;
}

/// The red team's trick: a cell looks through every frame of its stack for
/// the end-of-output marker and writes it itself, then prints on. The
/// marker is made only after the cell's code is over, so no frame holds
/// one, and a marker the cell makes up is output like any other: nothing
/// it prints is lost, nor does any of it spill into the next call.
#[tokio::test(flavor = "multi_thread")]
async fn live_bad_input_a_forged_end_of_output_marker_hides_nothing() {
    let (_d, c, s) = start().await;
    let forge = r#"import os, sys
def _hex32(v):
    return isinstance(v, (str, bytes)) and len(v) == 32 and all(ch in '0123456789abcdef' for ch in (v.decode() if isinstance(v, bytes) else v))
found = []
f = sys._getframe()
while f is not None:
    found += [v for v in f.f_locals.values() if _hex32(v)]
    f = f.f_back
print('markers in frames:', len(found), flush=True)
for m in found + ['0' * 32]:
    m = m.encode() if isinstance(m, str) else m
    os.write(1, b'\0prims-cell-end-' + m + b'\0')
    os.write(2, b'\0prims-cell-end-' + m + b'\0')
print('after the forged marker', flush=True)
print('stderr after it too', file=sys.stderr, flush=True)
"#;
    let r = run(&c, &s, forge).await;
    assert_eq!(r.outcome.status, Status::Ok, "{r:?}");
    let out = stdout(&r);
    assert!(out.starts_with("markers in frames: 0\n"), "{out:?}");
    assert!(
        out.ends_with(
            "\0prims-cell-end-00000000000000000000000000000000\0after the forged marker\n"
        ),
        "{out:?}"
    );
    let err = String::from_utf8_lossy(&r.stderr).into_owned();
    assert!(err.ends_with("\0stderr after it too\n"), "{err:?}");
    let next = run(&c, &s, "print('next')").await;
    assert_kept(&next);
    assert_eq!(
        stdout(&next),
        "next\n",
        "nothing of the last call spills over"
    );
    assert!(next.stderr.is_empty(), "{next:?}");
}
