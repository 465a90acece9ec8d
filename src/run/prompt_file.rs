//! Getting a prompt of any length to agy without `E2BIG`.
//!
//! agy takes the prompt as the value of `-p`, and Linux refuses to exec a
//! program when one argument is longer than `MAX_ARG_STRLEN` (128 KiB) or
//! argv and the environment together exceed `ARG_MAX`: the spawn fails with
//! "Argument list too long". This module owns the decision: a prompt that
//! fits (with a margin) goes inline; a longer one is written to a file in a
//! private directory of its own (0700, the file 0600), created for the turn,
//! passed to agy with `--add-dir`, and the `-p` prompt becomes a short note
//! telling agy to read that file and treat it as the user's message. The
//! directory lives exactly as long as the turn: [`Staged`] owns it and
//! removes it when dropped, whether the turn finished, failed, was aborted or
//! its future was dropped. Only when the file cannot be written does the turn
//! fail, with a sentence that gives the limit.
//!
//! Not used: agy 1.2.x's `--input-format stream-json`, which reads the user's
//! message from stdin. The only real evidence of its message shape is an
//! error capture (a message without an `event` field is rejected), which is
//! not enough to know what a valid message looks like; sending a guessed
//! shape could fail, or worse, be misread, on a real agy.

use crate::failure::Failure;
use crate::runner::{agy_args, RunConfig, Surface, TurnRequest};
use std::borrow::Cow;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Linux's cap on one argument (`MAX_ARG_STRLEN`, 32 pages of 4 KiB),
/// counting the terminating NUL.
pub const MAX_ARG_STRLEN: usize = 128 * 1024;
/// The most prompt bytes ever put in one argument: the kernel's cap minus a
/// margin, so no accounting slip can reach it.
pub const INLINE_PROMPT_MAX: usize = MAX_ARG_STRLEN - 8 * 1024;
/// Room kept free under `ARG_MAX` for what we do not count exactly (the
/// guardian's arguments, the kernel's own bookkeeping, the private
/// directory's `--add-dir`).
const TOTAL_MARGIN: usize = 64 * 1024;
/// `ARG_MAX` when `sysconf` cannot say: POSIX's minimum is far lower, but
/// Linux has never had less than this.
const ARG_MAX_FALLBACK: usize = 128 * 1024;
/// The file agy is told to read, inside the private directory.
const FILE_NAME: &str = "user-message.md";

/// `sysconf(_SC_ARG_MAX)`: the bytes argv and the environment may take
/// together (a quarter of the stack limit on Linux).
pub fn arg_max() -> usize {
    // SAFETY: sysconf has no preconditions; it only reads a limit.
    let v = unsafe { nix::libc::sysconf(nix::libc::_SC_ARG_MAX) };
    usize::try_from(v)
        .ok()
        .filter(|v| *v > 0)
        .unwrap_or(ARG_MAX_FALLBACK)
}

/// What one string costs exec: its bytes, its NUL and its pointer.
fn exec_cost(len: usize) -> usize {
    len + 1 + std::mem::size_of::<usize>()
}

/// Bytes of the environment agy will get: ours plus the runner's additions.
fn env_bytes(cfg: &RunConfig) -> usize {
    let ours: usize = std::env::vars_os()
        .map(|(k, v)| exec_cost(k.len() + 1 + v.len()))
        .sum();
    let added: usize = cfg
        .env
        .iter()
        .map(|(k, v)| exec_cost(k.len() + 1 + v.len()))
        .sum();
    let conversations =
        exec_cost("AGY_CONVERSATIONS_DIR=".len() + cfg.conversations_dir.as_os_str().len());
    ours + added + conversations
}

/// The longest prompt that can go inline for this turn: under one
/// argument's cap, and leaving argv plus environment well under `ARG_MAX`.
pub fn inline_budget(cfg: &RunConfig, req: &TurnRequest, surface: Surface) -> usize {
    let args: usize = agy_args(cfg, req, surface)
        .iter()
        .map(|a| exec_cost(a.len()))
        .sum::<usize>()
        - req.prompt.len()
        + exec_cost(cfg.agy_bin.as_os_str().len());
    let used = args + env_bytes(cfg) + TOTAL_MARGIN;
    INLINE_PROMPT_MAX.min(arg_max().saturating_sub(used))
}

/// A private directory that is removed, with its contents, when dropped.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// A fresh directory (mode 0700) under `parent`; never an existing one.
    pub fn create(parent: &Path) -> std::io::Result<PrivateDir> {
        let path = parent.join(format!("agy-bridge-prompt-{}", uuid::Uuid::new_v4()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        // agy is told an absolute path, whatever TMPDIR looks like.
        match std::fs::canonicalize(&path) {
            Ok(path) => Ok(PrivateDir { path }),
            Err(e) => {
                drop(PrivateDir { path });
                Err(e)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write `text` to a new file (mode 0600) in the directory.
    fn write(&self, name: &str, text: &str) -> std::io::Result<PathBuf> {
        let file = self.path.join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)?;
        f.write_all(text.as_bytes())?;
        f.flush()?;
        Ok(file)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The request agy actually gets, and the private directory it may need.
/// Hold it until the turn is over: dropping it removes the directory.
#[derive(Debug)]
pub struct Staged<'a> {
    request: Cow<'a, TurnRequest>,
    dir: Option<PrivateDir>,
}

impl Staged<'_> {
    pub fn request(&self) -> &TurnRequest {
        &self.request
    }

    /// The private directory holding the prompt, when it did not fit inline.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(PrivateDir::path)
    }
}

/// The `-p` prompt for a message delivered as `file`.
pub fn file_instruction(file: &Path, bytes: usize) -> String {
    format!(
        "[agy-bridge: the user's message is {bytes} bytes, too long for agy's command line, so it \
         was saved to the file {path}. Before doing anything else, read that entire file (in \
         several parts if it is long). Then treat its content as the user's message to you in \
         this turn: answer it and follow it exactly as if it had been typed here instead of this \
         note. The file is temporary and is deleted when this turn ends.]",
        path = file.display()
    )
}

/// Decide how the prompt reaches agy; see the module comment. A private
/// directory, if needed, goes in the system's temporary directory.
pub fn stage<'a>(
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
    let budget = inline_budget(cfg, req, surface);
    if req.prompt.len() <= budget {
        return Ok(Staged {
            request: Cow::Borrowed(req),
            dir: None,
        });
    }
    let too_long = |e: std::io::Error| {
        Failure::SpawnFailed {
        bin: cfg.agy_bin.display().to_string(),
        message: format!(
            "the prompt is {} KiB, more than agy's command line can take ({} KiB), and it could not be saved to a private file for agy to read ({e})",
            req.prompt.len() / 1024,
            budget / 1024
        ),
    }
    };
    let dir = PrivateDir::create(parent).map_err(too_long)?;
    let file = dir.write(FILE_NAME, &req.prompt).map_err(too_long)?;
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
    })
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

    #[test]
    fn budget_stays_under_one_argument() {
        let cfg = RunConfig::default();
        let budget = inline_budget(&cfg, &request(10), Surface::default());
        assert!(budget <= INLINE_PROMPT_MAX);
        assert!(budget + 1 < MAX_ARG_STRLEN);
    }

    #[test]
    fn a_short_prompt_stays_inline() {
        let req = request(1000);
        let staged = stage(&RunConfig::default(), &req, Surface::default()).expect("stage");
        assert!(staged.dir().is_none());
        assert_eq!(staged.request().prompt, req.prompt);
    }

    #[test]
    fn a_long_prompt_goes_to_a_private_file_that_dies_with_the_stage() {
        let req = request(200 * 1024);
        let staged = stage(&RunConfig::default(), &req, Surface::default()).expect("stage");
        let dir = staged.dir().expect("private dir").to_path_buf();
        let file = dir.join(FILE_NAME);
        assert_eq!(std::fs::read_to_string(&file).expect("file"), req.prompt);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&file), 0o600);
        let sent = staged.request();
        assert!(sent.prompt.len() < 1024, "{}", sent.prompt);
        assert!(sent.prompt.contains(&file.display().to_string()));
        assert_eq!(sent.add_dirs.last(), Some(&dir));
        drop(staged);
        assert!(!dir.exists());
    }

    #[test]
    fn an_unwritable_file_fails_with_a_sentence_giving_the_limit() {
        let req = request(200 * 1024);
        let cfg = RunConfig::default();
        let budget = inline_budget(&cfg, &req, Surface::default()) / 1024;
        let err = stage_in(
            &cfg,
            &req,
            Surface::default(),
            Path::new("/nonexistent/agy-bridge"),
        )
        .expect_err("no parent directory");
        let sentence = err.to_string();
        assert!(
            sentence.contains("the prompt is 200 KiB")
                && sentence.contains(&format!("({budget} KiB)")),
            "{sentence}"
        );
    }
}
