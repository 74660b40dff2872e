//! Environments through the supervisor socket: a requirement set is built
//! once and then served from the cache; a bad requirement says why.

use prims_protocol::client::ClientError;
use prims_protocol::jail::Status;
use prims_protocol::wire::{ErrorCode, Event, RunRequest};
use prims_tests::daemon::{run_req, Daemon};

/// [`run_req`] with `requirements`.
fn req(session_id: &str, code: &str, requirements: &[&str]) -> RunRequest {
    RunRequest {
        requirements: requirements.iter().map(|r| r.to_string()).collect(),
        ..run_req(session_id, code)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_requirements_build_once_then_come_from_the_cache() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let code = "import six\nprint(six.__name__)";
    let mut building = 0;
    let first = c
        .run(req(&s.session_id, code, &["six"]), |ev| {
            if matches!(ev, Event::Building { .. }) {
                building += 1;
            }
        })
        .await
        .unwrap();
    assert_eq!(first.outcome.status, Status::Ok, "{first:?}");
    assert_eq!(String::from_utf8_lossy(&first.stdout), "six\n");
    assert!(first.env_built, "the first run builds the environment");
    assert!(building > 0, "the build reported progress");
    let builds = c.stats().await.unwrap().env_builds;

    let other = c.open_session(None).await.unwrap();
    let second = c
        .run(req(&other.session_id, code, &["SIX"]), |_| {})
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&second.stdout), "six\n");
    assert!(
        !second.env_built,
        "the same (normalized) set is served from the cache"
    );
    assert_eq!(
        c.stats().await.unwrap().env_builds,
        builds,
        "no build happened"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_bad_requirements_are_explained() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let missing = c
        .run(
            req(
                &s.session_id,
                "pass",
                &["this-package-does-not-exist-prims-xyz"],
            ),
            |_| {},
        )
        .await;
    match missing {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::Environment);
            assert!(e.message.contains("pip install failed:"), "{}", e.message);
            assert!(
                e.message.contains("this-package-does-not-exist-prims-xyz"),
                "{}",
                e.message
            );
        }
        other => panic!("{other:?}"),
    }
    let builds = c.stats().await.unwrap().env_builds;
    for junk in [
        "--index-url=http://example.invalid",
        "-r /etc/passwd",
        "six; rm -rf /",
    ] {
        match c.run(req(&s.session_id, "pass", &[junk]), |_| {}).await {
            Err(ClientError::Server(e)) => {
                assert_eq!(e.code, ErrorCode::BadRequest, "{junk}: {e:?}")
            }
            other => panic!("{junk}: {other:?}"),
        }
    }
    assert_eq!(
        c.stats().await.unwrap().env_builds,
        builds,
        "junk never reached uv"
    );
}
