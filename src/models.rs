//! agy's model catalog: `agy models` parsed (all three output formats of
//! agy-format.md §7), folded into pi models, cached, and resolved.
//!
//! - [`parse_models_output`] reads `agy models` stdout, skipping preamble,
//!   glog and sign-in lines.
//! - [`Catalog::from_raw`] folds Gemini tiers (`gemini-3.7-flash-low/-high`)
//!   into one model whose id is the base slug (`gemini-3.7-flash`) and whose
//!   efforts are the tiers agy listed. Everything else is a *fixed* model
//!   keyed by agy's own slug; fixed models never get `--effort` (Claude and
//!   GPT-OSS reject it).
//! - [`Catalog::resolve`] turns a pi model id and pi thinking level into the
//!   `--model` / `--effort` pair, as the TypeScript original does: a Gemini
//!   base slug is passed with `--effort` (always: a base slug is not valid on
//!   its own), the level clamped to the tiers that base offers.
//! - [`Catalog::resolve_alias`] resolves AskAntigravity's friendly names
//!   (`flash`, `pro high`, `3.5 flash low`, `sonnet 4.6`, an exact slug...).
//! - [`Loader`] runs `agy models` (8 s, process group killed) behind a 5
//!   minute cache in `models-cache.json`, with a built-in fallback catalog
//!   when agy is missing, signed out, hung or broken.

use crate::runner::Effort;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// pi's provider id for these models.
pub const PI_PROVIDER: &str = "antigravity";
/// The custom pi `api` string of every model we emit. No built-in pi
/// provider claims it; the pi extension registers its `streamSimple` under
/// the same string. (The TypeScript original used the same sentinel.)
pub const PI_API: &str = "agy-bridge";
/// pi requires a non-empty `baseUrl`; nothing ever connects to it.
pub const PI_BASE_URL: &str = "agy-bridge://antigravity";

/// How long `agy models` may run before its process group is killed.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(8);
/// How long a cached catalog from agy is served without a refresh.
pub const CACHE_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a failed `agy models` is remembered, so a hung or signed-out agy
/// costs at most one slow call per minute instead of one per pi start.
pub const FAILURE_TTL: Duration = Duration::from_secs(60);
/// A background refresh younger than this is not started again.
const REFRESH_LOCK_TTL: Duration = Duration::from_secs(30);

/// The cache file name inside the state directory.
pub const CACHE_FILE: &str = "models-cache.json";

// --- pi thinking levels ------------------------------------------------------

/// pi's thinking levels (`ModelThinkingLevel` of pi-ai 0.84.0:
/// `"off" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

impl ThinkingLevel {
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }
}

impl fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ThinkingLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ThinkingLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                format!(
                    "unknown thinking level {s:?} (expected off, minimal, low, medium, high, xhigh or max)"
                )
            })
    }
}

impl<'de> serde::Deserialize<'de> for ThinkingLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

const EFFORTS: [Effort; 3] = [Effort::Low, Effort::Medium, Effort::High];

fn rank(e: Effort) -> i32 {
    match e {
        Effort::Low => 0,
        Effort::Medium => 1,
        Effort::High => 2,
    }
}

/// The tier nearest to `want` among `offered`; a tie goes to the higher tier
/// (pi's own `clampThinkingLevel` searches upward first, and so did the
/// original). `None` when nothing is offered.
pub fn nearest_effort(offered: &[Effort], want: Effort) -> Option<Effort> {
    offered
        .iter()
        .copied()
        .min_by_key(|e| ((rank(*e) - rank(want)).abs(), -rank(*e)))
}

/// Clamp a pi thinking level to the tiers a model offers. `off`, `minimal`
/// and no level at all pick the lowest tier (a Gemini base slug needs some
/// effort); `xhigh` and `max` pick the highest; a missing tier goes to the
/// nearest one, ties upward. `None` for a fixed model (no tiers).
pub fn clamp_effort(offered: &[Effort], level: Option<ThinkingLevel>) -> Option<Effort> {
    let lowest = offered.iter().copied().min()?;
    let highest = offered.iter().copied().max()?;
    match level {
        None | Some(ThinkingLevel::Off) | Some(ThinkingLevel::Minimal) => Some(lowest),
        Some(ThinkingLevel::Xhigh) | Some(ThinkingLevel::Max) => Some(highest),
        Some(ThinkingLevel::Low) => nearest_effort(offered, Effort::Low),
        Some(ThinkingLevel::Medium) => nearest_effort(offered, Effort::Medium),
        Some(ThinkingLevel::High) => nearest_effort(offered, Effort::High),
    }
}

// --- parsing `agy models` ----------------------------------------------------

/// One model line of `agy models`. Format 1 gives only `display`; formats 2
/// and 3 give the slug (format 2's display is derived from the slug).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawModel {
    pub slug: Option<String>,
    pub display: String,
}

impl RawModel {
    /// The agy slug, derived from the display name for format 1.
    pub fn slug(&self) -> String {
        self.slug
            .clone()
            .unwrap_or_else(|| slug_from_display(&self.display))
    }
}

/// Parse `agy models` stdout in any of the three formats (agy-format.md §7),
/// line by line, ignoring blank lines, the "Fetching available models..."
/// preamble, glog lines (`I0701 12:00:00.000000 12345 file.go:157] ...`),
/// sign-in messages and any other prose.
pub fn parse_models_output(stdout: &str) -> Vec<RawModel> {
    stdout.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<RawModel> {
    let line = line.trim();
    if line.is_empty() || is_glog(line) || is_sign_in(line) {
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
            display: display_from_slug(line),
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

/// A glog line: `[IWEF]mmdd hh:mm:ss.uuuuuu threadid file:line] msg`.
fn is_glog(line: &str) -> bool {
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
pub fn is_sign_in(line: &str) -> bool {
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
pub fn is_slug(s: &str) -> bool {
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
fn is_display_name(line: &str) -> bool {
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

/// The agy slug for a format-1 display name: lowercase, parentheses dropped,
/// words joined by `-`. Gemini keeps the dot of its version
/// ("Gemini 3.5 Flash (Medium)" → `gemini-3.5-flash-medium`); other families
/// spell it with a hyphen ("Claude Sonnet 4.5" → `claude-sonnet-4-5`,
/// "GPT-OSS 120B (Medium)" → `gpt-oss-120b-medium`).
pub fn slug_from_display(display: &str) -> String {
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
pub fn display_from_slug(slug: &str) -> String {
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

fn capitalize(s: &str) -> String {
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
enum Word {
    Version,
    Name(String),
}

/// A slug taken apart for alias matching: vendor (`gemini`, `claude`,
/// `gpt-oss`), version (`3.7`, `4.6`), name words (`flash`, `sonnet`,
/// `120b`, `thinking`) and tier.
#[derive(Debug, Clone)]
struct SlugParts {
    vendor: String,
    version: Option<String>,
    words: Vec<String>,
    words_in_order: Vec<Word>,
    tier: Option<Effort>,
}

fn is_version_token(t: &str) -> bool {
    !t.is_empty()
        && t.chars().all(|c| c.is_ascii_digit() || c == '.')
        && t.chars().next().is_some_and(|c| c.is_ascii_digit())
        && !t.ends_with('.')
}

impl SlugParts {
    fn of(slug: &str) -> SlugParts {
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
fn version_key(v: Option<&str>) -> Vec<u64> {
    v.map(|v| v.split('.').map(|p| p.parse().unwrap_or(0)).collect())
        .unwrap_or_default()
}

// --- the catalog ----------------------------------------------------------------

/// One pi model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Model {
    /// The pi model id, an agy slug: the base slug for an effort model
    /// (`gemini-3.7-flash`), agy's own slug for a fixed one.
    pub id: String,
    /// Display name ("Gemini 3.7 Flash", "Claude Sonnet 4.6").
    pub name: String,
    /// The tiers agy offers, low to high. Empty: a fixed model that never
    /// gets `--effort`.
    pub efforts: Vec<Effort>,
    /// What to pass as `--model`: for an effort model the base slug (always
    /// with `--effort`), for a fixed model its slug. Equal to `id`.
    pub slug: String,
    /// The full per-tier slugs agy listed (`gemini-3.7-flash-high`...), in
    /// the order of `efforts`; empty for a fixed model.
    pub tier_slugs: Vec<String>,
    /// A reasoning model: it has efforts, its name says "Thinking", or its
    /// slug carries a fixed tier (`gpt-oss-120b-medium`).
    pub thinking: bool,
}

/// Model families, for context sizes and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Gemini,
    Claude,
    GptOss,
    Other,
}

impl Model {
    /// A fixed model: no tiers, never `--effort`.
    pub fn is_fixed(&self) -> bool {
        self.efforts.is_empty()
    }

    pub fn family(&self) -> Family {
        if self.id.starts_with("gemini") {
            Family::Gemini
        } else if self.id.starts_with("claude") {
            Family::Claude
        } else if self.id.starts_with("gpt-oss") {
            Family::GptOss
        } else {
            Family::Other
        }
    }

    /// The tier a fixed model's slug carries (`gpt-oss-120b-medium`).
    pub fn fixed_tier(&self) -> Option<Effort> {
        if self.is_fixed() {
            split_tier(&self.slug).1
        } else {
            None
        }
    }

    /// The full tier slug for `effort` (`gemini-3.7-flash-high`).
    pub fn tier_slug(&self, effort: Effort) -> Option<&str> {
        self.efforts
            .iter()
            .position(|e| *e == effort)
            .and_then(|i| self.tier_slugs.get(i))
            .map(String::as_str)
    }

    /// (context window, max output tokens). agy does not report them; these
    /// are the families' documented sizes.
    pub fn limits(&self) -> (u64, u64) {
        match self.family() {
            Family::Gemini => (1_048_576, 65_536),
            Family::Claude => (200_000, 64_000),
            Family::GptOss => (131_072, 32_768),
            Family::Other => (131_072, 32_768),
        }
    }

    /// The pi `Model<Api>` object for this model.
    pub fn to_pi(&self) -> PiModel {
        let (context_window, max_tokens) = self.limits();
        PiModel {
            id: self.id.clone(),
            name: self.name.clone(),
            api: PI_API,
            provider: PI_PROVIDER,
            base_url: PI_BASE_URL,
            reasoning: self.thinking,
            thinking_level_map: self.thinking_level_map(),
            input: &["text"],
            cost: PiCost::default(),
            context_window,
            max_tokens,
        }
    }

    /// pi's `thinkingLevelMap`: each offered tier maps to itself, every other
    /// level is `null` (hidden in pi's picker, see `getSupportedThinkingLevels`),
    /// so pi's toggle shows exactly agy's tiers. A fixed reasoning model shows
    /// the one level it always runs at (its slug's tier, else `high`); a fixed
    /// non-reasoning model has no map (`reasoning: false` shows only `off`).
    fn thinking_level_map(&self) -> Option<ThinkingLevelMap> {
        let offered: Vec<Effort> = if !self.is_fixed() {
            self.efforts.clone()
        } else if self.thinking {
            vec![self.fixed_tier().unwrap_or(Effort::High)]
        } else {
            return None;
        };
        let level = |e: Effort| offered.contains(&e).then(|| e.as_arg().to_string());
        Some(ThinkingLevelMap {
            off: None,
            minimal: None,
            low: level(Effort::Low),
            medium: level(Effort::Medium),
            high: level(Effort::High),
            xhigh: None,
            max: None,
        })
    }
}

/// pi-ai 0.84.0 `Model<Api>` (dist/types.d.ts `interface Model`), as JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiModel {
    pub id: String,
    pub name: String,
    pub api: &'static str,
    pub provider: &'static str,
    pub base_url: &'static str,
    pub reasoning: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<ThinkingLevelMap>,
    pub input: &'static [&'static str],
    pub cost: PiCost,
    pub context_window: u64,
    pub max_tokens: u64,
}

/// pi-ai's `ThinkingLevelMap` (`Partial<Record<ModelThinkingLevel, string |
/// null>>`); `null` marks a level unsupported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThinkingLevelMap {
    pub off: Option<String>,
    pub minimal: Option<String>,
    pub low: Option<String>,
    pub medium: Option<String>,
    pub high: Option<String>,
    pub xhigh: Option<String>,
    pub max: Option<String>,
}

/// pi-ai's `ModelCost`: all zero (agy bills through the user's subscription).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// What to run for a pi model id or an alias: `--model` and maybe `--effort`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// The catalog id (pi model id).
    pub id: String,
    /// The catalog's display name.
    pub name: String,
    /// Pass as `--model`.
    pub model: String,
    /// Pass as `--effort`; always `None` for a fixed model.
    pub effort: Option<Effort>,
    /// The equivalent full tier slug (`gemini-3.7-flash-high`), for display.
    pub tier_slug: Option<String>,
}

/// Why a model id or alias did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model {given:?}; available models: {}", choices.join(", "))]
    UnknownModel { given: String, choices: Vec<String> },
    #[error("unknown model alias {given:?} ({reason}); choose one of: {}", choices.join(", "))]
    UnknownAlias {
        given: String,
        reason: String,
        choices: Vec<String>,
    },
    #[error("model {given:?} starts with \"-\" and is not a valid model name")]
    Invalid { given: String },
}

/// The models, in agy's order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Catalog {
    pub models: Vec<Model>,
}

/// The built-in catalog used when `agy models` cannot be had (same entries
/// as the original's fallback plus its AskAntigravity overlay): slugs known
/// to work with agy.
const FALLBACK: &[(&str, &str, &[Effort])] = &[
    (
        "gemini-3.7-flash",
        "Gemini 3.7 Flash",
        &[Effort::Low, Effort::Medium, Effort::High],
    ),
    (
        "gemini-3.1-pro",
        "Gemini 3.1 Pro",
        &[Effort::Low, Effort::High],
    ),
    ("claude-sonnet-4-6", "Claude Sonnet 4.6 (Thinking)", &[]),
    ("claude-opus-4-6", "Claude Opus 4.6 (Thinking)", &[]),
    ("gpt-oss-120b-medium", "GPT-OSS 120B (Medium)", &[]),
];

/// The short aliases AskAntigravity documents.
pub const ALIASES: &[&str] = &["flash", "pro", "gemini", "sonnet", "opus", "gpt-oss"];

fn strip_tier_suffix(display: &str) -> String {
    let d = display.trim();
    for e in EFFORTS {
        let suffix = format!("({})", e.as_arg());
        if d.len() > suffix.len() && d.to_lowercase().ends_with(&suffix) {
            return d[..d.len() - suffix.len()].trim_end().to_string();
        }
    }
    d.to_string()
}

fn is_thinking_name(s: &str) -> bool {
    s.to_lowercase().contains("thinking")
}

impl Catalog {
    /// Parse `agy models` output and fold it ([`parse_models_output`] then
    /// [`Catalog::from_raw`]).
    pub fn from_output(stdout: &str) -> Catalog {
        Catalog::from_raw(&parse_models_output(stdout))
    }

    /// Fold parsed lines into models. A Gemini base listed with two or more
    /// tiers becomes one effort model (id = base slug, efforts = the tiers
    /// listed); every other slug (Claude, GPT-OSS, a Gemini base with a
    /// single tier) is a fixed model under agy's own slug. First-seen order
    /// is kept; duplicate slugs are dropped.
    pub fn from_raw(raw: &[RawModel]) -> Catalog {
        struct Group {
            base: String,
            lines: Vec<(String, String, Option<Effort>)>,
        }
        let mut groups: Vec<Group> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for r in raw {
            let slug = r.slug();
            if !is_slug(&slug) || !seen.insert(slug.clone()) {
                continue;
            }
            let (base, tier) = split_tier(&slug);
            let entry = (slug.clone(), r.display.trim().to_string(), tier);
            match groups.iter_mut().find(|g| g.base == base) {
                Some(g) => g.lines.push(entry),
                None => groups.push(Group {
                    base: base.to_string(),
                    lines: vec![entry],
                }),
            }
        }
        let mut models = Vec::new();
        for g in groups {
            let mut tiers: Vec<(Effort, String, String)> = g
                .lines
                .iter()
                .filter_map(|(s, d, t)| t.map(|t| (t, s.clone(), d.clone())))
                .collect();
            tiers.sort_by_key(|(t, _, _)| *t);
            if g.base.starts_with("gemini-") && tiers.len() >= 2 {
                let name = tiers
                    .iter()
                    .map(|(_, _, d)| strip_tier_suffix(d))
                    .find(|n| !n.is_empty())
                    .unwrap_or_else(|| display_from_slug(&g.base));
                models.push(Model {
                    id: g.base.clone(),
                    name,
                    efforts: tiers.iter().map(|(t, _, _)| *t).collect(),
                    slug: g.base.clone(),
                    tier_slugs: tiers.iter().map(|(_, s, _)| s.clone()).collect(),
                    thinking: true,
                });
            } else {
                for (slug, display, tier) in g.lines {
                    let thinking =
                        tier.is_some() || is_thinking_name(&slug) || is_thinking_name(&display);
                    models.push(Model {
                        id: slug.clone(),
                        name: if display.is_empty() {
                            display_from_slug(&slug)
                        } else {
                            display
                        },
                        efforts: Vec::new(),
                        slug,
                        tier_slugs: Vec::new(),
                        thinking,
                    });
                }
            }
        }
        Catalog { models }
    }

    /// The built-in fallback catalog.
    pub fn fallback() -> Catalog {
        let models = FALLBACK
            .iter()
            .map(|(slug, name, efforts)| Model {
                id: slug.to_string(),
                name: name.to_string(),
                efforts: efforts.to_vec(),
                slug: slug.to_string(),
                tier_slugs: efforts
                    .iter()
                    .map(|e| format!("{slug}-{}", e.as_arg()))
                    .collect(),
                thinking: !efforts.is_empty()
                    || is_thinking_name(name)
                    || split_tier(slug).1.is_some(),
            })
            .collect();
        Catalog { models }
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    pub fn ids(&self) -> Vec<String> {
        self.models.iter().map(|m| m.id.clone()).collect()
    }

    /// The pi model objects, in order.
    pub fn to_pi(&self) -> Vec<PiModel> {
        self.models.iter().map(Model::to_pi).collect()
    }

    /// A model by id, or by something naming it: one of its tier slugs
    /// (with that tier), its display name (any case), or the original's
    /// punctuation-free id (`gemini-3-7-flash`), so old configs keep working.
    pub fn find(&self, name: &str) -> Option<(&Model, Option<Effort>)> {
        let name = name.trim();
        if let Some(m) = self.models.iter().find(|m| m.id == name) {
            return Some((m, None));
        }
        for m in &self.models {
            if let Some(i) = m.tier_slugs.iter().position(|s| s == name) {
                return Some((m, m.efforts.get(i).copied()));
            }
        }
        let lower = name.to_lowercase();
        if let Some(m) = self.models.iter().find(|m| m.name.to_lowercase() == lower) {
            return Some((m, None));
        }
        // A display name with a tier: "Gemini 3.7 Flash (High)".
        let stripped = strip_tier_suffix(name).to_lowercase();
        if stripped != lower {
            let (_, tier) = split_tier(&slug_from_display(name));
            if let Some(m) = self
                .models
                .iter()
                .find(|m| m.name.to_lowercase() == stripped)
            {
                return Some((m, tier.filter(|t| m.efforts.contains(t))));
            }
        }
        let flat = flatten(name);
        if flat.is_empty() {
            return None;
        }
        if let Some(m) = self.models.iter().find(|m| flatten(&m.id) == flat) {
            return Some((m, None));
        }
        for m in &self.models {
            if let Some(i) = m.tier_slugs.iter().position(|s| flatten(s) == flat) {
                return Some((m, m.efforts.get(i).copied()));
            }
        }
        None
    }

    /// The `--model` / `--effort` pair for pi model `model_id` at pi thinking
    /// level `thinking`. An effort model always gets an effort: the level
    /// clamped to its tiers (see [`clamp_effort`]); a tier slug given as the
    /// id pins that tier. A fixed model never gets one.
    pub fn resolve(
        &self,
        model_id: &str,
        thinking: Option<ThinkingLevel>,
    ) -> Result<Resolved, ModelError> {
        if model_id.trim().starts_with('-') {
            return Err(ModelError::Invalid {
                given: model_id.to_string(),
            });
        }
        let (model, pinned) = self
            .find(model_id)
            .ok_or_else(|| ModelError::UnknownModel {
                given: model_id.to_string(),
                choices: self.ids(),
            })?;
        let effort = pinned.or_else(|| clamp_effort(&model.efforts, thinking));
        Ok(resolved(model, effort))
    }

    /// Resolve an AskAntigravity model alias.
    ///
    /// Accepted: an exact id, tier slug or display name (as [`Catalog::find`]);
    /// `flash`, `pro`, `gemini` (= flash), `sonnet`, `opus`, `claude`
    /// (= sonnet), `gpt-oss`; with an optional version (`3.5 flash`,
    /// `sonnet 4.6`) and tier (`flash low`, `pro high`), in any order. Without
    /// a version the newest listed is used. The tier is the one named, else
    /// `default_thinking`, else the family default (flash: medium, pro:
    /// high), clamped to what the model offers. Fixed models never get an
    /// effort. Claude and GPT-OSS aliases fall back to the built-in catalog
    /// when agy does not list them. An empty alias means `flash`.
    pub fn resolve_alias(
        &self,
        alias: &str,
        default_thinking: Option<Effort>,
    ) -> Result<Resolved, ModelError> {
        let given = alias.trim();
        if given.starts_with('-') {
            return Err(ModelError::Invalid {
                given: alias.to_string(),
            });
        }
        if let Some((model, pinned)) = self.find(given) {
            let effort = pinned.or_else(|| {
                let want = default_thinking.unwrap_or(family_default_tier(model));
                nearest_effort(&model.efforts, want)
            });
            return Ok(resolved(model, effort));
        }
        let query = AliasQuery::parse(given).map_err(|reason| self.alias_error(given, reason))?;
        match query.select(self, default_thinking) {
            Ok(r) => Ok(r),
            Err(reason) => {
                if query.vendor != "gemini" {
                    if let Ok(r) = query.select(&Catalog::fallback(), default_thinking) {
                        return Ok(r);
                    }
                }
                Err(self.alias_error(given, reason))
            }
        }
    }

    fn alias_error(&self, given: &str, reason: String) -> ModelError {
        let mut choices: Vec<String> = ALIASES.iter().map(|s| s.to_string()).collect();
        choices.push("[VERSION] flash|pro [low|medium|high]".into());
        choices.extend(self.ids());
        ModelError::UnknownAlias {
            given: given.to_string(),
            reason,
            choices,
        }
    }
}

fn resolved(model: &Model, effort: Option<Effort>) -> Resolved {
    let effort = if model.is_fixed() { None } else { effort };
    Resolved {
        id: model.id.clone(),
        name: model.name.clone(),
        model: model.slug.clone(),
        effort,
        tier_slug: effort.and_then(|e| model.tier_slug(e)).map(str::to_string),
    }
}

/// Lowercase alphanumerics only: `gemini-3.7-flash` and the original's
/// `gemini-3-7-flash` compare equal.
fn flatten(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The tier AskAntigravity uses when none is asked for (the original's
/// FAMILY_DEFAULT_TIER): Pro runs high, everything else medium.
fn family_default_tier(model: &Model) -> Effort {
    if SlugParts::of(&model.slug).words.iter().any(|w| w == "pro") {
        Effort::High
    } else {
        Effort::Medium
    }
}

/// An alias taken apart: `3.5 flash low` → vendor gemini, words [flash],
/// version 3.5, tier low.
#[derive(Debug, Clone)]
struct AliasQuery {
    vendor: String,
    words: Vec<String>,
    version: Option<String>,
    tier: Option<Effort>,
}

impl AliasQuery {
    fn parse(alias: &str) -> Result<AliasQuery, String> {
        let lower = alias.to_lowercase();
        let tokens: Vec<&str> = lower
            .split(|c: char| c.is_whitespace() || matches!(c, '-' | '_' | '/' | '(' | ')'))
            .filter(|t| !t.is_empty())
            .collect();
        let mut vendor: Option<&str> = None;
        let mut words: Vec<String> = Vec::new();
        let mut version: Option<String> = None;
        let mut tier: Option<Effort> = None;
        let mut set_vendor = |v: &'static str| -> Result<(), String> {
            match vendor {
                Some(old) if old != v => Err(format!("it names both {old} and {v}")),
                _ => {
                    vendor = Some(v);
                    Ok(())
                }
            }
        };
        let mut i = 0;
        while i < tokens.len() {
            let t = tokens[i];
            match t {
                "gemini" | "google" => set_vendor("gemini")?,
                "claude" | "anthropic" => set_vendor("claude")?,
                "gpt" | "oss" | "gptoss" | "gpt-oss" => set_vendor("gpt-oss")?,
                "flash" | "pro" | "lite" => {
                    set_vendor("gemini")?;
                    words.push(t.to_string());
                }
                "sonnet" | "opus" | "haiku" => {
                    set_vendor("claude")?;
                    words.push(t.to_string());
                }
                "low" | "medium" | "high" => {
                    let e: Effort = t.parse()?;
                    if tier.is_some_and(|old| old != e) {
                        return Err("it names two tiers".into());
                    }
                    tier = Some(e);
                }
                "latest" | "default" | "model" => {}
                t if is_version_token(t) => {
                    if version.is_some() {
                        return Err("it names two versions".into());
                    }
                    let mut run = vec![t];
                    while i + 1 < tokens.len() && is_version_token(tokens[i + 1]) {
                        i += 1;
                        run.push(tokens[i]);
                    }
                    version = Some(run.join("."));
                }
                t => words.push(t.to_string()),
            }
            i += 1;
        }
        let vendor = vendor.unwrap_or("gemini").to_string();
        if words.is_empty() {
            match vendor.as_str() {
                "gemini" => words.push("flash".into()),
                "claude" => words.push("sonnet".into()),
                _ => {}
            }
        }
        Ok(AliasQuery {
            vendor,
            words,
            version,
            tier,
        })
    }

    fn select(
        &self,
        catalog: &Catalog,
        default_thinking: Option<Effort>,
    ) -> Result<Resolved, String> {
        let described = self.describe();
        let parts: Vec<(&Model, SlugParts)> = catalog
            .models
            .iter()
            .map(|m| (m, SlugParts::of(&m.slug)))
            .filter(|(_, p)| p.vendor == self.vendor)
            .filter(|(_, p)| self.words.iter().all(|w| p.words.contains(w)))
            .collect();
        if parts.is_empty() {
            return Err(format!("no {described} model is listed"));
        }
        // The closest name first: "flash" prefers gemini-X-flash to
        // gemini-X-flash-lite.
        let fewest = parts.iter().map(|(_, p)| p.words.len()).min().unwrap_or(0);
        let parts: Vec<_> = parts
            .into_iter()
            .filter(|(_, p)| p.words.len() == fewest)
            .collect();
        let parts: Vec<_> = match &self.version {
            Some(v) => {
                let want = version_key(Some(v));
                let hit: Vec<_> = parts
                    .into_iter()
                    .filter(|(_, p)| version_key(p.version.as_deref()) == want)
                    .collect();
                if hit.is_empty() {
                    return Err(format!("no {described} model is listed"));
                }
                hit
            }
            None => {
                let newest = parts
                    .iter()
                    .map(|(_, p)| version_key(p.version.as_deref()))
                    .max()
                    .unwrap_or_default();
                parts
                    .into_iter()
                    .filter(|(_, p)| version_key(p.version.as_deref()) == newest)
                    .collect()
            }
        };
        // Tier: every (model, tier) the candidates offer.
        let mut options: Vec<(&Model, Option<Effort>)> = Vec::new();
        for (m, _) in &parts {
            if m.is_fixed() {
                options.push((m, m.fixed_tier()));
            } else {
                options.extend(m.efforts.iter().map(|e| (*m, Some(*e))));
            }
        }
        let offered: Vec<Effort> = options.iter().filter_map(|(_, t)| *t).collect();
        let first = parts[0].0;
        let chosen = if offered.is_empty() {
            (first, None)
        } else {
            let want = self.tier.unwrap_or_else(|| match default_thinking {
                Some(d) if offered.contains(&d) => d,
                _ => family_default_tier(first),
            });
            let tier = nearest_effort(&offered, want);
            options
                .into_iter()
                .find(|(_, t)| *t == tier)
                .unwrap_or((first, None))
        };
        Ok(resolved(chosen.0, chosen.1))
    }

    fn describe(&self) -> String {
        let mut d = Vec::new();
        d.push(self.vendor.clone());
        if let Some(v) = &self.version {
            d.push(v.clone());
        }
        d.extend(self.words.iter().cloned());
        d.join(" ")
    }
}

// --- running `agy models` --------------------------------------------------------

/// Why `agy models` gave no catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("agy is not installed: {bin} was not found")]
    NotInstalled { bin: String },
    #[error("cannot start {bin}: {message}")]
    SpawnFailed { bin: String, message: String },
    #[error("`agy models` did not finish within {}s", secs)]
    TimedOut { secs: u64 },
    #[error("agy is not signed in (run `agy` once to sign in)")]
    SignedOut,
    #[error("`agy models` exited with {code}{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Exited { code: String, detail: String },
    #[error("`agy models` listed no models")]
    NoModels,
}

/// Run `BIN models` with stdin closed, in its own process group, killing the
/// group after `timeout`. Returns stdout of a successful run that listed at
/// least one model.
pub fn fetch(bin: &Path, timeout: Duration) -> Result<String, Unavailable> {
    use std::os::unix::process::CommandExt;
    let bin_s = bin.display().to_string();
    let mut child = Command::new(bin)
        .arg("models")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Unavailable::NotInstalled { bin: bin_s.clone() }
            } else {
                Unavailable::SpawnFailed {
                    bin: bin_s.clone(),
                    message: e.to_string(),
                }
            }
        })?;
    let pid = child.id();
    let out = read_in_thread(child.stdout.take());
    let err = read_in_thread(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break None,
        }
    };
    let Some(status) = status else {
        kill_group(pid);
        let _ = child.kill();
        let _ = child.wait();
        return Err(Unavailable::TimedOut {
            secs: timeout.as_secs_f64().ceil() as u64,
        });
    };
    // Whatever else is left of the group must not keep our pipes open.
    kill_group(pid);
    let stdout = collect(out);
    let stderr = collect(err);
    let signed_out = stdout.lines().chain(stderr.lines()).any(is_sign_in);
    if !status.success() {
        if signed_out {
            return Err(Unavailable::SignedOut);
        }
        let code = match status.code() {
            Some(c) => format!("status {c}"),
            None => "a signal".to_string(),
        };
        let detail = stderr
            .lines()
            .chain(stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty() && !is_glog(l))
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        return Err(Unavailable::Exited { code, detail });
    }
    if parse_models_output(&stdout).is_empty() {
        return Err(if signed_out {
            Unavailable::SignedOut
        } else {
            Unavailable::NoModels
        });
    }
    Ok(stdout)
}

fn kill_group(pid: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    if pid > 1 {
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

fn read_in_thread<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

/// A pipe's text; a pipe held open by an escaped grandchild is given up on.
fn collect(rx: mpsc::Receiver<String>) -> String {
    rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default()
}

// --- the cache ----------------------------------------------------------------

/// `$AGY_BRIDGE_STATE_DIR`, else `~/.pi/agent/antigravity-bridge` (the
/// original's directory, so its `models-cache.json` is reused); `None`
/// without HOME.
pub fn state_dir() -> Option<PathBuf> {
    crate::config::state_dir().ok()
}

/// `models-cache.json`: the original's `{raw, savedAt}` (raw `agy models`
/// stdout, epoch milliseconds), plus `unavailable` when the entry records a
/// failed run (then `raw` is empty). Entries written by the TypeScript
/// original read fine, and ours read fine there.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheEntry {
    pub raw: String,
    /// Epoch milliseconds (the original wrote `Date.now()`; a fraction is
    /// accepted and dropped).
    #[serde(deserialize_with = "millis")]
    pub saved_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

fn millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v >= 0.0 {
        Ok(v as u64)
    } else {
        Err(serde::de::Error::custom("savedAt is not a time"))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl CacheEntry {
    /// Age; an entry from the future counts as infinitely old.
    pub fn age(&self) -> Duration {
        match now_ms().checked_sub(self.saved_at) {
            Some(diff) => Duration::from_millis(diff),
            None => Duration::MAX,
        }
    }

    /// A real catalog from agy (not a remembered failure).
    pub fn is_real(&self) -> bool {
        self.unavailable.is_none() && !Catalog::from_output(&self.raw).is_empty()
    }
}

/// Where the catalog came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `agy models`, just now.
    Agy,
    /// The cache, written `age` ago.
    Cache { age: Duration },
    /// `agy models` failed just now; the last good catalog (`age` old) is
    /// shown instead.
    CacheAfterFailure { reason: String, age: Duration },
    /// The built-in catalog. `age` is set when the failure is a remembered
    /// one (a failure entry younger than [`FAILURE_TTL`]).
    Fallback {
        reason: String,
        age: Option<Duration>,
    },
}

/// A loaded catalog and how it was had.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub catalog: Catalog,
    pub source: Source,
    /// The cache entry served is past its TTL: refresh it in the background
    /// ([`Loader::spawn_refresh`]).
    pub stale: bool,
}

impl Loaded {
    pub fn is_fallback(&self) -> bool {
        matches!(self.source, Source::Fallback { .. })
    }

    /// The line to tell the user when this is not a catalog agy just gave
    /// or a cached one.
    pub fn note(&self) -> Option<String> {
        match &self.source {
            Source::Agy | Source::Cache { .. } => None,
            Source::CacheAfterFailure { reason, age } => Some(format!(
                "`agy models` failed ({reason}); showing the catalog cached {} ago",
                human(*age)
            )),
            Source::Fallback { reason, age: None } => Some(format!(
                "agy models unavailable ({reason}); using the built-in fallback catalog"
            )),
            Source::Fallback {
                reason,
                age: Some(age),
            } => Some(format!(
                "agy models unavailable ({reason}, checked {} ago; --refresh retries now); using the built-in fallback catalog",
                human(*age)
            )),
        }
    }
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else {
        format!("{}h", s / 3600)
    }
}

/// How [`Loader::load`] may use the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Fresh entry: served. Stale entry: served, `stale` set. Remembered
    /// failure younger than [`FAILURE_TTL`]: fallback. Otherwise run agy now.
    CacheFirst,
    /// Run agy now; on failure show the last good cache entry, else the
    /// fallback.
    Refresh,
}

/// Loads the catalog: agy, cache and fallback.
#[derive(Debug, Clone)]
pub struct Loader {
    pub agy_bin: PathBuf,
    /// `None`: no state directory, nothing is cached.
    pub cache_path: Option<PathBuf>,
    pub timeout: Duration,
    pub ttl: Duration,
    pub failure_ttl: Duration,
}

impl Loader {
    /// `AGY_BIN` (else `agy`) and the cache in [`state_dir`].
    pub fn from_env() -> Loader {
        let agy_bin = std::env::var("AGY_BIN")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("agy"));
        Loader {
            agy_bin,
            cache_path: state_dir().map(|d| d.join(CACHE_FILE)),
            timeout: DISCOVERY_TIMEOUT,
            ttl: CACHE_TTL,
            failure_ttl: FAILURE_TTL,
        }
    }

    /// The cache entry, if there is a readable one.
    pub fn read_cache(&self) -> Option<CacheEntry> {
        let path = self.cache_path.as_ref()?;
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Write the cache atomically (temporary file, mode 0600, rename).
    pub fn write_cache(&self, entry: &CacheEntry) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let Some(path) = &self.cache_path else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_file_name(format!(
            "{CACHE_FILE}.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut text = serde_json::to_string_pretty(entry).map_err(std::io::Error::other)?;
            text.push('\n');
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Run agy now and cache the outcome: a good catalog replaces the entry;
    /// a failure is recorded only when there is no good entry to keep.
    pub fn fetch_and_store(&self) -> Result<Catalog, Unavailable> {
        match fetch(&self.agy_bin, self.timeout) {
            Ok(raw) => {
                let _ = self.write_cache(&CacheEntry {
                    raw: raw.clone(),
                    saved_at: now_ms(),
                    unavailable: None,
                });
                Ok(Catalog::from_output(&raw))
            }
            Err(reason) => {
                if !self.read_cache().is_some_and(|c| c.is_real()) {
                    let _ = self.write_cache(&CacheEntry {
                        raw: String::new(),
                        saved_at: now_ms(),
                        unavailable: Some(reason.to_string()),
                    });
                }
                Err(reason)
            }
        }
    }

    pub fn load(&self, policy: Policy) -> Loaded {
        let cached = self.read_cache();
        if policy == Policy::CacheFirst {
            if let Some(entry) = &cached {
                let age = entry.age();
                if let Some(reason) = &entry.unavailable {
                    if age < self.failure_ttl {
                        return Loaded {
                            catalog: Catalog::fallback(),
                            source: Source::Fallback {
                                reason: reason.clone(),
                                age: Some(age),
                            },
                            stale: false,
                        };
                    }
                } else {
                    let catalog = Catalog::from_output(&entry.raw);
                    if !catalog.is_empty() {
                        return Loaded {
                            catalog,
                            source: Source::Cache { age },
                            stale: age >= self.ttl,
                        };
                    }
                }
            }
        }
        match self.fetch_and_store() {
            Ok(catalog) => Loaded {
                catalog,
                source: Source::Agy,
                stale: false,
            },
            Err(reason) => {
                if let Some(entry) = cached.filter(CacheEntry::is_real) {
                    return Loaded {
                        catalog: Catalog::from_output(&entry.raw),
                        source: Source::CacheAfterFailure {
                            reason: reason.to_string(),
                            age: entry.age(),
                        },
                        stale: false,
                    };
                }
                Loaded {
                    catalog: Catalog::fallback(),
                    source: Source::Fallback {
                        reason: reason.to_string(),
                        age: None,
                    },
                    stale: false,
                }
            }
        }
    }

    fn lock_path(&self) -> Option<PathBuf> {
        self.cache_path
            .as_ref()
            .map(|p| p.with_file_name(format!("{CACHE_FILE}.refreshing")))
    }

    /// Start `EXE models --refresh --quiet` detached (own process group,
    /// stdio null) to rewrite the cache after this process has exited. At
    /// most one runs at a time (a lock file younger than 30 s). Returns
    /// whether one was started.
    pub fn spawn_refresh(&self, exe: &Path) -> bool {
        use std::os::unix::process::CommandExt;
        let Some(lock) = self.lock_path() else {
            return false;
        };
        if let Some(dir) = lock.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let fresh_lock = std::fs::metadata(&lock)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < REFRESH_LOCK_TTL);
        if fresh_lock {
            return false;
        }
        let _ = std::fs::remove_file(&lock);
        if std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
            .is_err()
        {
            return false; // another process just took it
        }
        let mut cmd = Command::new(exe);
        cmd.args(["models", "--refresh", "--quiet"])
            .env("AGY_BIN", &self.agy_bin)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(dir) = self.cache_path.as_ref().and_then(|p| p.parent()) {
            cmd.env("AGY_BRIDGE_STATE_DIR", dir);
        }
        match cmd.spawn() {
            Ok(mut child) => {
                // Reap it if this process outlives it.
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
                true
            }
            Err(_) => {
                let _ = std::fs::remove_file(&lock);
                false
            }
        }
    }

    /// The background refresh itself: run agy, store the outcome, drop the
    /// lock.
    pub fn refresh_quietly(&self) -> Result<Catalog, Unavailable> {
        let out = self.fetch_and_store();
        if let Some(lock) = self.lock_path() {
            let _ = std::fs::remove_file(lock);
        }
        out
    }
}

/// Cache-first catalog for the provider and AskAntigravity: the cache when
/// there is one (stale or not: the next `agy-bridge models` refreshes it),
/// else `agy models` now, else the fallback.
pub fn catalog() -> Catalog {
    Loader::from_env().load(Policy::CacheFirst).catalog
}

// --- readable output --------------------------------------------------------------

/// The readable table: id, name, efforts, what `--model` gets.
pub fn write_table(catalog: &Catalog, out: &mut dyn Write) -> std::io::Result<()> {
    let rows: Vec<[String; 4]> = catalog
        .models
        .iter()
        .map(|m| {
            let efforts = if m.is_fixed() {
                "fixed".to_string()
            } else {
                m.efforts
                    .iter()
                    .map(|e| e.as_arg())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let slug = if m.is_fixed() {
                m.slug.clone()
            } else {
                format!("{} --effort", m.slug)
            };
            [m.id.clone(), m.name.clone(), efforts, slug]
        })
        .collect();
    let header = ["ID", "NAME", "EFFORTS", "AGY --model"];
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: [&str; 4]| {
        format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2]
        )
    };
    writeln!(out, "{}", line(header).trim_end())?;
    for r in &rows {
        writeln!(out, "{}", line([&r[0], &r[1], &r[2], &r[3]]).trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_from_display_names() {
        assert_eq!(
            slug_from_display("Gemini 3.5 Flash (Medium)"),
            "gemini-3.5-flash-medium"
        );
        assert_eq!(slug_from_display("Claude Sonnet 4.5"), "claude-sonnet-4-5");
        assert_eq!(
            slug_from_display("GPT-OSS 120B (Medium)"),
            "gpt-oss-120b-medium"
        );
        assert_eq!(
            slug_from_display("Claude Opus 4.6 (Thinking)"),
            "claude-opus-4-6-thinking"
        );
    }

    #[test]
    fn display_names_from_slugs() {
        assert_eq!(
            display_from_slug("gemini-3.6-flash-low"),
            "Gemini 3.6 Flash (Low)"
        );
        assert_eq!(display_from_slug("claude-sonnet-4-6"), "Claude Sonnet 4.6");
        assert_eq!(
            display_from_slug("gpt-oss-120b-medium"),
            "GPT-OSS 120B (Medium)"
        );
        assert_eq!(
            display_from_slug("claude-opus-4-6-thinking"),
            "Claude Opus 4.6 (Thinking)"
        );
    }

    #[test]
    fn slug_shape() {
        assert!(is_slug("gemini-3.7-flash-high"));
        assert!(is_slug("gpt-oss-120b"));
        assert!(!is_slug("-high"));
        assert!(!is_slug("Gemini"));
        assert!(!is_slug("models"));
        assert!(!is_slug("a--b"));
    }

    #[test]
    fn glog_lines() {
        assert!(is_glog(
            "I0701 12:00:00.000000 12345 model_config_manager.go:157] loaded"
        ));
        assert!(is_glog("W1231 23:59:59.999999  7 x.go:1] w"));
        assert!(!is_glog("Gemini 3.5 Flash (Low)"));
    }

    #[test]
    fn tiers_split() {
        assert_eq!(
            split_tier("gemini-3.7-flash-high"),
            ("gemini-3.7-flash", Some(Effort::High))
        );
        assert_eq!(split_tier("claude-sonnet-4-6"), ("claude-sonnet-4-6", None));
        assert_eq!(split_tier("high"), ("high", None));
    }

    #[test]
    fn nearest_ties_go_up() {
        assert_eq!(
            nearest_effort(&[Effort::Low, Effort::High], Effort::Medium),
            Some(Effort::High)
        );
        assert_eq!(
            nearest_effort(&[Effort::Medium, Effort::High], Effort::Low),
            Some(Effort::Medium)
        );
        assert_eq!(nearest_effort(&[], Effort::Low), None);
    }

    #[test]
    fn thinking_level_parses() {
        assert_eq!("xhigh".parse::<ThinkingLevel>(), Ok(ThinkingLevel::Xhigh));
        assert!("extreme".parse::<ThinkingLevel>().is_err());
        let l: ThinkingLevel = serde_json::from_str("\"max\"").unwrap();
        assert_eq!(l, ThinkingLevel::Max);
    }

    #[test]
    fn flattened_ids_match() {
        let c = Catalog::fallback();
        let (m, e) = c.find("gemini-3-7-flash").unwrap();
        assert_eq!((m.id.as_str(), e), ("gemini-3.7-flash", None));
        let (m, e) = c.find("Gemini 3.7 Flash (High)").unwrap();
        assert_eq!((m.id.as_str(), e), ("gemini-3.7-flash", Some(Effort::High)));
    }
}
