//! Synthesized recordings: the corpus built in code from docs/agy-format.md.
//!
//! No real agy is available to CI, so the corpus in `recordings/` is written by
//! this module and checked against it by a test (`tests/corpus.rs`), which can
//! also regenerate it (`AGY_BRIDGE_UPDATE_CORPUS=1`). Every payload goes through
//! the library's own encoder ([`agy_format::steps::encode_step`]), and every commit
//! is shaped like agy's: one row per step, rewritten in place as it grows, with
//! realistic gaps between commits.
//!
//! Its own crate, and only ever a dev-dependency (of agy-bridge's tests and
//! benches, and of fake-agy's tests), so the agy-bridge binary cannot link
//! the generators. It builds on [`agy_corpus`] and [`agy_format`] alone.
//!
//! The parts: [`builder`] (one recording commit by commit), [`bulk`]
//! (recordings built to size for benches), the corpus's own recordings
//! (private `scenarios` and `outcomes`, listed by [`corpus`]) and [`mcp`]
//! (recordings that call an MCP server, in `recordings/mcp/`; pi's are
//! checked by `tests/mcp_stream.rs`, the editor's is in [`corpus`]).

#![forbid(unsafe_code)]

use agy_corpus::recording::Recording;

pub mod builder;
pub mod bulk;
pub mod mcp;
mod outcomes;
mod scenarios;

/// `agy models` stdout as agy 1.2.8 prints it (format 3); its progress line,
/// "Fetching available models...", goes to stderr (docs/agy-format.md,
/// "agy models").
pub const MODELS_FORMAT_3: &str = "\
gemini-3.7-flash-low\tGemini 3.7 Flash (Low)\n\
gemini-3.7-flash-medium\tGemini 3.7 Flash (Medium)\n\
gemini-3.7-flash-high\tGemini 3.7 Flash (High)\n\
gemini-3.7-pro-low\tGemini 3.7 Pro (Low)\n\
gemini-3.7-pro-high\tGemini 3.7 Pro (High)\n\
claude-sonnet-4-6\tClaude Sonnet 4.6\n\
claude-opus-4-6\tClaude Opus 4.6\n\
gpt-oss-120b-medium\tGPT-OSS 120B (Medium)\n";

/// `agy models` as agy 1.1.5 .. 1.1.x prints it (format 2).
pub const MODELS_FORMAT_2: &str = "gemini-3.6-flash-low\n\
gemini-3.6-flash-medium\n\
gemini-3.6-flash-high\n\
gemini-3.6-pro-high\n\
claude-sonnet-4-6\n\
claude-opus-4-6\n\
gpt-oss-120b-medium\n";

/// `agy models` before 1.1.5 (format 1: display names).
pub const MODELS_FORMAT_1: &str = "Gemini 3.5 Flash (Low)\n\
Gemini 3.5 Flash (Medium)\n\
Gemini 3.5 Flash (High)\n\
Gemini 3.5 Pro (High)\n\
Claude Sonnet 4.5\n\
GPT-OSS 120B (Medium)\n";

pub(crate) const WORKSPACE: &str = "/home/dev/project";
pub(crate) const MODEL: &str = "gemini-3.7-flash-medium";

/// A deterministic UUIDv4-shaped id derived from a name, so regenerating the
/// corpus gives identical files.
pub(crate) fn stable_uuid(name: &str) -> String {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in name.bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    let hex = format!("{h:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The corpus's `tools` recording as agy would write it running in
/// `workspace` (absolute): every path its tools name lies under it, so a
/// test can replay it on a real directory and let fake-agy apply its edit
/// (`FAKE_AGY_APPLY_EDITS`). The corpus's own `tools` is this in
/// `/home/dev/project`.
pub fn tools_in(workspace: &str) -> Recording {
    scenarios::tools_in(workspace)
}

/// What `src/lib.rs` holds before [`tools_in`]'s edit (its `view_file`
/// shows this text; the edit makes `(0..n)` `(0..=n)`).
pub use scenarios::TOOLS_LIB_RS;

/// Every corpus recording, by name (a name may have a directory:
/// `outcomes/...`).
pub fn corpus() -> Vec<(&'static str, Recording)> {
    vec![
        ("hello", scenarios::hello()),
        ("thinking", scenarios::thinking()),
        ("tools", scenarios::tools()),
        ("resume", scenarios::resume()),
        ("unicode", scenarios::unicode()),
        ("quota-error", scenarios::quota_error()),
        ("long-answer", scenarios::long_answer()),
        ("subagent", scenarios::subagent()),
        ("unknown-steps", scenarios::unknown_steps()),
        ("placeholder", scenarios::placeholder()),
        ("equal-rewrite", scenarios::equal_rewrite()),
        ("permission", scenarios::permission()),
        ("web-tools", scenarios::web_tools()),
        ("orchestration", scenarios::orchestration()),
        ("models-v1", scenarios::models_v1()),
        ("models-v2", scenarios::models_v2()),
        ("stdin-two-turns", scenarios::stdin_two_turns()),
        ("mcp/editor-tool", mcp::editor_tool()),
    ]
    .into_iter()
    .chain(outcomes::corpus())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether any value `rec` writes, or its header, holds `needle`.
    fn mentions(rec: &Recording, needle: &str) -> bool {
        use agy_corpus::recording::SqlValue;
        let bytes = needle.as_bytes();
        let holds = |v: &SqlValue| match v {
            SqlValue::Text(t) => t.contains(needle),
            SqlValue::Blob(b) => b.windows(bytes.len()).any(|w| w == bytes),
            _ => false,
        };
        rec.header.workspace.as_deref() == Some(needle)
            || rec
                .commits
                .iter()
                .flat_map(|c| &c.writes)
                .flat_map(|w| w.key.values().chain(w.values.values()))
                .any(holds)
    }

    #[test]
    fn tools_in_a_workspace_names_only_that_workspace() {
        let elsewhere = tools_in("/tmp/x/work");
        assert_eq!(elsewhere.header.workspace.as_deref(), Some("/tmp/x/work"));
        assert!(mentions(&elsewhere, "/tmp/x/work/src/lib.rs"));
        assert!(!mentions(&elsewhere, WORKSPACE));
        // The check sees the corpus's own workspace where it is.
        assert!(mentions(&corpus_tools(), WORKSPACE));
    }

    fn corpus_tools() -> Recording {
        corpus()
            .into_iter()
            .find_map(|(name, rec)| (name == "tools").then_some(rec))
            .expect("tools is in the corpus")
    }

    #[test]
    fn models_formats_of_the_corpus() {
        let format = agy_corpus::drift::models_format;
        assert_eq!(format(MODELS_FORMAT_1), Some("1"));
        assert_eq!(format(MODELS_FORMAT_2), Some("2"));
        assert_eq!(format(MODELS_FORMAT_3), Some("3"));
    }
}
