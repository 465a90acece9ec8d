//! How the prompt reaches agy: never in its argv.
//!
//! agy's command line is readable by every local user (`/proc/PID/cmdline`,
//! `ps`), and Linux refuses to exec a program with one argument over 128 KiB
//! (`E2BIG`). So the prompt (pi's context digest included) goes one of two
//! private ways, decided here:
//!
//! - **stdin**, for an agy that reads `--input-format stream-json` (1.1.15
//!   and later, [`AgyFeatures::stream_json_input`]) on a turn that reads its
//!   stream-json: agy gets `-p ""` and the prompt as one stream-json user
//!   line on its stdin ([`agy_format::stream_input`]; the shape verified
//!   on agy 1.2.7, `crt-1.2.7-win-loop-two-turns`, see docs/agy-format.md,
//!   "Input: `--input-format stream-json`"). No length limit.
//! - **a private file**, for every other agy (older, or of unknown
//!   version): the prompt is written to a file in a directory of its own
//!   (0700, the file 0600) created for the turn and passed to agy with
//!   `--add-dir`, and the `-p` prompt is a short note telling agy to read
//!   that file and treat it as the user's message. [`Staged`] owns the
//!   directory and removes it when dropped, whether the turn finished,
//!   failed, was aborted or its future was dropped; the guardian removes it
//!   if the bridge dies. Only when the file cannot be written does the turn
//!   fail.
//!
//! A prompt starting with `/` is kept a prompt on both ways as on the
//! command line ([`crate::runner::agy_prompt`]): whether agy expands a slash
//! command sent on stdin is not known, so it is not risked.

use crate::runner::failure::Failure;
use crate::runner::{agy_prompt, RunConfig, Surface, TurnRequest};
use agy_format::features::AgyFeatures;
use std::borrow::Cow;
use std::path::Path;

/// The file agy is told to read, inside the private directory.
const FILE_NAME: &str = "user-message.md";

use crate::state::tmp::PrivateDir;

/// The request agy actually gets, and the private directory it may need.
/// Hold it until the turn is over: dropping it removes the directory.
#[derive(Debug)]
pub(crate) struct Staged<'a> {
    request: Cow<'a, TurnRequest>,
    dir: Option<PrivateDir>,
    stdin_line: Option<String>,
}

impl Staged<'_> {
    pub(crate) fn request(&self) -> &TurnRequest {
        &self.request
    }

    /// The private directory holding the prompt, when it goes in a file.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(PrivateDir::path)
    }

    /// The stream-json line agy reads the prompt from, when it goes on
    /// agy's stdin.
    pub(crate) fn stdin_line(&self) -> Option<&str> {
        self.stdin_line.as_deref()
    }
}

/// The `-p` prompt for a message delivered as `file`.
pub(crate) fn file_instruction(file: &Path, bytes: usize) -> String {
    format!(
        "[agy-bridge: the user's message ({bytes} bytes) was saved to the file {path}, so that it \
         is not on agy's command line, where other users of this machine could read it. Before \
         doing anything else, read that entire file (in several parts if it is long). Then treat \
         its content as the user's message to you in this turn: answer it and follow it exactly as \
         if it had been typed here instead of this note. The file is temporary and is deleted \
         when this turn ends.]",
        path = file.display()
    )
}

/// Decide how the prompt reaches agy; see the module comment. A private
/// directory, if needed, goes in the system's temporary directory.
pub(crate) fn stage<'a>(
    cfg: &RunConfig,
    req: &'a TurnRequest,
    surface: Surface,
) -> Result<Staged<'a>, Failure> {
    stage_in(cfg, req, surface, &crate::state::tmp::temp_dir())
}

fn stage_in<'a>(
    cfg: &RunConfig,
    req: &'a TurnRequest,
    surface: Surface,
    parent: &Path,
) -> Result<Staged<'a>, Failure> {
    if surface.stdin_input {
        let prompt = agy_prompt(&req.prompt, surface.features);
        return Ok(Staged {
            request: Cow::Borrowed(req),
            dir: None,
            stdin_line: Some(agy_format::stream_input::user_line(&prompt)),
        });
    }
    let unsaved = |e: std::io::Error| Failure::SpawnFailed {
        bin: cfg.agy_bin.display().to_string(),
        message: format!(
            "this agy reads its prompt only from its command line, where other users of this \
             machine could read it, and the prompt ({} KiB) could not be saved to a private file \
             for agy to read instead ({e})",
            req.prompt.len() / 1024
        ),
    };
    let dir = PrivateDir::create(parent, "prompt").map_err(unsaved)?;
    let file = dir.write(FILE_NAME, &req.prompt).map_err(unsaved)?;
    let mut add_dirs = req.add_dirs.clone();
    add_dirs.push(dir.path().to_path_buf());
    let request = TurnRequest {
        prompt: file_instruction(&file, req.prompt.len()),
        add_dirs,
        ..req.clone()
    };
    Ok(Staged {
        request: Cow::Owned(request),
        dir: Some(dir),
        stdin_line: None,
    })
}

/// Whether a turn of this agy sends its prompt on stdin: agy reads
/// stream-json input, and the turn reads agy's stream-json (the `result`
/// line is when agy's input is closed).
pub(crate) fn uses_stdin(features: AgyFeatures, stream_json: bool) -> bool {
    stream_json && features.stream_json_input()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(len: usize) -> TurnRequest {
        TurnRequest {
            prompt: "x".repeat(len),
            ..TurnRequest::default()
        }
    }

    fn surface(stdin_input: bool) -> Surface {
        Surface {
            stream_json: true,
            stdin_input,
            ..Surface::default()
        }
    }

    #[test]
    fn a_prompt_of_any_length_goes_on_stdin_when_agy_reads_it() {
        let req = request(300 * 1024);
        let staged = stage(&RunConfig::default(), &req, surface(true)).expect("stage");
        assert!(staged.dir().is_none());
        assert_eq!(staged.request().prompt, req.prompt);
        let line = staged.stdin_line().expect("a stdin line");
        assert_eq!(
            agy_format::stream_input::read_user_line(line.trim_end()).as_deref(),
            Ok(req.prompt.as_str())
        );
    }

    #[test]
    fn a_short_prompt_goes_to_a_private_file_that_dies_with_the_stage() {
        let req = request(10);
        let staged = stage(&RunConfig::default(), &req, surface(false)).expect("stage");
        assert!(staged.stdin_line().is_none());
        let dir = staged.dir().expect("private dir").to_path_buf();
        let file = dir.join(FILE_NAME);
        assert_eq!(std::fs::read_to_string(&file).expect("file"), req.prompt);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&file), 0o600);
        let sent = staged.request();
        assert!(!sent.prompt.contains(&req.prompt), "{}", sent.prompt);
        assert!(sent.prompt.contains(&file.display().to_string()));
        assert_eq!(sent.add_dirs.last(), Some(&dir));
        drop(staged);
        assert!(!dir.exists());
    }

    #[test]
    fn an_unwritable_file_fails_with_a_sentence() {
        let req = request(200 * 1024);
        let err = stage_in(
            &RunConfig::default(),
            &req,
            surface(false),
            Path::new("/nonexistent/agy-bridge"),
        )
        .expect_err("no parent directory");
        let sentence = err.to_string();
        assert!(
            sentence.contains("the prompt (200 KiB) could not be saved"),
            "{sentence}"
        );
    }

    #[test]
    fn stdin_needs_both_the_agy_and_its_stream_json() {
        let of = |v| AgyFeatures {
            version: Some(v),
            disable_slash_commands: false,
        };
        assert!(uses_stdin(of((1, 1, 15)), true));
        assert!(!uses_stdin(of((1, 1, 15)), false));
        assert!(!uses_stdin(of((1, 1, 14)), true));
        assert!(!uses_stdin(AgyFeatures::default(), true));
    }
}
