//! The commands' stdout. A reader that closes the pipe early
//! (`agy-bridge run x | head -1`) has taken what it wanted: the command
//! stops quietly and exits 0, as `yes | head` is no failure of `head`'s,
//! instead of `println!`'s panic (exit 101). Every write to stdout in
//! `src/cli/` goes through here, except `stream`'s writer thread, whose
//! broken pipe `PiStream` already reads as pi having gone.

use std::io::{self, Write};
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Whether a write failed because nobody reads stdout any more.
pub fn reader_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

/// Write `text` to stdout and flush.
pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush())
}

/// The command's end after writing its output: `code` when it was written
/// or the reader is gone, an error naming any other write failure.
pub fn finish(written: io::Result<()>, code: ExitCode) -> CmdResult {
    match written {
        Ok(()) => Ok(code),
        Err(e) if reader_gone(&e) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(format!("cannot write output: {e}").into()),
    }
}

/// [`print`] then [`finish`].
pub fn print_then(text: &str, code: ExitCode) -> CmdResult {
    finish(print(text), code)
}
