//! `--input-format stream-json`: the user's turns come on stdin, one JSON
//! line each, as real agy reads them (docs/agy-format.md, "Input:
//! `--input-format stream-json`"; the lines are read with the library's
//! [`agy_bridge::format::stream_input`], which the bridge writes with).
//!
//! fake-agy replays one turn per process: the first line's prompt takes the
//! place of `-p`'s value, the recording is replayed once, and fake-agy then
//! reads on until the end of its input, which ends it with the turn's exit
//! code (real agy exits 0 there; a failed turn's own code is kept so tests
//! see it). A recording holds one turn, so a second turn in the same
//! process is not emulated: such a line gets an `ERROR` result saying so,
//! exit 1. A line agy would refuse gets agy's refusal: `init`, then a
//! result `ERROR` with agy's words, the words on stderr, exit 1.

use crate::cli::{OutputFormat, PrintArgs};
use crate::replay::{self, Fatal};
use agy_bridge::format::stream_input::read_user_line;
use agy_bridge::stream_json::{Line, TurnResult, Usage};
use std::io::{BufRead, Write};
use std::time::Instant;

/// What a second turn in one process gets.
pub const ONE_TURN_ONLY: &str =
    "fake-agy replays one turn per process: a second stream input turn is not emulated";

/// Run the turns on stdin; returns the exit code.
pub fn run(args: &PrintArgs, start: Instant) -> Result<i32, Fatal> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let Some(first) = next_line(&mut input) else {
        // The end of input before any turn: nothing to do, as agy.
        return Ok(0);
    };
    let prompt = match read_user_line(&first) {
        Ok(prompt) => prompt,
        Err(e) => return Ok(refuse(args, &e.to_string())),
    };
    crate::append_json_line("FAKE_AGY_STDIN_LOG", prompt.clone().into());
    let turn = PrintArgs {
        prompt,
        ..args.clone()
    };
    let code = replay::run_print(&turn, start)?;
    if !crate::ending::result_printed() {
        // Killed, crashed or refused without a result: agy would be gone.
        return Ok(code);
    }
    match next_line(&mut input) {
        None => Ok(code),
        Some(_) => Ok(refuse_with(args, "", ONE_TURN_ONLY)),
    }
}

/// The next line that is not blank, without its line end; `None` at the end
/// of input (or when stdin cannot be read: agy's input is gone either way).
fn next_line(input: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) if line.trim().is_empty() => {}
            Ok(_) => return Some(line.trim_end_matches(['\n', '\r']).to_string()),
        }
    }
}

/// A line agy refuses before any turn: `init` with a fresh conversation,
/// then the error result (verified: `error-missing-event`,
/// `crt-1.2.7-win-input-error-image-block`).
fn refuse(args: &PrintArgs, message: &str) -> i32 {
    let id = uuid::Uuid::new_v4().to_string();
    if args.output_format == OutputFormat::StreamJson {
        let init = crate::stream::init(
            args.model.clone(),
            args.agent.clone(),
            args.skip_permissions,
        );
        print_line(&Line::Init {
            conversation_id: id.clone(),
            init,
        });
    }
    refuse_with(args, &id, message)
}

/// The `ERROR` result (num_turns 0, no usage) and `error: MESSAGE` on
/// stderr; exit 1.
fn refuse_with(args: &PrintArgs, conversation_id: &str, message: &str) -> i32 {
    let result = TurnResult {
        conversation_id: conversation_id.to_string(),
        status: "ERROR".into(),
        error: Some(message.to_string()),
        usage: Some(Usage::default()),
        ..TurnResult::default()
    };
    if args.output_format == OutputFormat::StreamJson {
        print_line(&Line::Result(result));
    }
    eprintln!("error: {message}");
    1
}

fn print_line(line: &Line) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", line.to_json());
    let _ = out.flush();
}
