//! User code that writes to, stalls or closes the agent's channel breaks
//! its own session and nothing more: the supervisor's side ends the stream
//! with a clear error, promptly, without reading unbounded data.

use super::harness::{Live, Start, FIND_CHANNEL};
use crate::interpreters::agent::AGENT_FRAME_MAX;
use crate::interpreters::channel::{CellStatus, ChannelError, FromAgent};
use prims_protocol::frame::FrameError;
use std::time::Duration;

/// Starts an agent and runs `attack` (after FIND_CHANNEL) as a cell.
async fn attacked(attack: &str, deadline: Duration) -> Live {
    let dir = tempfile::tempdir().unwrap();
    let mut start = Start::new(dir.path());
    start.deadline = deadline;
    let mut a = Live::start_with(start).await;
    a.send_cell(&format!("{FIND_CHANNEL}\nimport os, time\n{attack}"))
        .await;
    a
}

fn too_large(got: Option<Result<FromAgent, ChannelError>>, len: usize) {
    match got {
        Some(Err(ChannelError::Frame(FrameError::TooLarge { len: l, max }))) => {
            assert_eq!((l, max), (len, AGENT_FRAME_MAX));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn garbage_written_to_the_channel_ends_the_stream() {
    let mut a = attacked("os.write(chan, b'garbage')", Duration::from_secs(5)).await;
    too_large(a.next_frame().await, u32::from_be_bytes(*b"garb") as usize);
    assert!(
        a.next_frame().await.is_none(),
        "nothing is read after the error"
    );
}

#[tokio::test]
async fn a_huge_length_header_is_refused_from_the_header() {
    let mut a = attacked(
        "os.write(chan, b'\\xff\\xff\\xff\\xff')",
        Duration::from_secs(5),
    )
    .await;
    too_large(a.next_frame().await, 0xffff_ffff);
}

#[tokio::test]
async fn a_frame_left_half_written_misses_its_deadline() {
    let deadline = Duration::from_millis(300);
    let attack = "os.write(chan, (100).to_bytes(4, 'big') + b'{\"op\"')\ntime.sleep(30)";
    let mut a = attacked(attack, deadline).await;
    match a.next_frame().await {
        Some(Err(ChannelError::Frame(FrameError::Deadline(d)))) => assert_eq!(d, deadline),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn closing_or_replacing_the_channel_is_its_end() {
    for attack in [
        "os.close(chan)",
        "os.dup2(os.open(os.devnull, os.O_WRONLY), chan)",
        "os.close(chan)\nfor _ in range(3):\n    os.socketpair()",
    ] {
        let mut a = attacked(attack, Duration::from_secs(5)).await;
        assert!(
            matches!(a.next_frame().await, Some(Err(ChannelError::Closed))),
            "{attack}"
        );
    }
}

#[tokio::test]
async fn a_forged_frame_too_big_for_the_caps_is_malformed() {
    let attack = concat!(
        "import json\n",
        "body = json.dumps({'op': 'done', 'id': 1, 'status': 'ok', 'exit_code': 0, 'exception': None,",
        " 'result': 'x' * 20000, 'result_truncated': False}).encode()\n",
        "os.write(chan, len(body).to_bytes(4, 'big') + body)",
    );
    let mut a = attacked(attack, Duration::from_secs(5)).await;
    match a.next_frame().await {
        Some(Err(ChannelError::Malformed(why))) => {
            assert_eq!(why, "done.result is over 16448 characters")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_well_formed_forgery_reads_as_what_it_says() {
    // Shape and size are all this layer vouches for; whether a message fits
    // the conversation is the caller's check.
    let attack = concat!(
        "body = b'{\"op\":\"error\",\"message\":\"forged\"}'\n",
        "os.write(chan, len(body).to_bytes(4, 'big') + body)",
    );
    let mut a = attacked(attack, Duration::from_secs(5)).await;
    assert_eq!(
        a.next_frame().await.unwrap().unwrap(),
        FromAgent::Error {
            message: "forged".into()
        }
    );
    match a.next_frame().await {
        Some(Ok(FromAgent::Done(done))) => assert_eq!(done.status, CellStatus::Ok),
        other => panic!("{other:?}"),
    }
}
