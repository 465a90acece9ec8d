//! Conversation ids: agy's UUIDs, validated and spelled one way, so that an
//! id can go on agy's command line or into a file name safely.

use serde::Serialize;
use std::fmt;

/// Whether `b` is a textual UUID, `8-4-4-4-12` ASCII hex digits in either
/// case (the `uuid` crate's hyphenated form; it is the only 36-byte form).
/// The one UUID check: the redactor finds ids in text with it too.
pub fn is_uuid_text(b: &[u8]) -> bool {
    b.len() == 36 && uuid::Uuid::try_parse_ascii(b).is_ok()
}

/// A string that is not a conversation id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a conversation id (expected 8-4-4-4-12 hex digits): {shown:?}")]
pub struct InvalidId {
    /// The rejected input, cut to a readable length.
    shown: String,
}

impl InvalidId {
    fn new(input: &str) -> InvalidId {
        InvalidId {
            shown: input.chars().take(64).collect(),
        }
    }

    /// The rejected input (at most 64 characters of it).
    pub fn input(&self) -> &str {
        &self.shown
    }
}

/// A conversation id: UUID-shaped, `8-4-4-4-12` ASCII hex digits, kept in
/// lowercase.
///
/// Anything else is rejected, so an id can be passed to `agy --conversation`
/// or joined onto a directory without any chance of being read as a flag
/// (`-p`, `--help`), of escaping the directory (`../x`, `a/b`) or of carrying
/// whitespace. The version nibble is not checked: agy's ids are UUIDv4, but a
/// future agy changing that must not make its own ids unusable.
///
/// UUIDs are case-insensitive and agy spells its own (and names its
/// database files) in lowercase, so an id typed in uppercase is folded to
/// lowercase once, here: agy gets the spelling it knows, and equal ids are
/// equal strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ConversationId(String);

impl ConversationId {
    /// Validate `s` as a conversation id (folded to lowercase).
    pub fn parse(s: &str) -> Result<ConversationId, InvalidId> {
        if is_uuid_text(s.as_bytes()) {
            Ok(ConversationId(s.to_ascii_lowercase()))
        } else {
            Err(InvalidId::new(s))
        }
    }

    /// The id, in lowercase.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ConversationId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for ConversationId {
    type Err = InvalidId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ConversationId::parse(s)
    }
}

impl TryFrom<&str> for ConversationId {
    type Error = InvalidId;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        ConversationId::parse(s)
    }
}
