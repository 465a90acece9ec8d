//! Outcome recordings of agy 1.3.x, in the shape of the facts other
//! projects report from agy 1.3.1 to 1.3.3 (docs/agy-format.md, "agy
//! 1.3.x"): no capture file of them is public, so each header names the
//! section of our spec it follows, and what the fact does not say (the
//! exact rest of a stderr line, the fields of an `AGY_ERROR` for a 503) is
//! ours, in the shape of the 1.2.x captures, and said to be.
//!
//! - a tool denied in print mode ends the turn at once (1.3.3): `SUCCESS`,
//!   empty `response`, `denied_actions`, `no output produced` on stderr;
//!   what fake-agy prints for it is its emulation of 1.3.3
//!   (`PermissionPolicy::NoOutput`);
//! - a model without capacity (1.3.2): `UNAVAILABLE (code 503)`, exit 3;
//! - a stream-json line agy cannot read (1.3.3): exit 2;
//! - an effort the model does not take (1.3.1): agy's words list the ones
//!   it does.

use super::{
    fail, invalid_model, model_call, prompt_step, refuse, srv_listing_denied, start, AgyError,
};
use crate::builder::call;
use agy_corpus::recording::Recording;
use agy_format::steps::{Body, ModelError, PlannerResponse, Step, StepStatus, StepType};

const SECTION: &str = "docs/agy-format.md, \"agy 1.3.x\"";

const PREAMBLE: &str = "I'll list /srv with ls -la first.\n";
const SRV_ANSWER: &str = "/srv holds only . and ..: it is empty.\n";

/// agy 1.3.3 without `--dangerously-skip-permissions`: the model says what
/// it will do, calls run_command, and the denial ends the turn there.
pub(super) fn denied() -> Recording {
    let prompt = "What is in /srv? Use ls -la.";
    let mut b = start(
        "outcomes/denied-1.3.3",
        "1.3.3",
        &format!("{SECTION}, \"Denials (1.3.3)\"; the tool step as in joiomi/playbook-plugin tests/fixtures/agy-1.2.17/denied-command.stdout"),
        "agy 1.3.3 without --dangerously-skip-permissions: the model's preamble, then run_command auto-denied (ACTIVE, then DONE without output), and the denial ends the turn at once: result SUCCESS with an empty response and denied_actions, `no output produced` on stderr (fake-agy's 1.3.3 emulation), exit 0. With the flag the command runs and agy answers.",
        prompt,
        SRV_ANSWER,
    );
    prompt_step(&mut b, prompt);
    let run = call(
        "call-run-srv",
        "run_command",
        serde_json::json!({"CommandLine": "ls -la /srv", "Cwd": "/srv"}),
    );
    model_call(
        &mut b,
        1,
        &[PREAMBLE],
        vec![run.clone()],
        (12_640, 1_310, 1_240),
        5_200,
    );
    srv_listing_denied(&mut b, 2, run);
    model_call(&mut b, 3, &[SRV_ANSWER], vec![], (13_110, 140, 121), 1_900);
    b.finish()
}

const NO_CAPACITY: &str = "No capacity available for model gemini-3.1-pro-high on the server";

/// agy 1.3.2 on a model Google has no capacity for: agy's log line per
/// attempt, an error step, then exit 3 with `AGY_ERROR`.
pub(super) fn no_capacity() -> Recording {
    let prompt = "Draft release notes for version 2.4 from the changelog.";
    let mut b = start(
        "outcomes/no-capacity-1.3.2",
        "1.3.2",
        &format!("{SECTION}, \"A model without capacity (1.3.1, 1.3.2)\" (agy's `API error (attempt 1): UNAVAILABLE (code 503): ...` line); the error step, the result and the AGY_ERROR line in the shape of joiomi/playbook-plugin tests/fixtures/agy-1.2.17/quota-exhausted.stderr, whose fields for a 503 are our guess"),
        "agy 1.3.2 with gemini-3.1-pro-high when Google has no capacity for it: two attempts logged on stderr, an error_message step, result ERROR with agy's sentence, `error: ...` and `AGY_ERROR: {json}` on stderr (UNAVAILABLE, 503, retryable), exit 3. No tool ran.",
        prompt,
        "",
    );
    b.header().model = Some("gemini-3.1-pro-high".into());
    prompt_step(&mut b, prompt);
    let waiting = b.planner_step(1, StepStatus::Generating, PlannerResponse::default());
    b.step(600, waiting);
    let short = format!("UNAVAILABLE (code 503): {NO_CAPACITY}");
    let err = Step::new(2, StepType::ErrorMessage, StepStatus::Done).with_body(Body::ModelError(
        ModelError {
            summary: Some(short.clone()),
            user_message: Some(NO_CAPACITY.into()),
            ..ModelError::default()
        },
    ));
    b.step(4_800, err);
    let agy_error = AgyError {
        short_error: short.clone(),
        status: "UNAVAILABLE",
        error_code: 503,
        code_kind: "http",
        retryable: true,
        error_id: "9b2f6c10-3d4e-4a5b-8c7d-1e0f2a3b4c5d-2",
    };
    let json = serde_json::to_string(&agy_error).unwrap_or_default();
    let attempts: String = (1..=2)
        .map(|n| format!("API error (attempt {n}): {short}\n"))
        .collect();
    fail(
        &mut b,
        3,
        format!("{attempts}error: {NO_CAPACITY}\nAGY_ERROR: {json}\n"),
        NO_CAPACITY,
    );
    b.finish()
}

const MALFORMED: &str = "stream input message is missing the \"event\" field";

/// agy 1.3.3 refusing its stdin line: `init` (printed before stdin is
/// read), then an ERROR result with agy's words and no turn, exit 2.
pub(super) fn input_refused() -> Recording {
    let prompt = "Summarise README.md in one sentence.";
    let mut b = start(
        "outcomes/input-refused-1.3.3",
        "1.3.3",
        &format!("{SECTION}, \"Exit codes (1.3.3)\" (exit 2: malformed stream input); the lines as joiomi/playbook-plugin tests/fixtures/agy-1.2.17/error-missing-event.stdout (there exit 1)"),
        "agy 1.3.3 refusing the turn on its stdin as malformed stream input: init, then result ERROR with agy's words, num_turns 0, `error: ...` on stderr, exit 2. Nothing reaches the model.",
        prompt,
        "",
    );
    fail(&mut b, 2, format!("error: {MALFORMED}\n"), MALFORMED);
    b.finish()
}

/// agy 1.3.1 asked for an effort the model does not have: refused before
/// any conversation, its words naming the efforts the model takes.
pub(super) fn effort_refused() -> Recording {
    let prompt = "Review the error handling in src/net.rs at medium effort.";
    let mut b = start(
        "outcomes/effort-refused-1.3.1",
        "1.3.1",
        &format!("{SECTION}, \"Efforts (1.3.1)\": `gemini-3.1-pro has no \"medium\" effort (available: low, high)`"),
        "agy 1.3.1 with --model gemini-3.1-pro --effort medium: the result (conversation_id \"\") and stderr say the model has no medium effort and list the ones it has (low, high), exit 1, no conversation.",
        prompt,
        "",
    );
    let model = "gemini-3.1-pro";
    b.header().model = Some(model.into());
    let error = invalid_model(
        model,
        "medium",
        &format!("{model} has no \"medium\" effort (available: low, high)"),
    );
    refuse(&mut b, format!("error: {error}\n"), &error);
    b.finish()
}
