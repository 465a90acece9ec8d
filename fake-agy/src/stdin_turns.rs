//! `--input-format stream-json`: the user's turns come on stdin, one JSON
//! line each, as real agy reads them (docs/agy-format.md, "Input:
//! `--input-format stream-json`"; the lines are read with the library's
//! [`agy_format::stream_input`], which the bridge writes with).
//!
//! A session is one process and one conversation, as real agy runs it
//! (`crt-1.2.7-win-loop-two-turns`): after the start-up (`FAKE_AGY_BOOT_MS`)
//! `init` names the conversation before any line is read; each line then
//! replays the recording's next turn (its commits timed from when the line
//! arrived) on that conversation, so step indexes continue and each turn's
//! `result` counts the whole conversation (usage, turns). The end of input
//! ends the session with exit 0.
//!
//! More lines than the recording has turns replay its last turn again, with
//! fresh step indexes: any recording then serves a session of any length,
//! which is what warm-session tests need, and the turns stay distinguishable
//! in the database by their indexes and user inputs.
//!
//! A turn that fails (a non-zero exit code) ends the session: fake-agy
//! reads on to the end of input and exits with that code, so tests see it;
//! one that printed no result (killed, crashed) ends it at once. A line agy
//! would refuse gets agy's refusal: a result `ERROR` with agy's words, the
//! words on stderr, exit 1 (2 from agy 1.3.3).

use crate::cli::{OutputFormat, PrintArgs};
use crate::replay::conversation::{Conversation, TurnPlan};
use crate::replay::knobs::load_recording;
use crate::replay::{self, Fatal};
use agy_corpus::recording::Recording;
use agy_format::stream_input::read_user_line;
use agy_format::stream_json::{Line, TurnResult, Usage};
use std::io::{BufRead, Write};
use std::time::Instant;

/// Run the session on stdin; returns the exit code.
pub fn run(args: &PrintArgs) -> Result<i32, Fatal> {
    let (rec, _) = load_recording()?;
    let conversation = open(args, &rec)?;
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut played: u32 = 0;
    while let Some(line) = next_line(&mut input) {
        let arrived = Instant::now();
        let prompt = match read_user_line(&line) {
            Ok(prompt) => prompt,
            Err(e) => {
                let code = refusal_exit(&rec);
                return Ok(refuse(args, conversation.as_ref(), &e.to_string(), code));
            }
        };
        crate::append_json_line("FAKE_AGY_STDIN_LOG", prompt.clone().into());
        let plan = TurnPlan {
            turn: played.min(rec.turns() - 1),
            conversation: conversation.as_ref().map(|c| match played {
                0 => c.clone(),
                _ => c.next_turn(),
            }),
        };
        let turn = PrintArgs {
            prompt,
            ..args.clone()
        };
        let before = crate::ending::results_printed();
        let code = replay::run_turn(&turn, arrived, &plan)?;
        if crate::ending::results_printed() == before {
            // Killed, crashed or refused without a result: agy would be gone.
            return Ok(code);
        }
        if code != 0 {
            while next_line(&mut input).is_some() {}
            return Ok(code);
        }
        // A warm agy may be stopped rather than reach its end: its CPU so
        // far is logged after every turn (the last line of a pid is its
        // total).
        crate::log_cpu();
        played += 1;
    }
    Ok(0)
}

/// agy's start of a session: the conversation its turns will write, named
/// by `init` before any line is read. `None` for a recording of a run that
/// failed before it created a conversation: no `init` then, the first line
/// gets that failure.
fn open(args: &PrintArgs, rec: &Recording) -> Result<Option<Conversation>, Fatal> {
    let before_conversation = rec
        .header
        .outcome
        .as_ref()
        .is_some_and(|o| o.before_conversation);
    // A model and effort agy refuses: no conversation either.
    if before_conversation || crate::effort::refusal(args, rec).is_some() {
        return Ok(None);
    }
    let conversation = Conversation::for_args(args)?;
    replay::print_init(args, rec, &conversation.id);
    Ok(Some(conversation))
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

/// The exit code of a refused stdin line: 1 on agy 1.2.7 and 1.2.17
/// (verified), 2 ("malformed stream input") on 1.3.3 (docs/agy-format.md,
/// "Exit codes (1.3.3)"); in between unknown, so from 1.3.3.
fn refusal_exit(rec: &Recording) -> i32 {
    let version = agy_bridge::runner::version::parse_version(&rec.header.agy_version);
    if version.is_some_and(|v| v >= (1, 3, 3)) {
        2
    } else {
        1
    }
}

/// A line agy refuses: the session's `init` came first (verified:
/// `error-missing-event`, `crt-1.2.7-win-input-error-image-block`); a
/// session without one prints it now, with a fresh conversation id.
fn refuse(args: &PrintArgs, conversation: Option<&Conversation>, message: &str, code: i32) -> i32 {
    if let Some(c) = conversation {
        return refuse_with(args, &c.id, message, code);
    }
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
    refuse_with(args, &id, message, code)
}

/// The `ERROR` result (num_turns 0, no usage) and `error: MESSAGE` on
/// stderr; exit `code`.
fn refuse_with(args: &PrintArgs, conversation_id: &str, message: &str, code: i32) -> i32 {
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
    code
}

fn print_line(line: &Line) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", line.to_json());
    let _ = out.flush();
}
