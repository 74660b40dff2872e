use super::*;
use crate::interpreters::agent::{marker_bytes, MARKER_HEX_LEN};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;

/// A hang guard only: every read here ends long before it.
const GUARD: Duration = Duration::from_secs(20);

fn malformed(json: &str) -> String {
    match parse(json.as_bytes()) {
        Err(ChannelError::Malformed(why)) => why,
        other => panic!("{json:.200}: {other:?}"),
    }
}

#[test]
fn every_message_the_agent_sends_parses() {
    let ready = parse(
        br#"{"op":"ready","python":"3.11.2","imported":["pandas"],"failed":[{"name":"x","why":"ModuleNotFoundError: no"}],"import_ms":512}"#,
    )
    .unwrap();
    assert_eq!(
        ready,
        FromAgent::Ready {
            python: "3.11.2".into(),
            imported: vec!["pandas".into()],
            failed: vec![Named {
                name: "x".into(),
                why: "ModuleNotFoundError: no".into()
            }],
            import_ms: 512,
            ipython: None,
            ipython_error: None,
        }
    );
    let done = parse(
        br#"{"op":"done","id":7,"status":"error","exit_code":1,"exception":"ZeroDivisionError","result":null,"result_truncated":false}"#,
    )
    .unwrap();
    assert_eq!(
        done,
        FromAgent::Done(CellDone {
            id: 7,
            status: CellStatus::Error,
            exit_code: Some(1),
            exception: Some("ZeroDivisionError".into()),
            result: None,
            result_truncated: false,
            outputs_dropped: 0,
        })
    );
    let saved =
        parse(br#"{"op":"saved","saved":["x"],"skipped":[{"name":"f","why":"w"}]}"#).unwrap();
    assert!(
        matches!(&saved, FromAgent::Saved { saved, skipped } if *saved == ["x"] && skipped.len() == 1)
    );
    let restored = parse(br#"{"op":"restored","restored":[],"failed":[]}"#).unwrap();
    assert!(
        matches!(&restored, FromAgent::Restored { restored, failed } if restored.is_empty() && failed.is_empty())
    );
    assert_eq!((ready.op(), done.op()), ("ready", "done"));
    assert_eq!((saved.op(), restored.op()), ("saved", "restored"));
    let warmed = parse(br#"{"op":"warmed_up","error":null}"#).unwrap();
    assert_eq!(warmed, FromAgent::WarmedUp { error: None });
    assert_eq!(warmed.op(), "warmed_up");
    let raised = parse(br#"{"op":"warmed_up","error":"ZeroDivisionError: x"}"#).unwrap();
    assert!(
        matches!(raised, FromAgent::WarmedUp { error: Some(e) } if e == "ZeroDivisionError: x")
    );
    let error = parse(br#"{"op":"error","message":"unknown op 'x'"}"#).unwrap();
    assert_eq!(error.op(), "error");
    assert_eq!(
        error,
        FromAgent::Error {
            message: "unknown op 'x'".into()
        }
    );
}

#[test]
fn unknown_ops_fields_and_shapes_are_malformed() {
    malformed(r#"{"op":"format_disk"}"#);
    malformed(r#"{"message":"no op"}"#);
    malformed(r#"{"op":"error","message":"m","extra":1}"#);
    malformed(
        r#"{"op":"done","id":1,"status":"ok","exit_code":0,"exception":null,"result":null,"result_truncated":false,"cpu_ms":5}"#,
    );
    malformed(
        r#"{"op":"done","id":1,"status":"crashed","exit_code":0,"exception":null,"result":null,"result_truncated":false}"#,
    );
    malformed(
        r#"{"op":"done","id":-1,"status":"ok","exit_code":0,"exception":null,"result":null,"result_truncated":false}"#,
    );
    malformed(
        r#"{"op":"done","id":1,"status":"ok","exit_code":4294967296,"exception":null,"result":null,"result_truncated":false}"#,
    );
    malformed(r#"{"op":"done","id":1,"status":"ok"}"#);
    malformed(r#"{"op":"saved","saved":["x"],"skipped":[{"name":"f","why":"w","how":1}]}"#);
    malformed(r#"{"op":"error","message":"a","message":"b"}"#);
    malformed(r#"[1,2]"#);
    malformed("{\"op\":\"error\",\"message\":\"\\ud800\"}");
    malformed("\u{0}garbage");
    malformed(&format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)));
}

#[test]
fn a_parse_error_quoting_hostile_input_is_shortened() {
    let field = "f".repeat(100_000);
    let why = malformed(&format!(r#"{{"op":"error","message":"m","{field}":1}}"#));
    assert!(
        why.chars().count() <= ERROR_TEXT_MAX_CHARS + 1,
        "{} chars",
        why.len()
    );
}

#[test]
fn the_agents_caps_are_enforced() {
    let name = |n: usize| "é".repeat(n);
    // At the caps (counted in characters, not bytes): accepted.
    parse(
        format!(
            r#"{{"op":"saved","saved":["{}"],"skipped":[]}}"#,
            name(NAME_MAX_CHARS)
        )
        .as_bytes(),
    )
    .unwrap();
    let list: Vec<String> = (0..LIST_MAX).map(|i| format!("\"n{i}\"")).collect();
    parse(
        format!(
            r#"{{"op":"saved","saved":[{}],"skipped":[]}}"#,
            list.join(",")
        )
        .as_bytes(),
    )
    .unwrap();
    let result = |n: usize| {
        format!(
            r#"{{"op":"done","id":1,"status":"ok","exit_code":0,"exception":null,"result":"{}","result_truncated":true}}"#,
            "ü".repeat(n)
        )
    };
    parse(result(RESULT_MAX_CHARS).as_bytes()).unwrap();

    // Past them: malformed.
    malformed(&format!(
        r#"{{"op":"saved","saved":["{}"],"skipped":[]}}"#,
        name(NAME_MAX_CHARS + 1)
    ));
    let list: Vec<String> = (0..=LIST_MAX).map(|i| format!("\"n{i}\"")).collect();
    malformed(&format!(
        r#"{{"op":"saved","saved":[{}],"skipped":[]}}"#,
        list.join(",")
    ));
    malformed(&format!(
        r#"{{"op":"restored","restored":[],"failed":[{{"name":"x","why":"{}"}}]}}"#,
        name(NAME_MAX_CHARS + 1)
    ));
    malformed(&format!(
        r#"{{"op":"ready","python":"3.11.2","imported":[],"failed":[{{"name":"{}","why":""}}],"import_ms":1}}"#,
        name(NAME_MAX_CHARS + 1)
    ));
    malformed(&result(RESULT_MAX_CHARS + RESULT_SLACK_CHARS + 1));
    malformed(&format!(
        r#"{{"op":"done","id":1,"status":"error","exit_code":1,"exception":"{}","result":null,"result_truncated":false}}"#,
        name(NAME_MAX_CHARS + 1)
    ));
    malformed(&format!(
        r#"{{"op":"error","message":"{}"}}"#,
        name(MESSAGE_MAX_CHARS + 1)
    ));
    malformed(&format!(
        r#"{{"op":"warmed_up","error":"{}"}}"#,
        name(MESSAGE_MAX_CHARS + 1)
    ));
    for python in [
        "",
        "3.11.2; rm -rf /",
        "3.11.2\n",
        &"3".repeat(VERSION_MAX_CHARS + 1),
    ] {
        malformed(&format!(
            r#"{{"op":"ready","python":{},"imported":[],"failed":[],"import_ms":1}}"#,
            serde_json::to_string(python).unwrap()
        ));
    }
}

/// The supervisor's end as a reader with `deadline`, and the agent's end.
fn reader_pair(deadline: Duration) -> (Incoming, StdUnixStream) {
    let (ours, theirs) = StdUnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let (rd, _wr) = UnixStream::from_std(ours).unwrap().into_split();
    (spawn_reader_within(rd, deadline), theirs)
}

async fn next(rx: &mut Incoming) -> Option<Result<FromAgent, ChannelError>> {
    tokio::time::timeout(GUARD, rx.recv())
        .await
        .expect("the reader hung")
}

fn framed(body: &[u8]) -> Vec<u8> {
    [&(body.len() as u32).to_be_bytes()[..], body].concat()
}

#[tokio::test]
async fn frames_then_a_clean_end_is_closed() {
    let (mut rx, mut theirs) = reader_pair(FRAME_DEADLINE);
    theirs
        .write_all(&framed(br#"{"op":"error","message":"one"}"#))
        .unwrap();
    theirs
        .write_all(&framed(br#"{"op":"error","message":"two"}"#))
        .unwrap();
    drop(theirs);
    assert_eq!(
        next(&mut rx).await.unwrap().unwrap(),
        FromAgent::Error {
            message: "one".into()
        }
    );
    assert_eq!(
        next(&mut rx).await.unwrap().unwrap(),
        FromAgent::Error {
            message: "two".into()
        }
    );
    assert!(matches!(
        next(&mut rx).await,
        Some(Err(ChannelError::Closed))
    ));
    assert!(
        next(&mut rx).await.is_none(),
        "the stream ends after its first error"
    );
}

#[tokio::test]
async fn garbage_and_huge_headers_end_the_stream_from_the_header() {
    for (bytes, len) in [
        (&b"garbage"[..], 0x6761_7262usize),
        (&[0xff; 4][..], 0xffff_ffff),
    ] {
        let (mut rx, mut theirs) = reader_pair(FRAME_DEADLINE);
        theirs.write_all(bytes).unwrap();
        match next(&mut rx).await {
            Some(Err(ChannelError::Frame(FrameError::TooLarge { len: l, max }))) => {
                assert_eq!((l, max), (len, AGENT_FRAME_MAX));
            }
            other => panic!("{other:?}"),
        }
        assert!(next(&mut rx).await.is_none());
    }
    // One byte over the agent's limit, announced and sent.
    let (mut rx, mut theirs) = reader_pair(FRAME_DEADLINE);
    theirs
        .write_all(&((AGENT_FRAME_MAX + 1) as u32).to_be_bytes())
        .unwrap();
    assert!(matches!(
        next(&mut rx).await,
        Some(Err(ChannelError::Frame(FrameError::TooLarge { .. })))
    ));
}

#[tokio::test]
async fn a_frame_cut_midway_is_truncated_and_a_stalled_one_misses_its_deadline() {
    let body = br#"{"op":"error","message":"m"}"#;
    let (mut rx, mut theirs) = reader_pair(FRAME_DEADLINE);
    theirs.write_all(&framed(body)[..10]).unwrap();
    drop(theirs);
    assert!(matches!(
        next(&mut rx).await,
        Some(Err(ChannelError::Frame(FrameError::Truncated)))
    ));

    let deadline = Duration::from_millis(300);
    let (mut rx, mut theirs) = reader_pair(deadline);
    theirs.write_all(&framed(body)[..10]).unwrap();
    match next(&mut rx).await {
        Some(Err(ChannelError::Frame(FrameError::Deadline(d)))) => assert_eq!(d, deadline),
        other => panic!("{other:?}"),
    }
    drop(theirs);
}

#[tokio::test]
async fn a_malformed_frame_ends_the_stream() {
    let (mut rx, mut theirs) = reader_pair(FRAME_DEADLINE);
    theirs.write_all(&framed(b"not json")).unwrap();
    theirs
        .write_all(&framed(br#"{"op":"error","message":"never read"}"#))
        .unwrap();
    assert!(matches!(
        next(&mut rx).await,
        Some(Err(ChannelError::Malformed(_)))
    ));
    assert!(next(&mut rx).await.is_none());
}

#[tokio::test]
async fn the_writer_sends_the_frames_the_agent_reads() {
    let (mut writer, _rx, theirs) = pair().unwrap();
    let mut theirs = StdUnixStream::from(theirs);
    let marker = "a".repeat(MARKER_HEX_LEN);
    let cell = ToAgent::Cell {
        id: 7,
        code: "print(1)".into(),
    };
    writer.send(&cell).await.unwrap();
    writer
        .send(&ToAgent::Mark {
            marker: marker.clone(),
        })
        .await
        .unwrap();
    writer
        .send(&ToAgent::Save {
            path: "/workspace/.prims/state.pickle".into(),
            durable: true,
            check: false,
        })
        .await
        .unwrap();
    let mut read_one = || {
        let mut header = [0u8; 4];
        theirs.read_exact(&mut header).unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
        theirs.read_exact(&mut body).unwrap();
        serde_json::from_slice::<serde_json::Value>(&body).unwrap()
    };
    assert_eq!(
        read_one(),
        serde_json::json!({"op": "cell", "id": 7, "code": "print(1)"})
    );
    assert_eq!(
        read_one(),
        serde_json::json!({"op": "mark", "marker": marker})
    );
    assert_eq!(
        read_one(),
        serde_json::json!({"op": "save", "path": "/workspace/.prims/state.pickle", "durable": true, "check": false})
    );
    assert_eq!(marker_bytes(&marker).len(), MARKER_HEX_LEN + 17);
}

#[tokio::test]
async fn a_cell_over_the_supervisor_limit_is_refused_before_writing() {
    let (mut writer, _rx, theirs) = pair().unwrap();
    let big = ToAgent::Cell {
        id: 1,
        code: "x".repeat(SUPERVISOR_FRAME_MAX),
    };
    assert!(matches!(
        writer.send(&big).await,
        Err(ChannelError::Frame(FrameError::TooLarge {
            max: SUPERVISOR_FRAME_MAX,
            ..
        }))
    ));
    let theirs = StdUnixStream::from(theirs);
    theirs.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let nothing = (&theirs).read(&mut byte);
    assert_eq!(nothing.unwrap_err().kind(), io::ErrorKind::WouldBlock);
}

#[tokio::test]
async fn writing_to_a_gone_agent_fails() {
    let (mut writer, mut rx, theirs) = pair().unwrap();
    drop(theirs);
    assert!(matches!(
        next(&mut rx).await,
        Some(Err(ChannelError::Closed))
    ));
    let sent = writer.send(&ToAgent::Restore { path: "/p".into() }).await;
    assert!(
        matches!(sent, Err(ChannelError::Write(ref e)) if e.kind() == io::ErrorKind::BrokenPipe),
        "{sent:?}"
    );
}

#[test]
fn only_the_json_mimes_of_an_output_carry_json_values() {
    let output = |mime: &str, value: &str| {
        format!(
            r#"{{"op":"output","id":1,"type":"display","data":{{"text/plain":"f","{mime}":{value}}},"cut":false}}"#
        )
    };
    for mime in ["application/json", CHART_MIME] {
        let o = parse(output(mime, r#"{"type":"bar","elements":[]}"#).as_bytes()).unwrap();
        assert!(
            matches!(&o, FromAgent::Output(o) if o.data[mime]["type"] == "bar"),
            "{o:?}"
        );
    }
    let why = malformed(&output("image/png", r#"{"type":"bar"}"#));
    assert!(why.contains("is not a string"), "{why}");
    let why = malformed(&output("application/vnd.prims.other+json", "{}"));
    assert!(why.contains("not kept"), "{why}");
}
