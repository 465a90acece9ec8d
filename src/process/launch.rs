//! What starts agy: its command line, environment additions, working
//! directory and the turn's private directories, as one [`Launch`].
//!
//! The guardian ([`crate::process::guard`]) reads it from its stdin rather than its
//! argv, so a guardian can be started before the turn knows agy's command
//! line and wait for it ([`crate::process::standby`]). It travels as a small
//! binary frame (`Launch::encode`): arguments and paths are bytes on Unix
//! and need not be UTF-8.
//!
//! After the launch frame the same pipe carries `Frame`s for agy's stdin
//! when [`Launch::stdin_piped`] asks for a pipe: bytes to write to it, in
//! order, and the end of agy's input. A turn's prompt travels this way
//! (never in agy's argv, which every local user can read), and a
//! long-lived agy can be given several turns over time the same way. The
//! pipe's end still means only one thing: the bridge is gone.

#[cfg(test)]
use std::ffi::OsStr;
use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// One program to start: agy's command line, what to add to its
/// environment, where it runs, and the turn's private directories that the
/// guardian removes once agy's tree is gone (only `agy-bridge-*` ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Launch {
    /// The program to run (agy's path).
    pub program: OsString,
    /// Its arguments, the program's name not among them.
    pub args: Vec<OsString>,
    /// Variables added to the bridge's own environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its working directory; `None` keeps the bridge's.
    pub cwd: Option<PathBuf>,
    /// The turn's private directories the guardian removes once agy's tree is gone.
    pub remove_after: Vec<PathBuf>,
    /// agy's stdin is a pipe fed by `Frame`s (else `/dev/null`).
    pub stdin_piped: bool,
}

/// The frame's item tags; [`TAG_END`] closes it.
const TAG_PROGRAM: u8 = b'p';
const TAG_ARG: u8 = b'a';
const TAG_ENV: u8 = b'e';
const TAG_CWD: u8 = b'c';
const TAG_REMOVE: u8 = b'r';
const TAG_STDIN_PIPED: u8 = b's';
const TAG_END: u8 = b'.';

/// No single item may be larger (Linux caps one argument at 128 KiB, and
/// the prompt is never one: it goes on agy's stdin or in a file), nor the
/// frame hold more items.
const ITEM_MAX: usize = 16 << 20;
const ITEMS_MAX: usize = 1 << 16;

impl Launch {
    /// `std::process::Command` for this launch (stdio left to the caller).
    pub(crate) fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        cmd
    }

    /// The frame: items of `tag (1 byte) | length (u32, little-endian) |
    /// bytes`, in any order, then the end tag. An environment item is
    /// `KEY=VALUE`.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut item = |tag: u8, bytes: &[u8]| push_item(&mut out, tag, bytes);
        item(TAG_PROGRAM, self.program.as_bytes());
        for arg in &self.args {
            item(TAG_ARG, arg.as_bytes());
        }
        for (key, value) in &self.env {
            let mut pair = key.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            item(TAG_ENV, &pair);
        }
        if let Some(cwd) = &self.cwd {
            item(TAG_CWD, cwd.as_os_str().as_bytes());
        }
        for dir in &self.remove_after {
            item(TAG_REMOVE, dir.as_os_str().as_bytes());
        }
        if self.stdin_piped {
            item(TAG_STDIN_PIPED, &[]);
        }
        out.push(TAG_END);
        out
    }

    /// Read one frame. `Ok(None)`: the input ended before the frame began
    /// (the bridge went away, or never needed this guardian).
    pub(crate) fn read_from(input: &mut impl Read) -> io::Result<Option<Launch>> {
        let mut launch = Launch::default();
        let mut program = None;
        for n in 0..ITEMS_MAX {
            let mut tag = [0u8; 1];
            match input.read_exact(&mut tag) {
                Err(e) if n == 0 && e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                other => other?,
            }
            if tag[0] == TAG_END {
                launch.program = program.ok_or_else(|| bad("the frame names no program"))?;
                return Ok(Some(launch));
            }
            let bytes = read_item(input)?;
            match tag[0] {
                TAG_PROGRAM => program = Some(OsString::from_vec(bytes)),
                TAG_ARG => launch.args.push(OsString::from_vec(bytes)),
                TAG_ENV => launch.env.push(env_pair(bytes)?),
                TAG_CWD => launch.cwd = Some(PathBuf::from(OsString::from_vec(bytes))),
                TAG_REMOVE => launch
                    .remove_after
                    .push(PathBuf::from(OsString::from_vec(bytes))),
                TAG_STDIN_PIPED => launch.stdin_piped = true,
                other => return Err(bad(&format!("unknown item tag {other:#04x}"))),
            }
        }
        Err(bad("the frame has too many items"))
    }
}

/// One item: `tag (1 byte) | length (u32, little-endian) | bytes`. Every
/// item written is under [`ITEM_MAX`] (an argument, a path, or an input
/// chunk of [`INPUT_CHUNK`]), so the length always fits.
fn push_item(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// What follows the launch frame on the guardian's stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Bytes for agy's stdin, written after those of earlier frames.
    Input(Vec<u8>),
    /// agy's input is over: its stdin is closed once the bytes before are
    /// written.
    CloseInput,
}

const TAG_INPUT: u8 = b'w';
const TAG_CLOSE_INPUT: u8 = b'z';
/// The most bytes one input frame holds: longer input is cut into several
/// frames, so the reader never allocates more than this for one.
pub(crate) const INPUT_CHUNK: usize = 1 << 20;

impl Frame {
    /// The frames that write `bytes` to agy's stdin, of any length.
    pub(crate) fn encode_input(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() + 16);
        for chunk in bytes.chunks(INPUT_CHUNK) {
            push_item(&mut out, TAG_INPUT, chunk);
        }
        out
    }

    /// The frame that closes agy's stdin.
    pub(crate) fn encode_close() -> Vec<u8> {
        let mut out = Vec::new();
        push_item(&mut out, TAG_CLOSE_INPUT, &[]);
        out
    }

    /// Read one frame. `Ok(None)`: the input ended between frames (the
    /// bridge is gone); a frame cut short or of an unknown tag is an error.
    pub(crate) fn read_from(input: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut tag = [0u8; 1];
        match input.read_exact(&mut tag) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        match tag[0] {
            TAG_INPUT => Ok(Some(Frame::Input(read_bounded(input, INPUT_CHUNK)?))),
            TAG_CLOSE_INPUT => {
                read_bounded(input, 0)?;
                Ok(Some(Frame::CloseInput))
            }
            other => Err(bad(&format!("unknown frame tag {other:#04x}"))),
        }
    }
}

fn bad(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

fn read_item(input: &mut impl Read) -> io::Result<Vec<u8>> {
    read_bounded(input, ITEM_MAX)
}

/// An item's length and bytes, refused before any allocation when the
/// length is over `max`.
fn read_bounded(input: &mut impl Read, max: usize) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len)?;
    let len = usize::try_from(u32::from_le_bytes(len)).unwrap_or(usize::MAX);
    if len > max {
        return Err(bad(&format!("an item of {len} bytes is over the limit")));
    }
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes)?;
    Ok(bytes)
}

fn env_pair(mut bytes: Vec<u8>) -> io::Result<(OsString, OsString)> {
    let eq = bytes
        .iter()
        .position(|b| *b == b'=')
        .filter(|i| *i > 0)
        .ok_or_else(|| bad("an environment item is not KEY=VALUE"))?;
    let value = bytes.split_off(eq + 1);
    bytes.pop();
    Ok((OsString::from_vec(bytes), OsString::from_vec(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Launch {
        Launch {
            program: "/usr/bin/agy".into(),
            args: vec![
                "-p".into(),
                OsStr::from_bytes(b"caf\xe9 = \x00 \n").to_os_string(),
                "".into(),
            ],
            env: vec![("AGY_CONVERSATIONS_DIR".into(), "/tmp/a=b".into())],
            cwd: Some("/work".into()),
            remove_after: vec!["/tmp/agy-bridge-1".into()],
            stdin_piped: true,
        }
    }

    #[test]
    fn a_frame_round_trips_bytes_that_are_not_utf8() {
        let launch = sample();
        let frame = launch.encode();
        let back = Launch::read_from(&mut frame.as_slice()).unwrap();
        assert_eq!(back, Some(launch));
    }

    #[test]
    fn an_input_that_ends_before_the_frame_is_no_launch() {
        assert_eq!(Launch::read_from(&mut &b""[..]).unwrap(), None);
    }

    #[test]
    fn a_cut_or_malformed_frame_is_an_error_that_says_why() {
        let frame = sample().encode();
        let cut = Launch::read_from(&mut &frame[..frame.len() - 3]).unwrap_err();
        assert_eq!(cut.kind(), io::ErrorKind::UnexpectedEof);
        let unknown = Launch::read_from(&mut &b"z\x00\x00\x00\x00."[..]).unwrap_err();
        assert!(
            unknown.to_string().contains("unknown item tag 0x7a"),
            "{unknown}"
        );
        let no_program = Launch::read_from(&mut &b"a\x01\x00\x00\x00x."[..]).unwrap_err();
        assert!(
            no_program.to_string().contains("no program"),
            "{no_program}"
        );
        let huge = Launch::read_from(&mut &b"a\xff\xff\xff\xff"[..]).unwrap_err();
        assert!(huge.to_string().contains("over the limit"), "{huge}");
        let env = Launch::read_from(&mut &b"e\x03\x00\x00\x00=ab."[..]).unwrap_err();
        assert!(env.to_string().contains("KEY=VALUE"), "{env}");
    }

    #[test]
    fn input_frames_follow_the_launch_in_order_in_bounded_chunks() {
        let long = vec![b'x'; INPUT_CHUNK * 2 + 5];
        let mut stream = sample().encode();
        stream.extend(Frame::encode_input(b"first\n"));
        stream.extend(Frame::encode_input(&long));
        stream.extend(Frame::encode_close());
        let mut input = stream.as_slice();
        assert_eq!(Launch::read_from(&mut input).unwrap(), Some(sample()));
        assert_eq!(
            Frame::read_from(&mut input).unwrap(),
            Some(Frame::Input(b"first\n".to_vec()))
        );
        let mut got = Vec::new();
        while let Some(Frame::Input(chunk)) = Frame::read_from(&mut input).unwrap() {
            assert!(chunk.len() <= INPUT_CHUNK);
            got.extend(chunk);
            if got.len() == long.len() {
                break;
            }
        }
        assert_eq!(got, long);
        assert_eq!(
            Frame::read_from(&mut input).unwrap(),
            Some(Frame::CloseInput)
        );
        assert_eq!(Frame::read_from(&mut input).unwrap(), None);
    }

    #[test]
    fn a_damaged_input_frame_is_refused_before_any_allocation() {
        let huge = Frame::read_from(&mut &b"w\xff\xff\xff\xff"[..]).unwrap_err();
        assert!(huge.to_string().contains("over the limit"), "{huge}");
        let close_with_body = Frame::read_from(&mut &b"z\x01\x00\x00\x00x"[..]).unwrap_err();
        assert!(close_with_body.to_string().contains("over the limit"));
        let unknown = Frame::read_from(&mut &b"q"[..]).unwrap_err();
        assert!(
            unknown.to_string().contains("unknown frame tag 0x71"),
            "{unknown}"
        );
        let cut = Frame::read_from(&mut &b"w\x09\x00\x00\x00ab"[..]).unwrap_err();
        assert_eq!(cut.kind(), io::ErrorKind::UnexpectedEof);
    }
}
