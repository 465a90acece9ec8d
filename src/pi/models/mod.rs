//! agy's model catalog: `agy models` parsed (all three output formats agy
//! has printed, docs/agy-format.md, "agy models"), folded into pi models,
//! cached, and resolved.
//!
//! - [`parse_models_output`] reads `agy models` stdout, skipping the
//!   progress line, glog and sign-in lines.
//! - `Catalog::from_raw` folds Gemini tiers (`gemini-3.7-flash-low/-high`)
//!   into one model whose id is the base slug (`gemini-3.7-flash`) and whose
//!   efforts are the tiers agy listed. Everything else is a *fixed* model
//!   keyed by agy's own slug; fixed models never get `--effort` (Claude and
//!   GPT-OSS reject it).
//! - [`Catalog::resolve`] turns a pi model id and pi thinking level into the
//!   `--model` / `--effort` pair, as the TypeScript bridge
//!   ([EstebanForge/pi-antigravity-bridge](https://github.com/EstebanForge/pi-antigravity-bridge)) does: a Gemini
//!   base slug is passed with `--effort` (always: a base slug is not valid on
//!   its own), the level clamped to the tiers that base offers.
//! - [`Catalog::resolve_alias`] resolves AskAntigravity's friendly names
//!   (`flash`, `pro high`, `3.5 flash low`, `sonnet 4.6`, an exact slug...).
//! - [`Loader`] runs `agy models` (8 s, process group killed) behind a 5
//!   minute cache in `models-cache.json`, keyed by the agy binary, with a
//!   built-in fallback catalog (agy 1.1.24's real listing) when agy is
//!   missing, signed out, hung or broken.

pub(super) mod cache;
mod catalog;
pub(super) mod listed;
mod parse;

pub use cache::{catalog, Loaded, Loader, Policy, Source, Unavailable};
pub use catalog::{Catalog, Model, ModelError, PiCost, PiModel, Resolved, ThinkingLevelMap};
pub use parse::{is_progress, parse_models_output, split_tier, RawModel};

use agy_format::agy_args::Effort;
use serde::Serialize;
use std::fmt;
use std::io::Write;
use std::time::Duration;

/// The custom pi `api` string of every model we emit. No built-in pi
/// provider claims it; the pi extension registers its `streamSimple` under
/// the same string. (The TypeScript bridge used the same sentinel.)
pub(crate) const PI_API: &str = "agy-bridge";
/// pi requires a non-empty `baseUrl`; nothing ever connects to it.
pub(crate) const PI_BASE_URL: &str = "agy-bridge://antigravity";

/// How long `agy models` may run before its process group is killed.
pub(crate) const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(8);
/// How long a cached catalog from agy is served without a refresh.
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a failed `agy models` is remembered, so a hung or signed-out agy
/// costs at most one slow call per minute instead of one per pi start.
pub(crate) const FAILURE_TTL: Duration = Duration::from_secs(60);

/// The cache file name inside the state directory.
pub(crate) const CACHE_FILE: &str = "models-cache.json";
/// The lock file a background refresh holds (`flock`) while it runs.
pub(crate) const REFRESH_LOCK_FILE: &str = "models-cache.json.refreshing";

// --- pi thinking levels ------------------------------------------------------

/// pi's thinking levels (`ModelThinkingLevel` of pi-ai 0.84.0:
/// `"off" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No thinking: a tiered model runs at its lowest tier.
    Off,
    /// Runs at the lowest tier, as `off` does.
    Minimal,
    /// agy's `low` tier, or the nearest one offered.
    Low,
    /// agy's `medium` tier, or the nearest one offered.
    Medium,
    /// agy's `high` tier, or the nearest one offered.
    High,
    /// Runs at the highest tier offered.
    Xhigh,
    /// Runs at the highest tier offered, as `xhigh` does.
    Max,
}

impl ThinkingLevel {
    pub(crate) const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];

    /// The level as pi spells it in a request (`off` ... `max`).
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

pub(super) const EFFORTS: [Effort; 3] = [Effort::Low, Effort::Medium, Effort::High];

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
pub(crate) fn nearest_effort(offered: &[Effort], want: Effort) -> Option<Effort> {
    offered
        .iter()
        .copied()
        .min_by_key(|e| ((rank(*e) - rank(want)).abs(), -rank(*e)))
}

/// Clamp a pi thinking level to the tiers a model offers. `off`, `minimal`
/// and no level at all pick the lowest tier (a Gemini base slug needs some
/// effort); `xhigh` and `max` pick the highest; a missing tier goes to the
/// nearest one, ties upward. `None` for a fixed model (no tiers).
pub(crate) fn clamp_effort(offered: &[Effort], level: Option<ThinkingLevel>) -> Option<Effort> {
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
    use super::listed::{label_for_slug, slug_for_label};
    use super::parse::{display_from_slug, is_glog, is_slug, slug_from_display};
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
    fn labels_map_to_the_slugs_real_listings_pair_them_with() {
        // Labels that a spelling guess would get wrong.
        assert_eq!(
            slug_for_label("Claude Sonnet 4.6 (Thinking)"),
            Some("claude-sonnet-4-6")
        );
        assert_eq!(
            slug_from_display("Claude Sonnet 4.6 (Thinking)"),
            "claude-sonnet-4-6-thinking"
        );
        assert_eq!(
            slug_for_label("Claude Opus 4.6 (Thinking)"),
            Some("claude-opus-4-6-thinking")
        );
        assert_eq!(
            slug_for_label("GPT-OSS 120B (Medium)"),
            Some("gpt-oss-120b-medium")
        );
        // 1.0.10's Gemini 3.5 Flash, which 1.1.24 no longer lists.
        assert_eq!(
            slug_for_label("Gemini 3.5 Flash (Low)"),
            Some("gemini-3.5-flash-low")
        );
        assert_eq!(slug_for_label("Claude Sonnet 4.5"), None);
        let label_only = RawModel {
            slug: None,
            display: "Claude Sonnet 4.6 (Thinking)".into(),
        };
        assert_eq!(label_only.slug(), "claude-sonnet-4-6");
        // A label no listing has is spelled out: the last resort.
        let unknown = RawModel {
            slug: None,
            display: "Claude Sonnet 4.5".into(),
        };
        assert_eq!(unknown.slug(), "claude-sonnet-4-5");
        assert_eq!(
            label_for_slug("claude-sonnet-4-6"),
            Some("Claude Sonnet 4.6 (Thinking)")
        );
    }

    #[test]
    fn the_progress_line_is_never_a_model() {
        assert!(is_progress("Fetching available models..."));
        assert!(is_progress("  fetching available models...  "));
        assert!(!is_progress(
            "gemini-3.8-flash-high\tGemini 3.8 Flash (High)"
        ));
        assert_eq!(
            parse_models_output("Fetching available models...\n"),
            vec![]
        );
    }

    #[test]
    fn the_fallback_is_agy_1_1_24s_listing() {
        let c = Catalog::fallback();
        assert_eq!(
            c.ids(),
            [
                "gemini-3.8-flash",
                "gemini-3.7-flash",
                "gemini-3.6-flash",
                "gemini-3.1-pro",
                "claude-sonnet-4-6",
                "claude-opus-4-6-thinking",
                "gpt-oss-120b-medium",
            ]
        );
        let flash = &c.models[0];
        assert_eq!(flash.efforts, [Effort::Low, Effort::Medium, Effort::High]);
        assert_eq!(flash.tier_slug(Effort::High), Some("gemini-3.8-flash-high"));
        assert_eq!(c.models[4].name, "Claude Sonnet 4.6 (Thinking)");
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
