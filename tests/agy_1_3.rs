//! agy 1.3.x's outcomes through the runner, on the recordings that follow
//! what other projects report of agy 1.3.1 to 1.3.3 (docs/agy-format.md,
//! "agy 1.3.x"): each ends in the typed failure a user can act on, worded
//! so that pi's automatic retry retries exactly what `retryable()` says.

mod common;

use agy_bridge::run::failure::Failure;
use agy_bridge::run::runner::{RunConfig, RunResult, TurnRequest};
use agy_format::agy_args::BindMode;
use agy_format::stream_json::DeniedAction;
use common::{pi_retries, run_with, text_of, Home, Outcome};
use tokio_util::sync::CancellationToken;

/// A turn of `recording` as a 1.3.x agy runs it for the bridge: stream-json,
/// the prompt on agy's stdin.
async fn turn(home: &Home, recording: &str, configure: impl FnOnce(&mut RunConfig)) -> Outcome {
    let mut cfg = home.config(recording, 20.0);
    cfg.bind = BindMode::Auto;
    configure(&mut cfg);
    let prompt = common::load(recording).header.prompt;
    let req = TurnRequest {
        prompt,
        ..TurnRequest::default()
    };
    run_with(cfg, req, CancellationToken::new()).await
}

/// The turn's failure, its sentence checked against pi's retry.
fn failure_of(result: &RunResult) -> Failure {
    let f = result.failure.clone().expect("a failure");
    let sentence = f.to_string();
    assert_eq!(
        pi_retries(&sentence),
        f.retryable(),
        "pi's retry disagrees with retryable() for: {sentence}"
    );
    assert!(
        !sentence.contains("AGY_ERROR") && !sentence.contains('{'),
        "{sentence}"
    );
    f
}

/// 1.3.3: a denied tool ends the turn at once, `no output produced` on
/// stderr. The model's preamble streamed, but the turn is the denial, said
/// once, with the way to allow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_that_ended_the_turn_is_the_denial_after_a_preamble() {
    let home = Home::new();
    let out = turn(&home, "outcomes/denied-1.3.3", |cfg| {
        cfg.skip_permissions = false
    })
    .await;
    let events: Vec<_> = out.events.iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(text_of(&events), "I'll list /srv with ls -la first.\n");
    assert_eq!(out.result.exit_code, Some(0));
    let f = failure_of(&out.result);
    assert_eq!(
        f,
        Failure::Denied {
            actions: vec![DeniedAction {
                action: "command".into(),
                display_name: "RunCommand".into(),
            }]
        }
    );
    assert!(f.to_string().contains("/agy permissions allow"), "{f}");
    assert!(out.result.notices.is_empty(), "{:?}", out.result.notices);
}
