//! What starts agy: its command line, environment additions, working
//! directory and the turn's private directories, as one [`Launch`].
//!
//! The guardian ([`crate::guard`]) reads it from its stdin rather than its
//! argv, so a guardian can be started before the turn knows agy's command
//! line and wait for it ([`crate::run::standby`]). It travels as a small
//! binary frame ([`Launch::encode`]): arguments and paths are bytes on Unix
//! and need not be UTF-8.

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
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: Option<PathBuf>,
    pub remove_after: Vec<PathBuf>,
}

/// The frame's item tags; [`TAG_END`] closes it.
const TAG_PROGRAM: u8 = b'p';
const TAG_ARG: u8 = b'a';
const TAG_ENV: u8 = b'e';
const TAG_CWD: u8 = b'c';
const TAG_REMOVE: u8 = b'r';
const TAG_END: u8 = b'.';

/// No single item may be larger (Linux caps one argument at 128 KiB; a
/// prompt too long for that goes in a file), nor the frame hold more items.
const ITEM_MAX: usize = 16 << 20;
const ITEMS_MAX: usize = 1 << 16;

impl Launch {
    /// `std::process::Command` for this launch (stdio left to the caller).
    pub fn command(&self) -> std::process::Command {
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
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut item = |tag: u8, bytes: &[u8]| {
            out.push(tag);
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
        };
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
        out.push(TAG_END);
        out
    }

    /// Read one frame. `Ok(None)`: the input ended before the frame began
    /// (the bridge went away, or never needed this guardian).
    pub fn read_from(input: &mut impl Read) -> io::Result<Option<Launch>> {
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
                other => return Err(bad(&format!("unknown item tag {other:#04x}"))),
            }
        }
        Err(bad("the frame has too many items"))
    }
}

fn bad(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

fn read_item(input: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > ITEM_MAX {
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
}
