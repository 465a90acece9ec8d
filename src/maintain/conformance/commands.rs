//! agy's own commands as the suite ran them (`--version`, `models`,
//! `-p /usage`, `-p /hooks`): kept so a report's folder holds what agy
//! printed, not only the facts read from it. `DIR/commands/` gets each
//! command's stdout verbatim (redacted) as `NAME.stdout` and an
//! `index.json` naming its arguments, exit code and stderr.
//!
//! fake-agy replays them as they are: `--version` and `models` through
//! every recording's header (`version_output`, `models_output`), `/usage`
//! through `FAKE_AGY_USAGE=DIR/commands/usage.stdout`. `/hooks` lists the
//! hooks of the `--add-dir` it is given, so fake-agy computes it from the
//! same hooks file rather than replaying a listing of throwaway paths.

use agy_corpus::redact::Redactor;
use serde::Serialize;
use std::path::Path;
use std::process::Output;

/// One command as it ran.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Ran {
    pub name: String,
    pub args: Vec<String>,
    pub exit_code: Option<i32>,
    /// The file under `commands/` that holds its stdout.
    pub stdout_file: String,
    pub stderr: String,
    #[serde(skip)]
    pub stdout: String,
}

impl Ran {
    pub(crate) fn new(name: &str, args: &[&str], out: &Output) -> Ran {
        Ran {
            name: name.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            exit_code: out.status.code(),
            stdout_file: format!("{name}.stdout"),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        }
    }
}

/// Write `DIR/commands/`: every command's stdout and the index, redacted
/// with `redactor` (throwaway paths, HOME, the user's name); the files
/// written, relative to `out`.
pub(crate) fn write(
    out: &Path,
    ran: &[Ran],
    redactor: &mut Redactor,
) -> std::io::Result<Vec<String>> {
    let dir = out.join("commands");
    std::fs::create_dir_all(&dir)?;
    let mut index = Vec::with_capacity(ran.len());
    let mut files = Vec::with_capacity(ran.len() + 1);
    for r in ran {
        std::fs::write(dir.join(&r.stdout_file), redactor.text(&r.stdout))?;
        files.push(format!("commands/{}", r.stdout_file));
        index.push(Ran {
            args: r.args.iter().map(|a| redactor.text(a)).collect(),
            stderr: redactor.text(&r.stderr),
            stdout: String::new(),
            ..r.clone()
        });
    }
    let json = serde_json::to_string_pretty(&index).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("index.json"), json + "\n")?;
    files.push("commands/index.json".to_string());
    Ok(files)
}
