//! `agy-bridge slash WORDS…`: pi's `/agy` command, answered in words by
//! [`agy_bridge::pi::agy_command`].

use agy_bridge::pi::agy_command::{answer, SlashRequest};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct SlashArgs {
    /// pi's session id: its agy conversation is what `clear` forgets.
    #[arg(long)]
    session_id: Option<String>,
    /// pi's working directory (the session's key when there is no id).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Whether agy may call pi's tools in this pi process (`on`/`off`: the
    /// extension's own switch, shown in the overview).
    #[arg(long)]
    pi_tools: Option<String>,
    /// `clear all` was confirmed by the user.
    #[arg(long)]
    yes: bool,
    /// The words after `/agy`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    words: Vec<String>,
}

/// `agy-bridge slash`: the answer on stdout; exit 1 when the words were
/// not understood or a change could not be made (the answer says why).
pub fn cmd_slash(args: SlashArgs, settings: &agy_bridge::settings::Settings) -> ExitCode {
    let (ok, text) = match answer(&request(args, settings)) {
        Ok(text) => (true, text),
        Err(text) => (false, text),
    };
    println!("{}", text.trim_end());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The library's request from the flags.
fn request(args: SlashArgs, settings: &agy_bridge::settings::Settings) -> SlashRequest {
    SlashRequest {
        session_id: args.session_id,
        cwd: args.cwd,
        pi_tools: args.pi_tools,
        yes: args.yes,
        words: args.words,
        settings: settings.clone(),
        stop: agy_bridge::process::caller::stop_token,
    }
}
