//! The built-in model catalog `fake-agy models` prints when
//! `FAKE_AGY_MODELS_FORMAT` asks for one of agy's three output formats
//! (docs/agy-format.md, "agy models").

/// (slug, display name).
pub const CATALOG: &[(&str, &str)] = &[
    ("gemini-3.6-flash-low", "Gemini 3.6 Flash (Low)"),
    ("gemini-3.6-flash-medium", "Gemini 3.6 Flash (Medium)"),
    ("gemini-3.6-flash-high", "Gemini 3.6 Flash (High)"),
    ("gemini-3.6-pro-low", "Gemini 3.6 Pro (Low)"),
    ("gemini-3.6-pro-medium", "Gemini 3.6 Pro (Medium)"),
    ("gemini-3.6-pro-high", "Gemini 3.6 Pro (High)"),
    ("claude-sonnet-4-6", "Claude Sonnet 4.6"),
    ("claude-opus-4-6", "Claude Opus 4.6"),
    ("gpt-oss-120b", "GPT-OSS 120B"),
];

/// The preamble line format 3 prints first.
pub const PREAMBLE: &str = "Fetching available models...";

/// What agy's sign-in check prints (stderr) when nobody is signed in.
pub const SIGNED_OUT: &str = "Please sign in to view available models";

/// The catalog in agy's output format 1, 2 or 3; `None` for another number.
pub fn render(format: u32) -> Option<String> {
    let mut out = String::new();
    match format {
        1 => CATALOG.iter().for_each(|(_, name)| {
            out.push_str(name);
            out.push('\n');
        }),
        2 => CATALOG.iter().for_each(|(slug, _)| {
            out.push_str(slug);
            out.push('\n');
        }),
        3 => {
            out.push_str(PREAMBLE);
            out.push('\n');
            for (slug, name) in CATALOG {
                out.push_str(&format!("{slug}\t{name}\n"));
            }
        }
        _ => return None,
    }
    Some(out)
}
