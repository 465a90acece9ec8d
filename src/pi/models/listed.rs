//! The (slug, label) pairs real `agy models` listings printed. Both the
//! parser (a 1.0.x listing printed only labels) and the catalog (the
//! built-in listing when agy cannot be asked) read them, so they live
//! apart from both.

/// agy 1.1.24's own `agy models` listing, line for line: (slug, label). It
/// is the built-in catalog shown when agy cannot be asked, and with
/// [`LISTED_BEFORE_1_1_24`] the table that maps a 1.0.x label to its slug.
/// Source: real `agy models` stdout "as of agy v1.1.24, captured live", as
/// published in a public project's test suite; GobbyAI/gobby's agy 1.1.20
/// evidence lists the same pairs apart from Gemini 3.8 (docs/agy-format.md,
/// "agy models"). Note the labels that do not spell their slug:
/// `claude-sonnet-4-6` is "Claude Sonnet 4.6 (Thinking)".
pub(crate) const LISTING_1_1_24: &[(&str, &str)] = &[
    ("gemini-3.8-flash-high", "Gemini 3.8 Flash (High)"),
    ("gemini-3.8-flash-medium", "Gemini 3.8 Flash (Medium)"),
    ("gemini-3.8-flash-low", "Gemini 3.8 Flash (Low)"),
    ("gemini-3.7-flash-high", "Gemini 3.7 Flash (High)"),
    ("gemini-3.7-flash-medium", "Gemini 3.7 Flash (Medium)"),
    ("gemini-3.7-flash-low", "Gemini 3.7 Flash (Low)"),
    ("gemini-3.6-flash-high", "Gemini 3.6 Flash (High)"),
    ("gemini-3.6-flash-medium", "Gemini 3.6 Flash (Medium)"),
    ("gemini-3.6-flash-low", "Gemini 3.6 Flash (Low)"),
    ("gemini-3.1-pro-high", "Gemini 3.1 Pro (High)"),
    ("gemini-3.1-pro-low", "Gemini 3.1 Pro (Low)"),
    ("claude-sonnet-4-6", "Claude Sonnet 4.6 (Thinking)"),
    ("claude-opus-4-6-thinking", "Claude Opus 4.6 (Thinking)"),
    ("gpt-oss-120b-medium", "GPT-OSS 120B (Medium)"),
];

/// Pairs a real listing older than 1.1.24 shows and 1.1.24 no longer does:
/// Gemini 3.5 Flash, as GobbyAI/gobby's agy 1.1.20 evidence lists it (the
/// labels agy 1.0.10 printed without slugs).
pub(crate) const LISTED_BEFORE_1_1_24: &[(&str, &str)] = &[
    ("gemini-3.5-flash-high", "Gemini 3.5 Flash (High)"),
    ("gemini-3.5-flash-medium", "Gemini 3.5 Flash (Medium)"),
    ("gemini-3.5-flash-low", "Gemini 3.5 Flash (Low)"),
];

fn listed_pairs() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    LISTING_1_1_24.iter().chain(LISTED_BEFORE_1_1_24)
}

/// The slug a real agy listing pairs with `label` (exact label, any case).
pub(crate) fn slug_for_label(label: &str) -> Option<&'static str> {
    let label = label.trim();
    listed_pairs()
        .find(|(_, l)| l.eq_ignore_ascii_case(label))
        .map(|(slug, _)| *slug)
}

/// The label a real agy listing gives `slug`.
pub(crate) fn label_for_slug(slug: &str) -> Option<&'static str> {
    listed_pairs()
        .find(|(s, _)| *s == slug.trim())
        .map(|(_, label)| *label)
}
