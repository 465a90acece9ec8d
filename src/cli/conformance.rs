//! `agy-bridge conformance`: the library's conformance suite
//! (`agy_bridge::maintain::conformance`) against the agy on PATH or
//! `AGY_BIN`, its report written to `--out DIR`.

use agy_bridge::maintain::conformance::{self, Options};
use agy_bridge::settings::Settings;
use agy_bridge::state::tmp::PrivateDir;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Exit status when the suite could not run.
const CANNOT_RUN: u8 = 2;

#[derive(Debug, Args)]
#[command(
    after_help = "Runs a fixed set of scenarios against $AGY_BIN (default `agy`), each in a \
throwaway workspace, and checks each fact of docs/agy-format.md they touch on what the bridge reads. \
The bridge's own state goes to a temporary directory; agy itself runs with your HOME (its sign-in), \
so the conversations it creates are where agy keeps them (~/.gemini/antigravity-cli/conversations). \
It says first how many model turns it will spend, and stops cleanly on a quota error (the report \
says what was not checked). Each scenario sets FAKE_AGY_RECORDING for fake-agy; a real agy ignores it.

Writes, redacted: DIR/report.json, DIR/report.md, DIR/recordings/*.jsonl (every turn, replayable by \
fake-agy), DIR/commands/ (what --version, models, /usage and /hooks printed) and DIR/drift.txt.

Exit status: 0 every fact checked held; 1 a fact did not hold (named on stderr); 2 the suite could \
not run."
)]
pub struct ConformanceArgs {
    /// Where to write the report and the recordings.
    #[arg(long, value_name = "DIR", required_unless_present = "list")]
    out: Option<PathBuf>,
    /// agy's --model (default: the cheapest `agy models` lists).
    #[arg(long)]
    model: Option<String>,
    /// Run only these scenarios (repeatable or comma-separated).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    only: Vec<String>,
    /// Each turn's watchdog, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// List the scenarios and their facts, and exit.
    #[arg(long)]
    list: bool,
}

/// Exit 2 with one sentence on stderr.
fn cannot_run(message: &str) -> CmdResult {
    eprintln!(
        "agy-bridge conformance: cannot run: {}",
        message.replace(['\n', '\r'], " ")
    );
    Ok(ExitCode::from(CANNOT_RUN))
}

fn listing() -> String {
    let mut text = String::new();
    for s in conformance::SCENARIOS {
        let facts: Vec<&str> = s.facts.iter().map(|(id, _)| *id).collect();
        let not_yet = if s.not_yet { " (not yet)" } else { "" };
        text.push_str(&format!(
            "{:<15} {} turn(s)  {}{not_yet}: {}\n",
            s.name,
            s.turns,
            s.about,
            facts.join(", ")
        ));
    }
    text
}

pub fn cmd_conformance(args: ConformanceArgs, settings: &Settings) -> CmdResult {
    if args.list {
        return super::out::print_then(&listing(), ExitCode::SUCCESS);
    }
    let Some(out) = args.out.clone() else {
        return cannot_run("--out DIR is required");
    };
    let scenarios = match conformance::select(&args.only) {
        Ok(s) => s,
        Err(e) => return cannot_run(&e),
    };
    // The runner's own variables, as the runner's settings always were.
    let runner_vars = ["AGY_EXTRA_ARGS", "AGY_BIND", "AGY_WAKE"];
    if let Some(e) = runner_vars.iter().find_map(|v| settings.problem(v)) {
        return cannot_run(&e.to_string());
    }
    // The bridge's own state (version cache, seats, usage cache) goes to a
    // throwaway directory: these settings' state directory.
    let state = match PrivateDir::create(&agy_bridge::state::tmp::temp_dir(), "conformance-state") {
        Ok(dir) => dir,
        Err(e) => return cannot_run(&format!("cannot create a state directory: {e}")),
    };
    let mut settings = settings.clone();
    settings.state_dir = Some(state.path().to_path_buf());
    let mut cfg = agy_bridge::session::setup::run_config(&settings);
    cfg.skip_permissions = true;
    cfg.timeout = std::time::Duration::from_secs(args.timeout.max(1));
    if let Err(e) = std::fs::create_dir_all(&out) {
        return cannot_run(&format!("cannot create {}: {e}", out.display()));
    }
    let runtime = super::turn::runtime()?;
    let stop = agy_bridge::process::caller::stop_token();
    // Asked once: named here, and recorded by the suite.
    let listed = runtime.block_on(conformance::list_models(&cfg, &stop)).ok();
    if let Some(code) = agy_bridge::process::caller::stopped_exit() {
        return Ok(code);
    }
    let model = args.model.clone().or_else(|| {
        let listing = listed.as_ref()?;
        conformance::cheapest_listed(&String::from_utf8_lossy(&listing.stdout))
    });
    let names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
    eprintln!(
        "agy-bridge conformance: {} scenario(s) ({}), {} model turn(s) on {}",
        scenarios.len(),
        names.join(", "),
        conformance::planned_turns(&scenarios),
        model.as_deref().unwrap_or("agy's default model")
    );
    let opts = Options {
        cfg,
        model,
        scenarios,
        out: Some(out.clone()),
        models: listed,
    };
    let report = runtime.block_on(async {
        let cancel = tokio_util::sync::CancellationToken::new();
        super::turn::cancel_on_signals(cancel.clone());
        conformance::run(opts, cancel).await
    });
    drop(state);
    let code = match report {
        Ok(report) => finish(&report, &out),
        Err(e) => cannot_run(&e),
    };
    // Stopped: what was checked is reported, and the code says why it ended.
    match agy_bridge::process::caller::stopped_exit() {
        Some(stopped) => code.map(|_| stopped),
        None => code,
    }
}

/// Write the report, say what did not hold, exit 0 or 1.
fn finish(report: &conformance::Report, out: &Path) -> CmdResult {
    for (name, text) in [
        ("report.json", report.to_json()),
        ("report.md", report.to_markdown()),
    ] {
        let path = out.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            return cannot_run(&format!("cannot write {}: {e}", path.display()));
        }
    }
    if let Some(stop) = &report.stopped {
        eprintln!("agy-bridge conformance: {stop}");
    }
    for line in report.failed_lines() {
        eprintln!(
            "agy-bridge conformance: did not hold: {}",
            line.replace(['\n', '\r'], " ")
        );
    }
    let held = report.facts.iter().filter(|c| c.ok == Some(true)).count();
    let text = format!(
        "{held} of {} facts held, {} did not; {} model turn(s) spent; wrote {}\n",
        report.facts.len(),
        report.failed().len(),
        report.spent_turns,
        out.join("report.md").display()
    );
    super::out::print_then(&text, ExitCode::from(conformance::exit_code(report)))
}
