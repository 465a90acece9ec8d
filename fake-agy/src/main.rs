//! fake-agy: a stand-in for Google's Antigravity CLI (`agy`) that replays an
//! agy-bridge recording into a real-schema conversation database, on agy's
//! command line, with fault knobs for tests. See `fake-agy --help` and
//! fake-agy/README.md.
//!
//! The recording format, the schema and the decoder all come from the
//! `agy_bridge` library, so the fake cannot drift from what the bridge reads.

#![forbid(unsafe_code)]

mod cli;
mod edits;
mod effort;
mod ending;
mod fault;
mod hooks;
mod mcp;
mod models;
mod replay;
mod slash;
mod stdin_turns;
mod stream;

use cli::Invocation;
use std::time::Instant;

/// `FAKE_AGY_ARGV_LOG=PATH`: append this invocation's arguments as one JSON
/// array per line, so tests can see exactly what the bridge passed (flags,
/// ids, and that no prompt is among them).
fn log_argv(args: &[String]) {
    append_json_line("FAKE_AGY_ARGV_LOG", serde_json::Value::from(args.to_vec()));
}

/// Append `value` as one JSON line to the file the environment variable
/// `var` names, if it is set: `FAKE_AGY_ARGV_LOG`, and `FAKE_AGY_STDIN_LOG`
/// (each prompt read on stdin, as a JSON string), so tests see exactly
/// what agy got.
pub fn append_json_line(var: &str, value: serde_json::Value) {
    use std::io::Write;
    let Some(path) = std::env::var_os(var) else {
        return;
    };
    // One write per line: processes started together (the bridge asks
    // `--version` and `--help` at once) append whole lines, never pieces.
    let line = format!("{value}\n");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

fn main() {
    // The replay clock starts with the process, as agy's would.
    let start = Instant::now();
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    log_argv(&args);
    let surface = cli::Surface::from_env();
    let result = match cli::parse_for(&args, surface) {
        Err(cli::UsageError(message)) => {
            eprint!("Error: {message}\n\n{}", cli::usage(surface));
            Ok(cli::USAGE_EXIT)
        }
        Ok(Invocation::Help) => {
            print!("{}", cli::help_text(surface));
            Ok(0)
        }
        Ok(Invocation::Version) => replay::version(),
        Ok(Invocation::Models) => replay::models(),
        Ok(Invocation::Other(name)) => {
            println!("fake-agy: `agy {name}` is not emulated; nothing to do");
            Ok(0)
        }
        Ok(Invocation::Print(p)) if p.input_format.as_deref() == Some("stream-json") => {
            replay::boot().and_then(|()| stdin_turns::run(&p))
        }
        Ok(Invocation::Print(p)) => replay::boot().and_then(|()| replay::run_print(&p, start)),
        Ok(Invocation::SubagentWriter(a)) => replay::writer::run_subagent_writer(&a),
        Ok(Invocation::LateWriter(a)) => replay::late::run_late_writer(&a),
    };
    let code = match result {
        Ok(code) => code,
        Err(fatal) => {
            eprintln!("fake-agy: {}", fatal.message);
            fatal.code
        }
    };
    log_cpu();
    std::process::exit(code);
}

/// `FAKE_AGY_CPU_LOG=PATH`: append the CPU this process has spent so far
/// (user and system, its threads and its reaped children), in
/// microseconds, as one JSON line `{"pid":…,"cpu_us":…}`: at exit, and
/// after each turn of a stdin session (a warm agy the bridge stops never
/// reaches its exit). A bench that measures the bridge through its whole
/// process tree subtracts what the agy stand-in spent: per pid, its last
/// line.
pub(crate) fn log_cpu() {
    use nix::sys::resource::{getrusage, UsageWho};
    if std::env::var_os("FAKE_AGY_CPU_LOG").is_none() {
        return;
    }
    let us = |who| {
        getrusage(who).map_or(0, |u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() * 1_000_000 + tv.tv_usec();
            t(u.user_time()) + t(u.system_time())
        })
    };
    let cpu_us = us(UsageWho::RUSAGE_SELF) + us(UsageWho::RUSAGE_CHILDREN);
    append_json_line(
        "FAKE_AGY_CPU_LOG",
        serde_json::json!({"pid": std::process::id(), "cpu_us": cpu_us}),
    );
}
