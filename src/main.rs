//! The `agy-bridge` command line: one subcommand per job, each a thin shell
//! over the library. Only what must be here is: the entry point, the work
//! done before any thread starts (agy's guardian, the allocator, early
//! stop signals) and the dispatch; each subcommand's flags and handler live
//! in its file under `src/cli/`. To add a subcommand, add a variant to
//! [`Commands`], an args struct and a `cmd_*` function in `src/cli/`, and
//! one match arm in [`run`].

#![deny(unsafe_op_in_unsafe_fn)]

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Stream Google's Antigravity CLI (agy) as a model provider, and inspect
/// what agy writes.
#[derive(Debug, Parser)]
#[command(name = "agy-bridge", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Debug, Subcommand)]
enum Commands {
    /// Decode a conversation database or a recording into readable steps
    /// (or JSON lines with --json).
    Decode(cli::decode::DecodeArgs),
    /// Show or change the settings (config.json; environment variables win
    /// over the file).
    Config(cli::state::ConfigArgs),
    /// List or clear the pi session → agy conversation bindings.
    Sessions(cli::state::SessionsArgs),
    /// pi's `/agy` command, answered in words (what the pi extension runs).
    Slash(cli::slash::SlashArgs),
    /// Run one agy turn and stream what it does, live.
    Run(cli::run::RunArgs),
    /// Run the whole pipeline on a bundled recording with the workspace's
    /// fake agy: no real agy, no network.
    Demo(cli::run::DemoArgs),
    /// The pi provider boundary: one JSON request on stdin, pi's streaming
    /// events as JSON lines on stdout (see ARCHITECTURE.md).
    Stream(cli::stream::StreamArgs),
    /// AskAntigravity: delegate one task to agy and print its final answer
    /// with a footer naming the conversation.
    Ask(cli::ask::AskArgs),
    /// List agy's models (`agy models`, cached 5 minutes) as a table, or as
    /// pi model objects with --json.
    Models(cli::models::ModelsArgs),
    /// Show agy's quota (`agy -p /usage`): what is left of each bucket and
    /// when it refills, or JSON with --json.
    Usage(cli::usage::UsageArgs),
    /// Whether agy may call pi's tools (AGY_PI_TOOLS, or the user's word)
    /// and which of pi's tools agy is never offered: what the extension asks.
    PiTools(cli::tools_switch::PiToolsArgs),
    /// What agy runs before each tool call in `ask` mode: agy's payload on
    /// stdin, the decision (pi's, or the rules') on stdout.
    Hook(cli::hook::HookArgs),
    /// Record an agy run (or an existing database) as a recording in the
    /// corpus format, optionally redacted for publishing.
    Record(cli::record::RecordArgs),
    /// Fingerprint recordings or databases and compare them with the
    /// schema baseline: breaking changes exit 1.
    Drift(cli::drift::DriftArgs),
    /// Run the conformance scenarios against agy and report which facts of
    /// docs/agy-format.md held.
    Conformance(cli::conformance::ConformanceArgs),
    /// agy as an Agent Client Protocol agent over stdio, for ACP editors
    /// (Zed's agent_servers, ...).
    Acp(cli::acp::AcpArgs),
}

/// What a subcommand returns: its exit code, or an error to report.
type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Make glibc hand freed buffers of 1 MiB or more straight back to the
/// system (Linux, glibc). The process's allocator is the binary's to set,
/// not a library call's side effect, so this runs first thing in `main`.
///
/// A growing answer passes through the bridge as buffers of many megabytes
/// (the row's blob, its decoded text, each delta). glibc serves a large
/// allocation with its own mapping, but after freeing one it raises that
/// threshold to the freed size (up to 32 MiB), so later buffers of that size
/// come from the heap, whose freed space stays resident: a 50 MB answer left
/// the bridge holding about 100 MB it no longer used (benches/memory.rs). A
/// fixed threshold turns that adjustment off.
fn release_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; main calls it before
    // any other thread exists.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

fn main() -> ExitCode {
    agy_bridge::process::guard::main_if_guard();
    release_large_buffers();
    // A command that runs agy notes a stop signal from its first
    // instruction on, so even one in the first millisecond ends it in
    // order, agy's processes with it.
    let runs_agy = std::env::args_os().nth(1).is_some_and(|a| {
        [
            "stream",
            "run",
            "ask",
            "demo",
            "record",
            "models",
            "usage",
            "conformance",
            "acp",
        ]
        .iter()
        .any(|c| a == *c)
    });
    if runs_agy {
        agy_bridge::process::caller::hold_early_stops();
    }
    let standby = guardian_for_stream();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    // The environment, read once: every command gets it as one typed value.
    let settings = agy_bridge::settings::Settings::from_process();
    // agy runs the hook with the environment it was given: a notice there
    // would be said once per tool call, into agy's output.
    if !matches!(cli.command, Commands::Hook(_)) {
        for notice in settings.notices() {
            eprintln!("agy-bridge: warning: {notice}");
        }
    }
    match run(cli.command, standby, &settings) {
        Ok(code) => code,
        Err(e) => {
            // One line, whatever the error's own text holds.
            let message = e.to_string().replace(['\n', '\r'], " ");
            eprintln!("agy-bridge: error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A command line clap rejects. `stream`'s reader is pi, which reads JSON
/// events, not stderr: it gets its `start` and one `error` naming the bad
/// flag, as every other `stream` failure does. `--help` and `--version` are
/// not failures and print as usual.
fn usage_error(e: clap::Error) -> ExitCode {
    let is_stream = std::env::args_os().nth(1).is_some_and(|a| a == "stream");
    if !is_stream || !e.use_stderr() {
        e.exit();
    }
    let rendered = e.render().to_string();
    eprint!("{rendered}");
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    let reason = first.strip_prefix("error: ").unwrap_or(first);
    cli::stream::stream_fails_early(&format!("agy-bridge stream: {reason}"))
}

/// `stream` (pi's turn) forks agy's guardian first thing, while this
/// process still has one thread: it waits while the request is read and the
/// turn prepared, and agy starts the moment the turn is ready (see
/// `agy_bridge::process::standby`). If the fork fails, the turn starts one later.
fn guardian_for_stream() -> Option<agy_bridge::process::standby::Standby> {
    if std::env::args_os().nth(1).is_some_and(|a| a == "stream") {
        // SAFETY: nothing has started a thread yet: this is the first thing
        // `main` does after `main_if_guard`, which never returns here with
        // a thread started.
        unsafe { agy_bridge::process::standby::Standby::fork() }.ok()
    } else {
        None
    }
}

/// `standby`: agy's guardian, already started for `stream`; `settings`:
/// the environment, resolved (a command that acts on it checks it first).
fn run(
    command: Commands,
    standby: Option<agy_bridge::process::standby::Standby>,
    settings: &agy_bridge::settings::Settings,
) -> CmdResult {
    match command {
        Commands::Decode(args) => cli::decode::cmd_decode(args),
        Commands::Config(args) => cli::state::cmd_config(args, settings),
        Commands::Sessions(args) => cli::state::cmd_sessions(args, settings),
        Commands::Slash(args) => Ok(cli::slash::cmd_slash(args, settings)),
        Commands::Hook(args) => Ok(cli::hook::cmd_hook(args)),
        Commands::Run(args) => cli::run::cmd_run(args, settings),
        Commands::Demo(args) => cli::run::cmd_demo(args, settings),
        Commands::Stream(args) => cli::stream::cmd_stream(args, standby, settings),
        Commands::Ask(args) => cli::ask::cmd_ask(args, settings),
        Commands::Models(args) => cli::models::cmd_models(args, settings),
        Commands::Usage(args) => cli::usage::cmd_usage(args, settings),
        Commands::PiTools(args) => cli::tools_switch::cmd_pi_tools(args, settings),
        Commands::Record(args) => cli::record::cmd_record(args, settings),
        Commands::Drift(args) => cli::drift::cmd_drift(args),
        Commands::Conformance(args) => cli::conformance::cmd_conformance(args, settings),
        Commands::Acp(args) => cli::acp::cmd_acp(args, settings),
    }
}
