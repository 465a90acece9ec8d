//! What an agy binary can do, by its version and its `--help`: the one place
//! that knows which agy offers what.
//!
//! agy's surface grew over its releases, and the bridge must neither use a
//! flag an older agy rejects (exit 2, no turn) nor leave out one that
//! protects the user (a prompt starting with `/` run as a slash command).
//! Every fact here names its source in docs/agy-format.md, where the public
//! capture or changelog behind it is cited. Facts read from `--help` win over
//! version guesses: when a flag was added is not always known.

/// A parsed `agy --version`: (major, minor, patch).
pub type Version = (u32, u32, u32);

/// `--output-format stream-json`, with the conversation id on `init`
/// (docs/agy-format.md, "stream-json": seen from 1.1.8).
pub const STREAM_JSON_OUTPUT: Version = (1, 1, 8);
/// `--input-format stream-json`: one user turn per stdin line
/// (docs/agy-format.md, "stdin sessions": since 1.1.15).
pub(crate) const STREAM_JSON_INPUT: Version = (1, 1, 15);
/// `agy -p /usage --output-format json`: quota buckets without a model turn
/// (docs/agy-format.md, "Quota": 1.1.11+).
pub const USAGE_COMMAND: Version = (1, 1, 11);
/// A `-p` prompt starting with `/` runs agy's own command (`/hooks`,
/// `/usage`, ...) instead of a model turn (docs/agy-format.md, "Slash
/// commands": since about 1.1.9).
pub(crate) const SLASH_COMMANDS: Version = (1, 1, 9);
/// MCP servers from `<add-dir>/.agents/mcp_config.json` (docs/agy-format.md,
/// "MCP, corrected": loaded on 1.2.7 and 1.2.14, not on 1.1.27).
pub(crate) const MCP_FROM_ADD_DIR: Version = (1, 2, 0);
/// From here `timeout waiting for response` is a model call that timed out;
/// before it (1.1.9), it was the print timeout expiring (docs/agy-format.md,
/// "stdin sessions", on `--print-timeout`). 1.2.0 is the first version seen
/// after the change.
pub(crate) const MODEL_TIMEOUT_WORDING: Version = (1, 2, 0);

/// The flag that keeps a prompt starting with `/` a prompt
/// (docs/agy-format.md, "Slash commands in the prompt": used on 1.2.14;
/// when it was added is unknown, so `--help` decides).
pub const DISABLE_SLASH_COMMANDS: &str = "--disable-slash-commands";

/// What one agy binary offers. `version: None`: its version could not be
/// had (an agy that does not answer `--version`), so nothing version-gated
/// is used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgyFeatures {
    pub version: Option<Version>,
    /// `--help` lists [`DISABLE_SLASH_COMMANDS`].
    pub disable_slash_commands: bool,
}

impl AgyFeatures {
    /// The features of an agy whose `--version` parsed to `version` and
    /// whose `--help` printed `help`.
    pub fn from_probe(version: Option<Version>, help: &str) -> AgyFeatures {
        AgyFeatures {
            version,
            disable_slash_commands: help_lists(help, DISABLE_SLASH_COMMANDS),
        }
    }

    fn at_least(&self, v: Version) -> bool {
        self.version.is_some_and(|have| have >= v)
    }

    /// Prints its conversation id on a stream-json `init` line.
    pub fn stream_json_output(&self) -> bool {
        self.at_least(STREAM_JSON_OUTPUT)
    }

    /// Reads user turns as stream-json lines on stdin.
    pub fn stream_json_input(&self) -> bool {
        self.at_least(STREAM_JSON_INPUT)
    }

    /// Runs `-p /COMMAND` as its own command, not as a prompt.
    pub fn slash_commands(&self) -> bool {
        self.at_least(SLASH_COMMANDS)
    }

    /// Loads MCP servers from an `--add-dir` directory's `.agents/`, which
    /// is how pi's tools reach agy.
    pub fn mcp_from_add_dir(&self) -> bool {
        self.at_least(MCP_FROM_ADD_DIR)
    }

    /// `timeout waiting for response` means the print timeout expired, not
    /// the model (agy 1.1.x).
    pub fn timeout_wording_is_print_timeout(&self) -> bool {
        self.version.is_some_and(|v| v < MODEL_TIMEOUT_WORDING)
    }
}

/// Whether a `--help` text lists `flag` as a flag of its own (not as the
/// prefix of a longer one).
fn help_lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let next = help[at + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// How a prompt that starts with `/` reaches agy as a prompt when the flag
/// is not there: one leading space. agy expands a prompt as a slash command
/// only when `/` is its first character (docs/agy-format.md, "Slash
/// commands in the prompt"); the space is the smallest change that is not
/// one. A model reads the text the same.
pub fn shield_slash(prompt: &str) -> Option<String> {
    prompt.starts_with('/').then(|| format!(" {prompt}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_must_list_the_flag_itself() {
        let help = "Flags:\n      --disable-slash-commands   treat / as text\n";
        assert!(AgyFeatures::from_probe(None, help).disable_slash_commands);
        let longer = "      --disable-slash-commands-v2  something else\n";
        assert!(!AgyFeatures::from_probe(None, longer).disable_slash_commands);
        assert!(!AgyFeatures::from_probe(None, "").disable_slash_commands);
        let at_end = "--disable-slash-commands";
        assert!(AgyFeatures::from_probe(None, at_end).disable_slash_commands);
    }

    #[test]
    fn version_gates_follow_the_documented_versions() {
        let of = |v| AgyFeatures {
            version: Some(v),
            disable_slash_commands: false,
        };
        assert!(!of((1, 1, 7)).stream_json_output());
        assert!(of((1, 1, 8)).stream_json_output());
        assert!(!of((1, 1, 14)).stream_json_input());
        assert!(of((1, 1, 15)).stream_json_input());
        assert!(!of((1, 1, 27)).mcp_from_add_dir());
        assert!(of((1, 2, 7)).mcp_from_add_dir());
        assert!(of((1, 1, 9)).timeout_wording_is_print_timeout());
        assert!(!of((1, 2, 17)).timeout_wording_is_print_timeout());
        // Unknown version: nothing gated is assumed, either way.
        let unknown = AgyFeatures::default();
        assert!(!unknown.stream_json_output());
        assert!(!unknown.timeout_wording_is_print_timeout());
    }

    #[test]
    fn only_a_leading_slash_is_shielded() {
        assert_eq!(
            shield_slash("/model is wrong").as_deref(),
            Some(" /model is wrong")
        );
        assert_eq!(shield_slash("a /b"), None);
        assert_eq!(shield_slash(" /b"), None);
    }
}
