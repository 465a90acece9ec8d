//! Parsing `agy models` stdout: all three formats agy has printed
//! (docs/agy-format.md, "agy models"), with the progress line, glog and
//! sign-in lines skipped. Where agy printed only labels (1.0.x), the slug is
//! the one a later real listing pairs with that label; spelling a label into
//! a slug is only the last resort.

use super::listed::{label_for_slug, slug_for_label};
use super::EFFORTS;
use agy_format::agy_args::Effort;

// --- parsing `agy models` ----------------------------------------------------

/// One model line of `agy models`. Format 1 gives only `display`; formats 2
/// and 3 give the slug (format 2's display is the label agy pairs with it
/// elsewhere, else one spelled from the slug).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawModel {
    /// agy's slug (what `--model` takes), when the format gives one.
    pub slug: Option<String>,
    /// The label agy shows people.
    pub display: String,
}

impl RawModel {
    /// The agy slug. For format 1 (a label only): the slug a real listing
    /// pairs with that label (`slug_for_label`); only a label no listing
    /// has is spelled into a slug (`slug_from_display`, a guess).
    pub fn slug(&self) -> String {
        match (&self.slug, slug_for_label(&self.display)) {
            (Some(slug), _) => slug.clone(),
            (None, Some(known)) => known.to_string(),
            (None, None) => slug_from_display(&self.display),
        }
    }
}

/// Parse `agy models` stdout in any of the three formats, line by line,
/// ignoring blank lines, the "Fetching available models..." progress line
/// (stderr in real agy, but first or last when the streams are merged), glog
/// lines (`I0701 12:00:00.000000 12345 file.go:157] ...`),
/// sign-in messages and any other prose.
pub fn parse_models_output(stdout: &str) -> Vec<RawModel> {
    stdout.lines().filter_map(parse_line).collect()
}

pub(super) fn parse_line(line: &str) -> Option<RawModel> {
    let line = line.trim();
    if line.is_empty() || is_progress(line) || is_glog(line) || is_sign_in(line) {
        return None;
    }
    // Format 3: `slug<TAB>Display Name` (or columns padded with spaces).
    if let Some((first, rest)) = line.split_once(|c: char| c.is_whitespace()) {
        if is_slug(first) {
            let display = rest.trim();
            let display = if display.is_empty() {
                display_from_slug(first)
            } else {
                display.to_string()
            };
            return Some(RawModel {
                slug: Some(first.to_string()),
                display,
            });
        }
    }
    // Format 2: a bare slug.
    if is_slug(line) {
        return Some(RawModel {
            slug: Some(line.to_string()),
            display: label_for_slug(line)
                .map(str::to_string)
                .unwrap_or_else(|| display_from_slug(line)),
        });
    }
    // Format 1: a display name.
    if is_display_name(line) {
        return Some(RawModel {
            slug: None,
            display: line.to_string(),
        });
    }
    None
}

/// agy's progress line, "Fetching available models...": never a model.
pub fn is_progress(line: &str) -> bool {
    line.trim()
        .to_ascii_lowercase()
        .starts_with("fetching available models")
}

/// A glog line: `[IWEF]mmdd hh:mm:ss.uuuuuu threadid file:line] msg`.
pub(super) fn is_glog(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 14
        && matches!(b[0], b'I' | b'W' | b'E' | b'F')
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' '
        && b[6..8].iter().all(u8::is_ascii_digit)
        && b[8] == b':'
}

/// agy's sign-in prompts ("Please sign in to view available models",
/// "Waiting for authentication...").
pub(crate) fn is_sign_in(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    l.contains("sign in")
        || l.contains("sign-in")
        || l.contains("signed in")
        || l.contains("log in")
        || l.contains("logged in")
        || l.contains("waiting for authentication")
        || l.contains("not authenticated")
}

/// An agy slug: lowercase `[a-z0-9._-]`, starting alphanumeric, with at least
/// one hyphen and one letter (`gemini-3.7-flash-high`, `claude-sonnet-4-6`).
/// The leading-alphanumeric rule also keeps `-x` from reaching agy as a flag.
pub(crate) fn is_slug(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '_'))
        && s.contains('-')
        && !s.contains("--")
        && !s.ends_with('-')
        && s.chars().any(|c| c.is_ascii_lowercase())
}

/// A plausible format-1 display name ("Gemini 3.5 Flash (Medium)", "Claude
/// Sonnet 4.5", "GPT-OSS 120B (Medium)") rather than prose: short, starts
/// alphanumeric, carries a version digit, no sentence or log punctuation.
pub(super) fn is_display_name(line: &str) -> bool {
    let words = line.split_whitespace().count();
    line.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && line.chars().any(|c| c.is_ascii_digit())
        && (1..=8).contains(&words)
        && !line.contains([':', '=', '/', '[', ']', '{', '}', '"', ',', ';', '!', '?'])
        && !line.ends_with('.')
        && !line.ends_with('…')
        && is_slug(&slug_from_display(line))
}

/// A guessed agy slug for a format-1 display name no real listing pairs
/// with a slug (see [`slug_for_label`] first: labels do not always spell
/// their slug). Lowercase, parentheses dropped, words joined by `-`. Gemini keeps the dot of its version
/// ("Gemini 3.5 Flash (Medium)" → `gemini-3.5-flash-medium`); other families
/// spell it with a hyphen ("Claude Sonnet 4.5" → `claude-sonnet-4-5`,
/// "GPT-OSS 120B (Medium)" → `gpt-oss-120b-medium`).
pub(crate) fn slug_from_display(display: &str) -> String {
    let lower = display.to_lowercase();
    let cleaned: String = lower
        .chars()
        .map(|c| match c {
            '(' | ')' => ' ',
            c if c.is_whitespace() || c == '_' => ' ',
            c => c,
        })
        .collect();
    let slug = cleaned.split_whitespace().collect::<Vec<_>>().join("-");
    let slug = if slug.starts_with("gemini") {
        slug
    } else {
        slug.replace('.', "-")
    };
    slug.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
        .collect::<String>()
        .split('-')
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// A display name for a format-2 slug: `gemini-3.6-flash-low` → "Gemini 3.6
/// Flash (Low)", `claude-sonnet-4-6` → "Claude Sonnet 4.6",
/// `gpt-oss-120b-medium` → "GPT-OSS 120B (Medium)".
pub(crate) fn display_from_slug(slug: &str) -> String {
    let parts = SlugParts::of(slug);
    let mut words: Vec<String> = Vec::new();
    words.push(match parts.vendor.as_str() {
        "gpt-oss" => "GPT-OSS".to_string(),
        v => capitalize(v),
    });
    let mut version_done = false;
    for w in &parts.words_in_order {
        match w {
            Word::Version if !version_done => {
                if let Some(v) = &parts.version {
                    words.push(v.clone());
                }
                version_done = true;
            }
            Word::Version => {}
            Word::Name(n) if n.chars().any(|c| c.is_ascii_digit()) => {
                words.push(n.to_ascii_uppercase())
            }
            Word::Name(n) if n == "thinking" => words.push("(Thinking)".into()),
            Word::Name(n) => words.push(capitalize(n)),
        }
    }
    if let Some(tier) = parts.tier {
        words.push(format!("({})", capitalize(tier.as_arg())));
    }
    words.join(" ")
}

pub(super) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Split `base-(low|medium|high)` into the base and its tier.
pub fn split_tier(slug: &str) -> (&str, Option<Effort>) {
    for e in EFFORTS {
        if let Some(base) = slug.strip_suffix(e.as_arg()) {
            if let Some(base) = base.strip_suffix('-') {
                if !base.is_empty() {
                    return (base, Some(e));
                }
            }
        }
    }
    (slug, None)
}

#[derive(Debug, Clone)]
pub(super) enum Word {
    Version,
    Name(String),
}

/// A slug taken apart for alias matching: vendor (`gemini`, `claude`,
/// `gpt-oss`), version (`3.7`, `4.6`), name words (`flash`, `sonnet`,
/// `120b`, `thinking`) and tier.
#[derive(Debug, Clone)]
pub(super) struct SlugParts {
    pub(super) vendor: String,
    pub(super) version: Option<String>,
    pub(super) words: Vec<String>,
    pub(super) words_in_order: Vec<Word>,
    pub(super) tier: Option<Effort>,
}

pub(super) fn is_version_token(t: &str) -> bool {
    !t.is_empty()
        && t.chars().all(|c| c.is_ascii_digit() || c == '.')
        && t.chars().next().is_some_and(|c| c.is_ascii_digit())
        && !t.ends_with('.')
}

impl SlugParts {
    pub(super) fn of(slug: &str) -> SlugParts {
        let (base, tier) = split_tier(slug);
        let tokens: Vec<&str> = base.split('-').filter(|t| !t.is_empty()).collect();
        let (vendor, rest) = match tokens.as_slice() {
            ["gpt", "oss", rest @ ..] => ("gpt-oss".to_string(), rest),
            [v, rest @ ..] => (v.to_string(), rest),
            [] => (String::new(), &[][..]),
        };
        let mut version: Option<String> = None;
        let mut words = Vec::new();
        let mut in_order = Vec::new();
        let mut i = 0;
        while i < rest.len() {
            if is_version_token(rest[i]) && version.is_none() {
                // A run of numeric tokens is one version: claude-sonnet-4-6.
                let mut run = vec![rest[i]];
                while i + 1 < rest.len() && is_version_token(rest[i + 1]) {
                    i += 1;
                    run.push(rest[i]);
                }
                version = Some(run.join("."));
                in_order.push(Word::Version);
            } else {
                words.push(rest[i].to_string());
                in_order.push(Word::Name(rest[i].to_string()));
            }
            i += 1;
        }
        SlugParts {
            vendor,
            version,
            words,
            words_in_order: in_order,
            tier,
        }
    }
}

/// Numeric version order: 3.10 > 3.9.
pub(super) fn version_key(v: Option<&str>) -> Vec<u64> {
    v.map(|v| v.split('.').map(|p| p.parse().unwrap_or(0)).collect())
        .unwrap_or_default()
}
