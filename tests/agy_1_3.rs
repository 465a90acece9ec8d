//! agy 1.3.x's outcomes through the runner, on the recordings that follow
//! what other projects report of agy 1.3.1 to 1.3.3 (docs/agy-format.md,
//! "agy 1.3.x"): each ends in the typed failure a user can act on, worded
//! so that pi's automatic retry retries exactly what `retryable()` says.

mod common;

use agy_bridge::runner::failure::Failure;
use agy_bridge::runner::{RunConfig, RunResult, TurnRequest};
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

/// 1.3.2: no capacity for the model (503), nothing ran: worth another try,
/// in words pi retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_capacity_is_retried_when_nothing_ran() {
    let home = Home::new();
    let out = turn(&home, "outcomes/no-capacity-1.3.2", |_| {}).await;
    assert_eq!(out.result.exit_code, Some(3));
    let f = failure_of(&out.result);
    assert_eq!(
        f,
        Failure::ModelUnavailable {
            message: "No capacity available for model gemini-3.1-pro-high on the server".into(),
            ran_tools: false,
        }
    );
    assert!(f.retryable());
    assert!(f.to_string().contains("switch to another agy model"), "{f}");
}

/// 1.3.3: exit 2, the bridge's own stdin line refused: said to be the
/// bridge's, not the user's, and not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stdin_turn_is_the_bridges_fault_not_the_users() {
    let home = Home::new();
    let out = turn(&home, "outcomes/input-refused-1.3.3", |_| {}).await;
    assert_eq!(out.result.exit_code, Some(2));
    let f = failure_of(&out.result);
    assert_eq!(
        f,
        Failure::InputRefused {
            message: "stream input message is missing the \"event\" field".into()
        }
    );
    assert!(f.to_string().contains("update agy-bridge"), "{f}");
}

/// 1.3.1: an effort the model does not take: agy's list of the ones it
/// does, in the sentence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_effort_names_the_efforts_the_model_takes() {
    let home = Home::new();
    let out = turn(&home, "outcomes/effort-refused-1.3.1", |_| {}).await;
    assert_eq!(out.result.exit_code, Some(1));
    let f = failure_of(&out.result);
    assert_eq!(
        f,
        Failure::EffortRefused {
            model: "gemini-3.1-pro".into(),
            effort: "medium".into(),
            available: vec!["low".into(), "high".into()],
        }
    );
    assert!(
        f.to_string().starts_with(
            "agy's model gemini-3.1-pro has no \"medium\" effort; it takes low, high."
        ),
        "{f}"
    );
}

/// A model without capacity after tools ran is not retried (a retry would
/// run them again), and its words do not make pi retry it either.
#[test]
fn capacity_after_tools_is_not_retried_and_pi_agrees() {
    use agy_bridge::runner::failure::{classify, AgyReport};
    let rec = common::load("outcomes/no-capacity-1.3.2");
    for ran_tools in [false, true] {
        let f = classify(&AgyReport {
            exit_code: Some(3),
            stderr: &rec.header.stderr,
            ran_tools,
            conversation_began: true,
            ..AgyReport::default()
        })
        .expect("a failure");
        assert!(matches!(f, Failure::ModelUnavailable { .. }), "{f:?}");
        assert_eq!(f.retryable(), !ran_tools);
        assert_eq!(pi_retries(&f.to_string()), !ran_tools, "{f}");
    }
}
