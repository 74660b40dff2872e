//! The tools through rmcp's own client against real processes: listing,
//! run_code results, workspace reuse (legacy and 2026-07-28), streaming,
//! cancellation, images and the code-size limit.
#![allow(deprecated)] // MCP logging

mod support;

use prims_tests::host::processes_with_marker;
use rmcp::model::{ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use std::time::{Duration, Instant};
use support::client::{
    call, connect, connect_stateless, connect_stateless_unlisted, err, ok, params, run,
};
use support::Stack;

#[tokio::test(flavor = "multi_thread")]
async fn lists_the_tools_with_output_schemas_and_the_prompt() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let tools = c.list_tools(None).await.expect("tools/list").tools;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "checkpoint_session",
            "fork_session",
            "list_dir",
            "mount_file",
            "persist_artifact",
            "preview_file",
            "restore_checkpoint",
            "run_code"
        ]
    );
    for t in &tools {
        let schema = t
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no output schema", t.name));
        assert_eq!(
            schema.get("type").and_then(|v| v.as_str()),
            Some("object"),
            "{}",
            t.name
        );
    }
    let run = tools.iter().find(|t| t.name == "run_code").unwrap();
    let props = run.input_schema.get("properties").unwrap();
    for p in ["code", "requirements", "files", "timeout_s", "session_id"] {
        assert!(props.get(p).is_some(), "run_code lacks {p}");
    }
    let prompts = c.list_prompts(None).await.expect("prompts/list").prompts;
    assert!(prompts.iter().any(|p| p.name == "python_programmer"));
    c.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn print_one_then_reuse_the_workspace_by_session_id() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let r = run(
        &c,
        "print(1)\nopen('output/a.txt','w').write('first')",
        None,
    )
    .await;
    assert_eq!(r["stdout"], "1\n");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["status"], "ok");
    assert!(r.get("feedback").is_none());
    let sid = r["session_id"].as_str().expect("session_id").to_owned();
    assert_eq!(sid.len(), 32);
    assert_eq!(r["artifacts"][0]["relative_path"], "output/a.txt");
    assert_eq!(r["artifacts"][0]["size"], 5);

    // The same MCP session reuses the workspace without naming it...
    let again = run(&c, "print(open('output/a.txt').read())", None).await;
    assert_eq!(again["stdout"], "first\n");
    assert_eq!(again["session_id"], sid.as_str());

    // ...and a stateless 2026-07-28 client reaches it by session_id.
    let s = connect_stateless(&stack.url()).await;
    let r2 = run(
        &s,
        "import os; print(sorted(os.listdir('output')))",
        Some(&sid),
    )
    .await;
    assert_eq!(r2["stdout"], "['a.txt']\n");
    assert_eq!(r2["session_id"], sid.as_str());
    // A client that never listed the tools cannot know to mirror session_id
    // into Mcp-Param-Session-Id, and a router could not see it: refused.
    let blind = connect_stateless_unlisted(&stack.url()).await;
    let e = (blind.call_tool(params("run_code", json!({"code": "1", "session_id": sid}))))
        .await
        .expect_err("a session_id without its header");
    assert!(
        e.to_string()
            .contains("-32020: missing Mcp-Param-Session-Id header"),
        "{e}"
    );
    let listing = ok(&call(
        &s,
        "list_dir",
        json!({"dir_path": "output", "session_id": sid}),
    )
    .await);
    assert_eq!(listing["result"][0]["name"], "a.txt");
    assert_eq!(listing["result"][0]["type"], "file");
    let preview = ok(&call(
        &s,
        "preview_file",
        json!({"relative_path": "output/a.txt", "session_id": sid}),
    )
    .await);
    assert_eq!(preview["content"], "first");
    assert_eq!(preview["truncated"], false);

    // Without a session_id, a stateless call gets a fresh workspace.
    let fresh = run(&s, "import os; print(os.listdir('output'))", None).await;
    assert_eq!(fresh["stdout"], "[]\n");
    assert_ne!(fresh["session_id"], sid.as_str());
    // Empty stdout brings the original's feedback; a failure its exit code.
    let quiet = run(&s, "x = 1", None).await;
    assert!(quiet["feedback"]
        .as_str()
        .unwrap()
        .contains("mounts/my_data.csv"));
    let failed = run(&s, "import sys; sys.exit(3)", None).await;
    assert_eq!(
        (failed["exit_code"].as_i64(), failed["status"].as_str()),
        (Some(3), Some("exit"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn code_over_twenty_thousand_characters_is_refused() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let code = format!("#{}", "x".repeat(20_000));
    let r = call(&c, "run_code", json!({ "code": code })).await;
    assert!(err(&r).contains("Code block too large (20k char limit)"));
    let fine = format!("#{}\nprint('ok')", "x".repeat(19_000));
    assert_eq!(run(&c, &fine, None).await["stdout"], "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn output_streams_as_progress_before_the_result() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let code =
        "import time\nfor i in range(6):\n    print('tick', i, flush=True)\n    time.sleep(0.25)\n";
    let r = run(&c, code, None).await;
    let done = Instant::now();
    assert!(r["stdout"].as_str().unwrap().contains("tick 5"));
    // rmcp's client handles each notification in its own task, so the last
    // may land just after the result.
    let streamed = || {
        let progress = c.service().progress.lock().unwrap().clone();
        let texts: String = progress
            .iter()
            .filter_map(|(_, p)| p.message.clone())
            .collect();
        (progress, texts)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !streamed().1.contains("tick 5") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (progress, texts) = streamed();
    assert!(
        texts.contains("tick 0") && texts.contains("tick 5"),
        "streamed: {texts:?}"
    );
    let (first_at, first) = &progress[0];
    assert!(
        done.duration_since(*first_at) > Duration::from_millis(800),
        "the first output ({:?}) arrived only at the end",
        first.message
    );
    // Coalesced: far fewer notifications than a flood, and increasing progress.
    assert!(progress.len() <= 20, "{} notifications", progress.len());
    assert!(progress
        .windows(2)
        .all(|w| w[0].1.progress <= w[1].1.progress));
    // No log notifications until the client asks for a level...
    assert!(c.service().logs.lock().unwrap().is_empty());
    let level = rmcp::model::SetLevelRequestParams::new(rmcp::model::LoggingLevel::Info);
    c.set_level(level).await.expect("logging/setLevel");
    run(
        &c,
        "import sys\nprint('out')\nprint('err', file=sys.stderr)",
        None,
    )
    .await;
    // Both are sent before the result; the client may still be handling them.
    let by = |name: &str| {
        c.service()
            .logs
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, l)| l.logger.as_deref() == Some(name))
            .map(|(_, l)| l.data.as_str().unwrap_or("").to_owned())
            .collect::<String>()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while (by("stdout").is_empty() || by("stderr").is_empty()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        (by("stdout"), by("stderr")),
        ("out\n".to_owned(), "err\n".to_owned())
    );
}

/// Start a sleeping run through `c`, cancel it once its jail is up, and
/// check that no process of it survives a moment later.
async fn cancel_kills(stack: &Stack, c: &support::client::Mcp, marker: &str) {
    // The interpreter's command line is the agent's: a child of the code
    // carries the marker in its own.
    let code = format!(
        "import subprocess, time\nsubprocess.Popen(['sh', '-c', 'sleep 50 # {marker}'])\nprint('started', flush=True)\ntime.sleep(50)\n"
    );
    let handle = c
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params(
                "run_code",
                json!({ "code": code }),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("call");
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with_marker(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the run never started:\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled = Instant::now();
    handle.cancel(Some("test".into())).await.expect("cancel");
    while !processes_with_marker(marker).is_empty() {
        assert!(
            cancelled.elapsed() < Duration::from_secs(3),
            "the jail survived the cancel: {:?}",
            processes_with_marker(marker)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_the_request_kills_the_run() {
    let stack = Stack::start("[limits]\nwall_time = \"60s\"\n", None);
    let c = connect(&stack.url(), None).await;
    cancel_kills(&stack, &c, &format!("cancel-legacy-{}", std::process::id())).await;
    // The session still works afterwards.
    assert_eq!(run(&c, "print(2)", None).await["stdout"], "2\n");
    // A 2026-07-28 client cancels by closing the stream.
    let s = connect_stateless(&stack.url()).await;
    cancel_kills(
        &stack,
        &s,
        &format!("cancel-stateless-{}", std::process::id()),
    )
    .await;
}

const PNG_CODE: &str = r#"
import struct, zlib
def chunk(kind, data):
    c = struct.pack('>I', len(data)) + kind + data
    return c + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)
w, h = 4, 4
raw = b''.join(b'\x00' + b'\xff\x00\x00' * w for _ in range(h))
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) \
    + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
open('output/plot.png', 'wb').write(png)
open('output/big.png', 'wb').write(png + b'\0' * (2 * 1024 * 1024))
print('drawn')
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_png_written_to_output_comes_back_as_image_content() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let r = call(&c, "run_code", json!({ "code": PNG_CODE })).await;
    let v = ok(&r);
    let images: Vec<_> = r.content.iter().filter_map(|c| c.as_image()).collect();
    assert_eq!(images.len(), 1, "only the small image is inlined");
    assert_eq!(images[0].mime_type, "image/png");
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(&images[0].data)
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    let paths: Vec<&str> = v["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["relative_path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["output/big.png", "output/plot.png"]);
    // preview_file describes a binary file instead of dumping it.
    let p = ok(&call(
        &c,
        "preview_file",
        json!({ "relative_path": "output/plot.png" }),
    )
    .await);
    assert_eq!(
        (p["binary"].as_bool(), p["mime"].as_str()),
        (Some(true), Some("image/png"))
    );
    assert!(p["content"].as_str().unwrap().starts_with("(binary file"));
    // A later run that does not touch them returns no image.
    let r2 = call(&c, "run_code", json!({ "code": "print(1)" })).await;
    assert!(r2.content.iter().all(|c| c.as_image().is_none()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_lowers_the_limit_and_is_reported() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let r = call(
        &c,
        "run_code",
        json!({ "code": "import time\nprint('a', flush=True)\ntime.sleep(30)", "timeout_s": 1 }),
    )
    .await;
    let v = ok(&r);
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["status"], "timeout");
    assert_eq!(v["stdout"], "a\n");
    assert!(v["duration_ms"].as_u64().unwrap() < 10_000);
    let bad = call(
        &c,
        "run_code",
        json!({ "code": "print(1)", "timeout_s": -1 }),
    )
    .await;
    assert!(err(&bad).contains("timeout_s"));
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_says_earlier_variables_are_gone_after_a_reset() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let feedback = |r: &serde_json::Value| r["feedback"].as_str().unwrap_or_default().to_owned();
    let kept = run(&c, "x = 1", None).await;
    assert_eq!(kept["state"], "new");
    let again = run(&c, "y = 2", None).await;
    assert_eq!(again["state"], "kept");
    assert!(
        feedback(&again).contains("still defined"),
        "{}",
        feedback(&again)
    );

    let fresh = ok(&call(&c, "run_code", json!({"code": "z = 3", "fresh": true})).await);
    assert_eq!(
        (fresh["state"].as_str(), fresh["state_reason"].as_str()),
        (Some("reset"), Some("fresh_requested"))
    );
    assert!(
        !feedback(&fresh).contains("still defined"),
        "{}",
        feedback(&fresh)
    );

    run(&c, "import os; os._exit(3)", None).await;
    let after = run(&c, "print('x' in globals())", None).await;
    assert_eq!(after["state_reason"], "code_exited");
    assert_eq!(after["stdout"], "False\n");
    let f = feedback(&after);
    assert!(
        f.contains("new interpreter (state_reason: code_exited)") && f.contains("are gone"),
        "a reset the agent did not ask for is named even with output: {f}"
    );
    assert!(!f.contains("still defined"), "{f}");
    c.cancel().await.ok();
}
