//! agy's check of `--model` and `--effort` before a run begins
//! (docs/agy-format.md, "Efforts (1.3.1)" and "Outcomes"): a word that is
//! no effort, a tiered slug with another effort, and from agy 1.3.1 an
//! effort the model does not have (`xhigh` and `max` for every model) are
//! refused with agy's words, before any conversation. Kept apart from the
//! replay because it runs before a turn decides anything, and a stdin
//! session needs it before its `init`.
//!
//! Where the recording's `agy models` listing does not name a model's
//! tiers, only `xhigh` and `max` are refused (no model takes them): any
//! other effort is agy's to judge, which fake-agy does not pretend to know.

use crate::cli::PrintArgs;
use agy_bridge::pi::models::{parse_models_output, split_tier};
use agy_corpus::recording::Recording;

/// The efforts every agy takes as words, low to high.
const WORDS: [&str; 3] = ["low", "medium", "high"];
/// The words agy 1.3.1 also takes, though no model has them.
const NEWER_WORDS: [&str; 2] = ["xhigh", "max"];
/// agy's default model (its refusal of a bare `--effort xhigh` names it).
const DEFAULT_MODEL: &str = "gemini-3.8-flash";

/// agy's refusal of this run's `--model`/`--effort`, as the line after
/// `error: ` (also the result's `error`); `None` when agy takes them.
pub fn refusal(args: &PrintArgs, rec: &Recording) -> Option<String> {
    let effort = args.effort.as_deref()?;
    let model = args.model.as_deref().unwrap_or("");
    let version = agy_bridge::runner::version::parse_version(&rec.header.agy_version);
    let newer = version.is_some_and(|v| v >= (1, 3, 1));
    let detail = detail(model, effort, newer, &rec.header.models_output)?;
    Some(format!(
        "invalid model selection (--model {model:?} --effort {effort:?}): {detail}"
    ))
}

/// What is wrong with `effort` for `model`, in agy's words.
fn detail(model: &str, effort: &str, newer: bool, listing: &str) -> Option<String> {
    let words: Vec<&str> = match newer {
        true => WORDS.iter().chain(NEWER_WORDS.iter()).copied().collect(),
        false => WORDS.to_vec(),
    };
    if !words.contains(&effort) {
        return Some(format!(
            "invalid --effort {effort:?} (valid: {})",
            words.join(", ")
        ));
    }
    let (base, tier) = split_tier(model);
    if let Some(tier) = tier {
        // agy 1.2.17's words for a tiered slug with another effort.
        return (tier.as_arg() != effort)
            .then(|| format!("--model {model} conflicts with --effort={effort}"));
    }
    if !newer {
        return None;
    }
    let base = if base.is_empty() { DEFAULT_MODEL } else { base };
    let listed = tiers_of(base, listing);
    let available = if listed.is_empty() {
        if !NEWER_WORDS.contains(&effort) {
            return None;
        }
        WORDS.iter().map(|w| w.to_string()).collect()
    } else {
        listed
    };
    (!available.iter().any(|a| a == effort)).then(|| {
        format!(
            "{base} has no {effort:?} effort (available: {})",
            available.join(", ")
        )
    })
}

/// The tiers `agy models` lists for `base`, low to high.
fn tiers_of(base: &str, listing: &str) -> Vec<String> {
    let mut tiers: Vec<_> = parse_models_output(listing)
        .iter()
        .filter_map(|m| {
            let slug = m.slug();
            let (b, tier) = split_tier(&slug);
            (b == base).then_some(tier).flatten()
        })
        .collect();
    tiers.sort();
    tiers.dedup();
    tiers.iter().map(|t| t.as_arg().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "gemini-3.8-flash-high\tGemini 3.8 Flash (High)\n\
        gemini-3.8-flash-low\tGemini 3.8 Flash (Low)\n\
        gemini-3.8-flash-medium\tGemini 3.8 Flash (Medium)\n\
        gemini-3.1-pro-high\tGemini 3.1 Pro (High)\n\
        gemini-3.1-pro-low\tGemini 3.1 Pro (Low)\n\
        gpt-oss-120b-medium\tGPT-OSS 120B (Medium)\n";

    #[test]
    fn agy_1_3_1_takes_only_the_efforts_a_model_has() {
        let d = |model, effort| detail(model, effort, true, LISTING);
        assert_eq!(
            d("gemini-3.8-flash", "xhigh").as_deref(),
            Some("gemini-3.8-flash has no \"xhigh\" effort (available: low, medium, high)")
        );
        assert_eq!(
            d("", "max").as_deref(),
            Some("gemini-3.8-flash has no \"max\" effort (available: low, medium, high)")
        );
        assert_eq!(
            d("gemini-3.1-pro", "medium").as_deref(),
            Some("gemini-3.1-pro has no \"medium\" effort (available: low, high)")
        );
        assert_eq!(d("gemini-3.1-pro", "low"), None);
        assert_eq!(
            d("gemini-3.8-flash-high", "xhigh").as_deref(),
            Some("--model gemini-3.8-flash-high conflicts with --effort=xhigh")
        );
        assert_eq!(
            d("gemini-9-flash", "xhigh").as_deref(),
            Some("gemini-9-flash has no \"xhigh\" effort (available: low, medium, high)")
        );
        assert_eq!(d("gemini-9-flash", "medium"), None, "not agy's to guess");
        assert_eq!(
            d("x", "bogus").as_deref(),
            Some("invalid --effort \"bogus\" (valid: low, medium, high, xhigh, max)")
        );
    }

    #[test]
    fn an_older_agy_knows_three_words_only() {
        assert_eq!(
            detail("gemini-3.8-flash", "xhigh", false, LISTING).as_deref(),
            Some("invalid --effort \"xhigh\" (valid: low, medium, high)")
        );
        assert_eq!(detail("gemini-3.1-pro", "medium", false, LISTING), None);
    }
}
