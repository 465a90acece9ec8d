//! `agy-bridge decode`: a conversation database or a recording as readable
//! steps or JSON lines; a thin shell over `agy_bridge::view::decode`.

use agy_bridge::view::decode;
use clap::Args;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// A conversation database (`<id>.db`, may be in use by agy) or a
    /// recording (`.jsonl`).
    path: PathBuf,
    /// Print one JSON object per step instead of the readable view.
    #[arg(long)]
    json: bool,
}

pub fn cmd_decode(args: DecodeArgs) -> CmdResult {
    let decoded = decode::decode_path(&args.path)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = if args.json {
        decoded.write_json_lines(&mut out)
    } else {
        decoded.write_text(&mut out)
    }
    .and_then(|_| out.flush());
    super::out::finish(written, ExitCode::SUCCESS)
}
