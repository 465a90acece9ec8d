//! agy's slash commands in a print-mode prompt. Since about 1.1.9 a `-p`
//! prompt that starts with `/` runs one of agy's own commands instead of a
//! model turn: no `init`, no conversation, a `command_result` event and a
//! result with `conversation_id` `""` and `num_turns` 0; `/clear` and
//! commands agy does not know exit 2 (docs/agy-format.md, "Slash commands").
//! `--disable-slash-commands` (documented from agy 1.2.14) turns that off.
//!
//! This module owns which prompts are commands and what fake-agy prints for
//! them. It writes no database, as agy writes none. `/model` is emulated
//! from its public capture (agy 1.2.7); its answers come from the recording
//! (its model and its `agy models` listing), so they agree with what
//! `fake-agy models` prints. `/usage` (agy 1.1.11+) answers agy's quota
//! buckets ([`usage_buckets`]), written through the library's
//! `format::quota` writer. `/hooks` lists the hooks loaded from each
//! `--add-dir` dir's `.agents/hooks.json` ([`crate::hooks`]), each with its
//! absolute `source`, through the library's `format::hooks` listing.

use crate::cli::{OutputFormat, PrintArgs};
use agy_bridge::pi::models::{parse_models_output, split_tier};
use agy_corpus::recording::Recording;
use agy_format::hooks::{listing_command, listing_text};
use agy_format::quota::{Bucket, Quota};
use agy_format::stream_json::{CommandData, Line, ModelChoice, SlashCommand, TurnResult, Usage};
use std::io::Write;

/// Exit code agy gives a prompt it cannot take (an unsupported command).
const UNSUPPORTED_EXIT: i32 = 2;

/// The commands agy has that fake-agy does not emulate (docs/agy-format.md:
/// `/quota` answers without a model turn).
const NOT_EMULATED: &[&str] = &["quota"];

/// Exit code for a fake-agy set-up error (an unreadable `FAKE_AGY_USAGE`).
const CONFIG_EXIT: i32 = 2;

/// The command a prompt runs: its name without the slash, or `None` for an
/// ordinary prompt. Only a `/` in the very first position counts: agy does
/// not expand ` /model`. That is our assumption (no capture shows a prompt
/// with leading blanks), and what lets a caller without
/// `--disable-slash-commands` send such a prompt as text.
pub fn command_of(prompt: &str) -> Option<&str> {
    let rest = prompt.strip_prefix('/')?;
    Some(rest.split_whitespace().next().unwrap_or(""))
}

/// Run the slash command `name`; returns the exit code.
pub fn run(name: &str, args: &PrintArgs, rec: &Recording) -> i32 {
    match name {
        "model" => {
            let command = model(args, rec);
            let text = response(&command);
            print_command(command, text, args.output_format);
            0
        }
        "usage" => match usage_buckets() {
            Ok(quota) => {
                print_command(quota.to_command(), quota.to_text(), args.output_format);
                0
            }
            Err(message) => refuse_with(&format!("fake-agy: {message}\n"), CONFIG_EXIT),
        },
        "hooks" => {
            let listed = crate::hooks::Hooks::load(&args.add_dirs).listing();
            print_command(
                listing_command(&listed),
                listing_text(&listed),
                args.output_format,
            );
            0
        }
        // Our wording: agy's own message for these is not captured.
        "clear" => refuse("error: slash command \"/clear\" is not supported in print mode\n"),
        n if NOT_EMULATED.contains(&n) => refuse(&format!(
            "fake-agy: the slash command \"/{n}\" is not emulated (only /model, /usage and /hooks are)\n"
        )),
        n => refuse(&format!("error: unknown slash command \"/{n}\"\n")),
    }
}

fn refuse(message: &str) -> i32 {
    refuse_with(message, UNSUPPORTED_EXIT)
}

fn refuse_with(message: &str, code: i32) -> i32 {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(message.as_bytes());
    let _ = e.flush();
    code
}

/// `/usage`'s buckets: the file `FAKE_AGY_USAGE` names (any form the
/// library reads: agy's json answer, its `data` object, stream-json or
/// text), else a built-in set in the shape agy's are described in.
pub fn usage_buckets() -> Result<Quota, String> {
    if let Some(path) = std::env::var_os("FAKE_AGY_USAGE") {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read FAKE_AGY_USAGE {}: {e}", path.to_string_lossy()))?;
        return Quota::parse(&text).map_err(|e| {
            format!(
                "FAKE_AGY_USAGE {} is not a /usage answer: {e}",
                path.to_string_lossy()
            )
        });
    }
    let bucket = |group: &str, id: &str, name: &str, window: &str, left: f64, reset: &str| Bucket {
        id: id.into(),
        name: name.into(),
        window: window.into(),
        remaining_fraction: left,
        reset_time: Some(reset.into()),
        group: group.into(),
    };
    Ok(Quota {
        buckets: vec![
            bucket(
                "Gemini",
                "gemini-weekly",
                "Gemini weekly",
                "weekly",
                0.73,
                "2026-12-07T00:00:00Z",
            ),
            bucket(
                "Gemini",
                "gemini-5h",
                "Gemini 5-hour",
                "5h",
                0.42,
                "2026-12-01T23:10:00Z",
            ),
            bucket(
                "Third-party models",
                "3p-weekly",
                "Third-party weekly",
                "weekly",
                0.91,
                "2026-12-07T00:00:00Z",
            ),
        ],
    })
}

/// `/model`: the model this run would use (`--model`, else the recording's,
/// else the first one `agy models` lists, which is then the default), its
/// label from the listing, its effort (`--effort`, else the slug's tier).
fn model(args: &PrintArgs, rec: &Recording) -> SlashCommand {
    let listed = parse_models_output(&rec.header.models_output);
    let chosen = args.model.clone().or_else(|| rec.header.model.clone());
    let is_default = chosen.is_none();
    let id = chosen
        .or_else(|| listed.first().map(|m| m.slug()))
        .unwrap_or_default();
    let label = listed
        .iter()
        .find(|m| m.slug() == id || m.display == id)
        .map(|m| m.display.clone())
        .unwrap_or_else(|| id.clone());
    let effort = args
        .effort
        .clone()
        .or_else(|| split_tier(&id).1.map(|e| e.as_arg().to_string()));
    SlashCommand {
        name: "model".into(),
        data: Some(CommandData::Model(ModelChoice {
            id,
            label,
            effort,
            is_default,
            extra: Default::default(),
        })),
        extra: Default::default(),
    }
}

/// What `/model` answers in text: `slug<TAB>label`, as agy 1.2.7's
/// `result.response` has it.
fn response(command: &SlashCommand) -> String {
    match &command.data {
        Some(CommandData::Model(m)) => format!("{}\t{}\n", m.id, m.label),
        _ => String::new(),
    }
}

/// The command's output: stream-json's `command_result` then the result,
/// json's bare result, or text mode's answer.
fn print_command(command: SlashCommand, text: String, format: OutputFormat) {
    if format != OutputFormat::Text {
        crate::ending::note_result();
    }
    let result = TurnResult {
        conversation_id: String::new(),
        status: "SUCCESS".into(),
        response: text.clone(),
        duration_seconds: 0.0,
        num_turns: 0,
        usage: Some(Usage::default()),
        command: Some(command.clone()),
        ..TurnResult::default()
    };
    let out = match format {
        OutputFormat::Text => text,
        OutputFormat::Json => format!(
            "{}\n",
            serde_json::to_string(&result).unwrap_or_else(|_| "{}".into())
        ),
        OutputFormat::StreamJson => format!(
            "{}\n{}\n",
            Line::CommandResult(command).to_json(),
            Line::Result(result).to_json()
        ),
    };
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(out.as_bytes());
    let _ = o.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_leading_slash_is_a_command() {
        assert_eq!(command_of("/model"), Some("model"));
        assert_eq!(command_of("/model gemini-x"), Some("model"));
        assert_eq!(command_of("/"), Some(""));
        assert_eq!(command_of(" /model"), None);
        assert_eq!(command_of("say /model"), None);
    }
}
