//! agy's slash commands in a print-mode prompt. Since about 1.1.9 a `-p`
//! prompt that starts with `/` runs one of agy's own commands instead of a
//! model turn: no `init`, no conversation, a `command_result` event and a
//! result with `conversation_id` `""` and `num_turns` 0; `/clear` and
//! commands agy does not know exit 2 (docs/agy-format.md, "Slash commands").
//! `--disable-slash-commands` (documented from agy 1.2.14) turns that off.
//!
//! This module owns which prompts are commands and what fake-agy prints for
//! them. It writes no database, as agy writes none. Only `/model` is
//! emulated: it is the one with a public capture (agy 1.2.7); the answers
//! come from the recording (its model and its `agy models` listing), so
//! they agree with what `fake-agy models` prints.

use crate::cli::{OutputFormat, PrintArgs};
use agy_bridge::models::{parse_models_output, split_tier};
use agy_bridge::recording::Recording;
use agy_bridge::stream_json::{CommandData, Line, ModelChoice, SlashCommand, TurnResult, Usage};
use std::io::Write;

/// Exit code agy gives a prompt it cannot take (an unsupported command).
const UNSUPPORTED_EXIT: i32 = 2;

/// The commands agy has that fake-agy does not emulate (docs/agy-format.md:
/// `/usage`, `/hooks`, `/quota` answer without a model turn).
const NOT_EMULATED: &[&str] = &["usage", "hooks", "quota"];

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
            print_command(model(args, rec), args.output_format);
            0
        }
        // Our wording: agy's own message for these is not captured.
        "clear" => refuse("error: slash command \"/clear\" is not supported in print mode\n"),
        n if NOT_EMULATED.contains(&n) => refuse(&format!(
            "fake-agy: the slash command \"/{n}\" is not emulated (only /model is)\n"
        )),
        n => refuse(&format!("error: unknown slash command \"/{n}\"\n")),
    }
}

fn refuse(message: &str) -> i32 {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(message.as_bytes());
    let _ = e.flush();
    UNSUPPORTED_EXIT
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
fn print_command(command: SlashCommand, format: OutputFormat) {
    if format != OutputFormat::Text {
        crate::ending::note_result();
    }
    let text = response(&command);
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
