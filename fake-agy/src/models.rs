//! What `fake-agy models` prints: agy's three historical output formats
//! (docs/agy-format.md, "agy models") in the shapes real agy gave them,
//! chosen by `FAKE_AGY_MODELS_FORMAT`, and the signed-out failure. The
//! catalog differs from agy-bridge's built-in fallback on purpose, so a test
//! can tell a catalog fake-agy printed from the fallback.

/// (slug, label), as GobbyAI/gobby's agy 1.1.20 evidence lists them (one
/// line per tier, highest first). agy 1.0.x printed only the labels.
pub const CATALOG: &[(&str, &str)] = &[
    ("gemini-3.7-flash-high", "Gemini 3.7 Flash (High)"),
    ("gemini-3.7-flash-medium", "Gemini 3.7 Flash (Medium)"),
    ("gemini-3.7-flash-low", "Gemini 3.7 Flash (Low)"),
    ("gemini-3.6-flash-high", "Gemini 3.6 Flash (High)"),
    ("gemini-3.6-flash-medium", "Gemini 3.6 Flash (Medium)"),
    ("gemini-3.6-flash-low", "Gemini 3.6 Flash (Low)"),
    ("gemini-3.5-flash-high", "Gemini 3.5 Flash (High)"),
    ("gemini-3.5-flash-medium", "Gemini 3.5 Flash (Medium)"),
    ("gemini-3.5-flash-low", "Gemini 3.5 Flash (Low)"),
    ("gemini-3.1-pro-high", "Gemini 3.1 Pro (High)"),
    ("gemini-3.1-pro-low", "Gemini 3.1 Pro (Low)"),
    ("claude-sonnet-4-6", "Claude Sonnet 4.6 (Thinking)"),
    ("claude-opus-4-6-thinking", "Claude Opus 4.6 (Thinking)"),
    ("gpt-oss-120b-medium", "GPT-OSS 120B (Medium)"),
];

/// The labels agy 1.0.10 printed (format 1), in its order: Gemini 3.5 Flash
/// low to high, then the rest.
pub const LABELS_1_0_10: &[&str] = &[
    "Gemini 3.5 Flash (Low)",
    "Gemini 3.5 Flash (Medium)",
    "Gemini 3.5 Flash (High)",
    "Gemini 3.1 Pro (Low)",
    "Gemini 3.1 Pro (High)",
    "Claude Sonnet 4.6 (Thinking)",
    "Claude Opus 4.6 (Thinking)",
    "GPT-OSS 120B (Medium)",
];

/// agy's progress line: on stderr, before the listing (format 3).
pub const PROGRESS: &str = "Fetching available models...";

/// What agy 1.1.20 prints on stderr, with exit 1 and nothing on stdout,
/// when nobody is signed in.
pub const SIGNED_OUT: &str =
    "Error: Please sign in to view available models. Launch the CLI without arguments to sign in.";

/// One `agy models` run: what goes to stdout and to stderr.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

/// The catalog in agy's output format 1, 2 or 3; `None` for another number.
pub fn render(format: u32) -> Option<Printed> {
    let mut printed = Printed::default();
    match format {
        1 => LABELS_1_0_10.iter().for_each(|label| {
            printed.stdout.push_str(label);
            printed.stdout.push('\n');
        }),
        2 => CATALOG.iter().for_each(|(slug, _)| {
            printed.stdout.push_str(slug);
            printed.stdout.push('\n');
        }),
        3 => {
            printed.stderr = format!("{PROGRESS}\n");
            for (slug, label) in CATALOG {
                printed.stdout.push_str(&format!("{slug}\t{label}\n"));
            }
        }
        _ => return None,
    }
    Some(printed)
}

/// A recording's `models_output` as real agy would print it: the progress
/// line, wherever the recording has it, goes to stderr.
pub fn split_recorded(text: &str) -> Printed {
    let mut printed = Printed::default();
    for line in text.split_inclusive('\n') {
        let to = if agy_bridge::pi::models::is_progress(line) {
            &mut printed.stderr
        } else {
            &mut printed.stdout
        };
        to.push_str(line);
    }
    printed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_3_puts_the_progress_line_on_stderr() {
        let p = render(3).expect("format 3");
        assert_eq!(p.stderr, "Fetching available models...\n");
        let first = p.stdout.lines().next().expect("a line");
        assert_eq!(first, "gemini-3.7-flash-high\tGemini 3.7 Flash (High)");
        assert_eq!(p.stdout.lines().count(), CATALOG.len());
        assert_eq!(render(1).expect("format 1").stderr, "");
        assert_eq!(render(2).expect("format 2").stdout.lines().count(), 14);
        assert_eq!(render(4), None);
    }

    #[test]
    fn a_recorded_progress_line_moves_to_stderr() {
        let p = split_recorded("Fetching available models...\na-1\tA 1\nb-2\tB 2\n");
        assert_eq!(p.stderr, "Fetching available models...\n");
        assert_eq!(p.stdout, "a-1\tA 1\nb-2\tB 2\n");
        assert_eq!(split_recorded("a-1\n").stderr, "");
    }
}
