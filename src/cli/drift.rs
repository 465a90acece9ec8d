//! `agy-bridge drift`: fingerprinting recordings or databases and comparing
//! them with the schema baseline, to report what a new agy version changed
//! (docs/recording-new-agy.md); its exit status says how bad it is.

use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "PATHS are recordings (.jsonl), conversation databases, or directories \
(every .jsonl in them).

A finding is BREAKING only when data a user sees would be lost or misread: a load-bearing field \
gone with nothing the decoder reads carrying its content, a field the decoder reads arriving with \
another wire type, content-bearing steps that fail to decode, a needed table or column gone, an \
unknown step status or `agy models` format, a recording writing what its own schema lacks. A \
field that is merely absent is a note: proto3 omits zero and empty values. New things are \
warnings. Baseline step types the inputs do not have are listed as coverage, not findings.

Exit status: 0 no breaking finding (warnings and notes are printed); 1 a breaking finding; \
2 an input or the baseline could not be read; 3 nothing to compare (no inputs found, e.g. an \
empty directory, or inputs without a single step): nothing was checked."
)]
pub struct DriftArgs {
    /// Recordings, databases or directories of recordings.
    #[arg(required = true, value_name = "PATHS")]
    paths: Vec<PathBuf>,
    /// The baseline to compare with (default: recordings/schema-baseline.json
    /// of this source tree, else the copy built into agy-bridge).
    #[arg(long, value_name = "FILE", conflicts_with = "update_baseline")]
    baseline: Option<PathBuf>,
    /// Write the fingerprint of PATHS to FILE as the new baseline instead.
    #[arg(long, value_name = "FILE")]
    update_baseline: Option<PathBuf>,
    /// Print the findings as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `drift`'s exit status when the inputs hold nothing to compare.
const DRIFT_NOTHING_TO_COMPARE: u8 = 3;

/// The files drift reads from PATHS (a directory gives the `.jsonl` files
/// in it and in every directory below it, so `recordings/` is the whole
/// corpus), each once, and a description of each PATH for the
/// nothing-to-compare case.
fn drift_inputs(args: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<String>), String> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut looked_at = Vec::new();
    for p in args {
        if !p.is_dir() {
            paths.push(p.clone());
            looked_at.push(p.display().to_string());
            continue;
        }
        let mut found = Vec::new();
        jsonl_under(p, &mut found)?;
        found.sort();
        looked_at.push(format!(
            "{} (a directory with {} .jsonl file(s) in it and below)",
            p.display(),
            found.len()
        ));
        paths.extend(found);
    }
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    Ok((paths, looked_at))
}

/// Every `.jsonl` file under `dir`, at any depth.
fn jsonl_under(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if kind.is_dir() {
            jsonl_under(&path, found)?;
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            found.push(path);
        }
    }
    Ok(())
}

pub fn cmd_drift(args: DriftArgs) -> CmdResult {
    use agy_corpus::drift;
    let fail = |message: String| {
        eprintln!("agy-bridge: error: {}", message.replace(['\n', '\r'], " "));
        Ok(ExitCode::from(2))
    };
    let (paths, looked_at) = match drift_inputs(&args.paths) {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    let current = match drift::fingerprint_paths(&paths) {
        Ok(fp) => fp,
        Err(e) => return fail(e.to_string()),
    };
    if let Some(out) = &args.update_baseline {
        if current.total_steps() == 0 {
            eprintln!(
                "agy-bridge: error: nothing to write: {} holds no step; {} is unchanged",
                looked_at.join(", "),
                out.display()
            );
            return Ok(ExitCode::from(DRIFT_NOTHING_TO_COMPARE));
        }
        if let Err(e) = std::fs::write(out, current.to_json()) {
            return fail(format!("cannot write {}: {e}", out.display()));
        }
        let text = format!(
            "wrote {}: {} sources, {} step types, {} steps\n",
            out.display(),
            current.sources.len(),
            current.step_types.len(),
            current.total_steps()
        );
        return super::out::print_then(&text, ExitCode::SUCCESS);
    }
    let loaded = match args.baseline {
        Some(path) => drift::Fingerprint::load(&path).map(|fp| (fp, path)),
        None => drift::default_baseline(),
    };
    let (baseline, baseline_path) = match loaded {
        Ok(b) => b,
        Err(e) => return fail(e.to_string()),
    };
    let report = drift::compare(&baseline, &current);
    let text = if args.json {
        report.to_json(&current, &baseline_path, &looked_at)
    } else {
        report.to_text(&current, &baseline_path, &looked_at)
    };
    let code = if report.nothing_to_compare {
        ExitCode::from(DRIFT_NOTHING_TO_COMPARE)
    } else if report.is_breaking() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    };
    // A reader gone early does not hide a breaking finding.
    super::out::finish(super::out::print(&text), code).map(|_| code)
}
