//! `agy-bridge pi-tools`: the switch for pi's tools, as the extension asks
//! it. Both of its rules live here, not in the extension: which words turn
//! pi's tools on or off (`AGY_PI_TOOLS` and `/agy tools WORD` take the same
//! ones: [`agy_bridge::state::file::on_off`]), and which of pi's tools agy
//! is never offered ([`agy_bridge::pi::mcp::NATIVE_TOOLS`]).

use agy_bridge::settings::Settings;
use clap::Args;
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "Without --set or --current, the default: AGY_PI_TOOLS (unset: on). \
With --json, one object: {\"on\":BOOL,\"native\":[...],\"message\":\"...\"}, and \"error\" \
(exit 1) when AGY_PI_TOOLS or WORD is not a word it takes."
)]
pub struct PiToolsArgs {
    /// The user's word (`/agy tools WORD`): on or off (also 1/0, true/false, yes/no).
    #[arg(long, value_name = "WORD")]
    set: Option<String>,
    /// The extension's switch as it is now (on or off), to report it.
    #[arg(long, value_name = "WORD", conflicts_with = "set")]
    current: Option<String>,
    /// Print a JSON object (what the extension reads).
    #[arg(long)]
    json: bool,
}

/// What the switch is, or why the word is not one it takes.
fn state(args: &PiToolsArgs, settings: &Settings) -> Result<bool, String> {
    use agy_bridge::state::file::on_off;
    let word = |w: &str| {
        on_off(w).ok_or_else(|| {
            format!("/agy tools takes on or off (also 1/0, true/false, yes/no), not {w:?}")
        })
    };
    match (&args.set, &args.current) {
        (Some(w), _) | (None, Some(w)) => word(w),
        (None, None) => match settings.problem(agy_bridge::pi::mcp::ENV_SWITCH) {
            Some(e) => Err(e.to_string()),
            None => Ok(settings.pi_tools),
        },
    }
}

/// The sentence `/agy tools` shows.
fn message(on: bool) -> String {
    format!(
        "agy can call pi's tools: {} (all but {}, which agy has of its own or which is agy itself; this pi process; {}=off sets the default)",
        if on { "on" } else { "off" },
        agy_bridge::pi::mcp::NATIVE_TOOLS.join(", "),
        agy_bridge::pi::mcp::ENV_SWITCH
    )
}

pub fn cmd_pi_tools(args: PiToolsArgs, settings: &Settings) -> CmdResult {
    let native = agy_bridge::pi::mcp::NATIVE_TOOLS;
    let (text, code) = match state(&args, settings) {
        Ok(on) if args.json => (
            serde_json::json!({"on": on, "native": native, "message": message(on)}).to_string(),
            ExitCode::SUCCESS,
        ),
        Ok(on) => (message(on), ExitCode::SUCCESS),
        Err(e) if args.json => (
            serde_json::json!({"on": false, "native": native, "message": e, "error": e})
                .to_string(),
            ExitCode::FAILURE,
        ),
        Err(e) => (format!("agy-bridge: {e}"), ExitCode::FAILURE),
    };
    super::out::print_then(&format!("{text}\n"), code)
}
