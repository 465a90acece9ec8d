//! `agy-bridge record`: capturing an agy run (or an existing database or
//! recording) as a recording in the corpus format, optionally redacted for
//! publishing (docs/recording-new-agy.md). It runs agy with the same set-up
//! as `run`, from [`super::turn`].

use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "Runs $AGY_BIN (default `agy`) as `agy-bridge run` does, captures every committed \
change of its conversation database(s) with its time offset, and writes a recording. Without \
--redact the file holds private data (paths, user name, ids, the prompt)."
)]
pub struct RecordArgs {
    /// Where to write the recording (JSON Lines).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Convert this existing conversation database (one commit, no timing)
    /// instead of running agy.
    #[arg(long, value_name = "PATH", conflicts_with = "from")]
    db: Option<PathBuf>,
    /// Rewrite this existing recording instead of running agy (use with
    /// --redact to redact it).
    #[arg(long, value_name = "RECORDING")]
    from: Option<PathBuf>,
    /// agy's --model.
    #[arg(long)]
    model: Option<String>,
    /// agy's --effort: low, medium or high.
    #[arg(long)]
    effort: Option<agy_format::agy_args::Effort>,
    /// agy's --mode: accept-edits or plan.
    #[arg(long)]
    mode: Option<agy_format::agy_args::Mode>,
    /// Resume this conversation (its earlier state is recorded as `pre`).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// Run agy in this directory (the workspace).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// agy's --add-dir (repeatable).
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dirs: Vec<PathBuf>,
    /// Replace home and workspace paths, user name, e-mail addresses and ids
    /// with placeholders, in payloads too.
    #[arg(long)]
    redact: bool,
    /// Stop agy after this many seconds (what was captured is kept).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// The prompt (required unless --db or --from).
    prompt: Option<String>,
}

pub fn cmd_record(args: RecordArgs, settings: &agy_bridge::settings::Settings) -> CmdResult {
    use agy_bridge::{maintain::record, runner};
    use agy_corpus::{recording::Recording, redact};
    let mut workspaces: Vec<String> = Vec::new();
    let recording = if let Some(db) = &args.db {
        record::from_database(db)?
    } else if let Some(from) = &args.from {
        Recording::load(from)?
    } else {
        let Some(prompt) = args.prompt.clone() else {
            return Err("a PROMPT is required (or --db PATH / --from RECORDING)".into());
        };
        // The same setup as `run`: the environment, the guardian, the
        // configured permissions and mode, the same signals.
        super::env::check_all(settings)?;
        let config = agy_bridge::session::setup::config(settings)?;
        let mut cfg = agy_bridge::session::setup::configured(&config, settings);
        if let Some(secs) = args.timeout {
            cfg.timeout = std::time::Duration::from_secs(secs);
        }
        let conversation = match &args.conversation {
            Some(id) => Some(agy_format::ids::ConversationId::parse(id)?),
            None => None,
        };
        let cwd = match &args.cwd {
            Some(dir) => Some(
                std::fs::canonicalize(dir).map_err(|e| format!("--cwd {}: {e}", dir.display()))?,
            ),
            None => None,
        };
        for d in cwd.iter().chain(args.add_dirs.iter()) {
            workspaces.push(d.display().to_string());
        }
        let req = record::RecordRequest {
            turn: runner::TurnRequest {
                prompt,
                cwd,
                model: args.model.clone(),
                effort: args.effort,
                mode: Some(args.mode.unwrap_or(config.mode)),
                conversation,
                add_dirs: args.add_dirs.clone(),
                ..runner::TurnRequest::default()
            },
        };
        let recorded = super::turn::runtime()?.block_on(async {
            let cancel = tokio_util::sync::CancellationToken::new();
            super::turn::cancel_on_signals(cancel.clone());
            record::record(&cfg, &req, cancel).await
        });
        // Stopped before agy ran (`--version` is asked first): nothing to
        // keep.
        let recorded = match recorded {
            Err(_) if agy_bridge::process::caller::stopped_by().is_some() => {
                return Ok(agy_bridge::process::caller::stopped_exit().unwrap_or(ExitCode::FAILURE))
            }
            recorded => recorded?,
        };
        for w in &recorded.warnings {
            eprintln!("agy-bridge: warning: {}", w.replace(['\n', '\r'], " "));
        }
        let dbs = recorded.recording.conversations().len();
        eprintln!(
            "agy-bridge: captured {} commits from {dbs} database(s) in {} ms ({} wake-ups), agy exit {}",
            recorded.recording.commits.len(),
            recorded.result.duration_ms,
            recorded.stats.wakes,
            recorded.recording.header.exit_code
        );
        recorded.recording
    };
    let recording = if args.redact {
        if let Ok(dir) = std::env::current_dir() {
            workspaces.push(dir.display().to_string());
        }
        redact::redact_recording(&recording, &redact::RedactOptions::from_env(workspaces))
    } else {
        eprintln!("agy-bridge: {}", record::PRIVACY_WARNING);
        recording
    };
    if args.redact {
        recording.save(&args.out)?;
    } else {
        recording.save_private(&args.out)?;
    }
    eprintln!(
        "agy-bridge: wrote {} ({} commits)",
        args.out.display(),
        recording.commits.len()
    );
    // Stopped mid-run: what was captured is written, and the code says so.
    Ok(agy_bridge::process::caller::stopped_exit().unwrap_or(ExitCode::SUCCESS))
}
