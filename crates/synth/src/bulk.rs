//! Recordings built to size for benches and stress tests: one answer
//! growing to any length, and any number of answers committed fast.

use crate::builder::Builder;
use agy_corpus::db::step_write;
use agy_corpus::recording::Recording;
use agy_format::steps::{Body, PlannerResponse, Step, StepStatus, StepType};

/// One answer of `bytes` bytes growing over `commits` commits `dt_ms` apart
/// (each commit rewrites the whole step, as agy does), the last one DONE.
/// For memory benches and tests: the step payload grows to `bytes` plus a
/// few bytes of framing.
pub fn growing_answer(bytes: usize, commits: usize, dt_ms: u64) -> Recording {
    const LINE: &str = "All work and no play makes a long answer grow. 0123456789\n";
    let text = LINE.repeat(bytes.div_ceil(LINE.len()))[..bytes].to_string();
    let mut b = Builder::new("growing-answer", "a long answer growing", "go", &text);
    b.open_turn(0, "go", "growing answer", true);
    let pieces = chunks(&text, commits);
    let last = pieces.len().saturating_sub(1);
    let mut grown = 0;
    for (i, piece) in pieces.iter().enumerate() {
        grown += piece.len();
        let status = if i == last {
            StepStatus::Done
        } else {
            StepStatus::Generating
        };
        let step = Step::new(2, StepType::PlannerResponse, status).with_body(Body::Planner(
            PlannerResponse {
                text: text[..grown].to_string(),
                ..PlannerResponse::default()
            },
        ));
        b.commit(dt_ms, vec![step_write(&step)]);
    }
    b.finish()
}

/// The text of answer step `n` of [`many_answers`]: `bytes` bytes that
/// begin with its number, so each step's text is found in a stream, in
/// order.
pub fn numbered_answer(n: usize, bytes: usize) -> String {
    const FILL: &str = "The database is the buffer while pi is not reading. ";
    let mut text = format!("[answer {n:06}]\n");
    while text.len() < bytes {
        text.push_str(FILL);
    }
    text.truncate(bytes.max(16));
    text
}

/// `steps` finished answer steps of `bytes` bytes each
/// ([`numbered_answer`]), `per_commit` to a commit, committed as fast as
/// the replay goes: far more output than a consumer holds, for the tests
/// of a consumer that stops reading.
pub fn many_answers(steps: usize, bytes: usize, per_commit: usize) -> Recording {
    let mut b = Builder::new("many-answers", "many answer steps, fast", "go", "done");
    b.open_turn(0, "go", "many answers", true);
    let first_idx = 2;
    let numbered: Vec<usize> = (0..steps).collect();
    for batch in numbered.chunks(per_commit.max(1)) {
        let writes = batch
            .iter()
            .map(|&n| {
                let step = Step::new(
                    first_idx + n as i64,
                    StepType::PlannerResponse,
                    StepStatus::Done,
                )
                .with_body(Body::Planner(PlannerResponse {
                    text: numbered_answer(n, bytes),
                    ..PlannerResponse::default()
                }));
                step_write(&step)
            })
            .collect();
        b.commit(1, writes);
    }
    b.finish()
}

/// Split `s` into `n` pieces of roughly equal byte length, each ending on a
/// char boundary.
pub fn chunks(s: &str, n: usize) -> Vec<&str> {
    let n = n.max(1);
    let target = s.len().div_ceil(n).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + target).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}
