//! `agy-bridge hook EVENT --gate FILE`: the command agy runs before each
//! tool call in `ask` mode (the bridge writes it into a private hooks.json;
//! see `agy_bridge::gate`). agy's payload comes on stdin; one decision
//! line goes to stdout, always, and the exit code is 0 so that agy reads
//! the decision rather than a failure (both would deny; the line says why).

use agy_format::hooks::{Decision, HookEvent};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The hook event agy runs this for (payloads do not name it); only
    /// PreToolUse is gated.
    event: String,
    /// The gate file (address and token) of the session this hook serves.
    #[arg(long)]
    gate: PathBuf,
}

pub fn cmd_hook(args: HookArgs) -> ExitCode {
    let decision = if HookEvent::parse(&args.event) == Some(HookEvent::PreToolUse) {
        agy_bridge::gate::client::decide(&args.event, &args.gate, std::io::stdin().lock())
    } else {
        Decision::deny(format!(
            "agy-bridge's hook only gates PreToolUse, not {:?}",
            args.event
        ))
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", decision.to_json()).and_then(|()| out.flush());
    ExitCode::SUCCESS
}
