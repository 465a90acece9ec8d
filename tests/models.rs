//! The model catalog: `agy models` parsing (three formats plus noise), tier
//! folding, thinking-level clamping, AskAntigravity aliases, the pi model
//! objects, and `agy-bridge models` end to end with fake-agy as agy (cache,
//! stale refresh in the background, fallback).

mod common;

use agy_bridge::pi::models::{
    self, parse_models_output, Catalog, Loader, ModelError, Policy, RawModel, Source,
    ThinkingLevel, Unavailable,
};
use agy_bridge::pi::testing::{self, clamp_effort};
use agy_format::agy_args::Effort;
use agy_synth::{MODELS_FORMAT_1, MODELS_FORMAT_2, MODELS_FORMAT_3};
use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use Effort::{High, Low, Medium};

fn raw(slug: Option<&str>, display: &str) -> RawModel {
    RawModel {
        slug: slug.map(str::to_string),
        display: display.to_string(),
    }
}

// --- parsing ---------------------------------------------------------------------

#[test]
fn parses_format_3_slug_tab_display() {
    let got = parse_models_output(MODELS_FORMAT_3);
    assert_eq!(
        got,
        vec![
            raw(Some("gemini-3.7-flash-low"), "Gemini 3.7 Flash (Low)"),
            raw(Some("gemini-3.7-flash-medium"), "Gemini 3.7 Flash (Medium)"),
            raw(Some("gemini-3.7-flash-high"), "Gemini 3.7 Flash (High)"),
            raw(Some("gemini-3.7-pro-low"), "Gemini 3.7 Pro (Low)"),
            raw(Some("gemini-3.7-pro-high"), "Gemini 3.7 Pro (High)"),
            raw(Some("claude-sonnet-4-6"), "Claude Sonnet 4.6"),
            raw(Some("claude-opus-4-6"), "Claude Opus 4.6"),
            raw(Some("gpt-oss-120b-medium"), "GPT-OSS 120B (Medium)"),
        ]
    );
}

#[test]
fn parses_format_2_bare_slugs() {
    let got = parse_models_output(MODELS_FORMAT_2);
    assert_eq!(
        got,
        vec![
            raw(Some("gemini-3.6-flash-low"), "Gemini 3.6 Flash (Low)"),
            raw(Some("gemini-3.6-flash-medium"), "Gemini 3.6 Flash (Medium)"),
            raw(Some("gemini-3.6-flash-high"), "Gemini 3.6 Flash (High)"),
            raw(Some("gemini-3.6-pro-high"), "Gemini 3.6 Pro (High)"),
            // The label agy's own listing gives this slug, not one spelled
            // from it.
            raw(Some("claude-sonnet-4-6"), "Claude Sonnet 4.6 (Thinking)"),
            raw(Some("claude-opus-4-6"), "Claude Opus 4.6"),
            raw(Some("gpt-oss-120b-medium"), "GPT-OSS 120B (Medium)"),
        ]
    );
}

#[test]
fn parses_format_1_display_names_and_derives_slugs() {
    let got = parse_models_output(MODELS_FORMAT_1);
    let displays: Vec<&str> = got.iter().map(|r| r.display.as_str()).collect();
    assert_eq!(
        displays,
        [
            "Gemini 3.5 Flash (Low)",
            "Gemini 3.5 Flash (Medium)",
            "Gemini 3.5 Flash (High)",
            "Gemini 3.5 Pro (High)",
            "Claude Sonnet 4.5",
            "GPT-OSS 120B (Medium)",
        ]
    );
    assert!(got.iter().all(|r| r.slug.is_none()));
    let slugs: Vec<String> = got.iter().map(RawModel::slug).collect();
    assert_eq!(
        slugs,
        [
            "gemini-3.5-flash-low",
            "gemini-3.5-flash-medium",
            "gemini-3.5-flash-high",
            "gemini-3.5-pro-high",
            "claude-sonnet-4-5",
            "gpt-oss-120b-medium",
        ]
    );
}

const NOISE: &str = "\
I0701 12:00:00.000000 12345 model_config_manager.go:157] Fetching model config from server
Fetching available models...

W0701 12:00:00.100000 12345 auth.go:88] token expires soon
Available models:
Please sign in to view available models
Waiting for authentication...
";

#[test]
fn ignores_preamble_log_and_sign_in_lines_in_every_format() {
    assert_eq!(parse_models_output(NOISE), vec![]);
    for (format, n) in [
        (MODELS_FORMAT_1, 6),
        (MODELS_FORMAT_2, 7),
        (MODELS_FORMAT_3, 8),
    ] {
        // Noise before, between (after every line) and after the models.
        let mut mixed = String::from(NOISE);
        for line in format.lines() {
            mixed.push_str(line);
            mixed.push_str("\nI0701 12:00:01.000000 12345 model_config_manager.go:157] ok\n\n");
        }
        mixed.push_str(NOISE);
        let got = parse_models_output(&mixed);
        assert_eq!(got, parse_models_output(format), "{mixed}");
        assert_eq!(got.len(), n);
    }
    // Columns padded with spaces instead of a tab, and CRLF line ends.
    let padded = "gemini-3.7-flash-high     Gemini 3.7 Flash (High)\r\nclaude-sonnet-4-6   Claude Sonnet 4.6 (Thinking)\r\n";
    assert_eq!(
        parse_models_output(padded),
        vec![
            raw(Some("gemini-3.7-flash-high"), "Gemini 3.7 Flash (High)"),
            raw(Some("claude-sonnet-4-6"), "Claude Sonnet 4.6 (Thinking)"),
        ]
    );
    // A signed-out agy prints only the sign-in message: no models.
    assert!(Catalog::from_output("Please sign in to view available models\n").is_empty());
}

// --- catalog ------------------------------------------------------------------------

fn model<'a>(c: &'a Catalog, id: &str) -> &'a models::Model {
    c.models
        .iter()
        .find(|m| m.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:?}", c.ids()))
}

#[test]
fn folds_gemini_tiers_into_one_model_per_base() {
    let c = Catalog::from_output(MODELS_FORMAT_3);
    assert_eq!(
        c.ids(),
        [
            "gemini-3.7-flash",
            "gemini-3.7-pro",
            "claude-sonnet-4-6",
            "claude-opus-4-6",
            "gpt-oss-120b-medium",
        ]
    );
    let flash = model(&c, "gemini-3.7-flash");
    assert_eq!(flash.name, "Gemini 3.7 Flash");
    assert_eq!(flash.efforts, [Low, Medium, High]);
    assert_eq!(flash.slug, "gemini-3.7-flash");
    assert_eq!(
        flash.tier_slugs,
        [
            "gemini-3.7-flash-low",
            "gemini-3.7-flash-medium",
            "gemini-3.7-flash-high"
        ]
    );
    let pro = model(&c, "gemini-3.7-pro");
    assert_eq!(pro.efforts, [Low, High]);
    assert_eq!(
        pro.tier_slugs,
        ["gemini-3.7-pro-low", "gemini-3.7-pro-high"]
    );
    for fixed in [
        "claude-sonnet-4-6",
        "claude-opus-4-6",
        "gpt-oss-120b-medium",
    ] {
        let m = model(&c, fixed);
        assert!(m.is_fixed(), "{fixed}");
        assert_eq!(m.slug, fixed);
        assert!(m.tier_slugs.is_empty());
    }
    assert_eq!(
        model(&c, "gpt-oss-120b-medium").name,
        "GPT-OSS 120B (Medium)"
    );
}

#[test]
fn single_tier_gemini_and_tier_order_and_duplicates() {
    // Format 2: Pro is listed with one tier only, so it stays fixed under
    // its full slug (a tier slug is valid on its own).
    let c = Catalog::from_output(MODELS_FORMAT_2);
    assert_eq!(
        c.ids(),
        [
            "gemini-3.6-flash",
            "gemini-3.6-pro-high",
            "claude-sonnet-4-6",
            "claude-opus-4-6",
            "gpt-oss-120b-medium",
        ]
    );
    assert!(model(&c, "gemini-3.6-pro-high").is_fixed());
    // Format 1 goes through derived slugs to the same shape.
    let c = Catalog::from_output(MODELS_FORMAT_1);
    assert_eq!(
        c.ids(),
        [
            "gemini-3.5-flash",
            "gemini-3.5-pro-high",
            "claude-sonnet-4-5",
            "gpt-oss-120b-medium",
        ]
    );
    assert_eq!(model(&c, "gemini-3.5-flash").name, "Gemini 3.5 Flash");
    assert_eq!(model(&c, "claude-sonnet-4-5").name, "Claude Sonnet 4.5");
    // Tiers out of order and repeated lines.
    let c = Catalog::from_output(
        "gemini-9.9-flash-high\ngemini-9.9-flash-low\ngemini-9.9-flash-high\nclaude-x-1\n",
    );
    assert_eq!(c.ids(), ["gemini-9.9-flash", "claude-x-1"]);
    assert_eq!(model(&c, "gemini-9.9-flash").efforts, [Low, High]);
    // Non-Gemini families never fold, even with several tiers.
    let c = Catalog::from_output("gpt-oss-120b-low\ngpt-oss-120b-medium\n");
    assert_eq!(c.ids(), ["gpt-oss-120b-low", "gpt-oss-120b-medium"]);
}

// --- resolve: clamping ---------------------------------------------------------------

/// A 3-tier, a 2-tier (no medium) and a fixed model.
fn clamp_catalog() -> Catalog {
    Catalog::from_output(MODELS_FORMAT_3)
}

#[test]
fn clamp_table_for_every_pi_level() {
    use ThinkingLevel as T;
    let c = clamp_catalog();
    let levels: [Option<ThinkingLevel>; 8] = [
        None,
        Some(T::Off),
        Some(T::Minimal),
        Some(T::Low),
        Some(T::Medium),
        Some(T::High),
        Some(T::Xhigh),
        Some(T::Max),
    ];
    let three = [Low, Low, Low, Low, Medium, High, High, High];
    // Medium is missing: the tie between low and high goes up, as pi's own
    // clampThinkingLevel does.
    let two = [Low, Low, Low, Low, High, High, High, High];
    for (i, level) in levels.iter().enumerate() {
        let r = c.resolve("gemini-3.7-flash", *level).unwrap();
        assert_eq!(r.model, "gemini-3.7-flash", "{level:?}");
        assert_eq!(r.effort, Some(three[i]), "3-tier at {level:?}");
        assert_eq!(
            r.tier_slug.as_deref(),
            Some(format!("gemini-3.7-flash-{}", three[i].as_arg()).as_str())
        );
        let r = c.resolve("gemini-3.7-pro", *level).unwrap();
        assert_eq!(r.model, "gemini-3.7-pro");
        assert_eq!(r.effort, Some(two[i]), "2-tier at {level:?}");
        for fixed in ["claude-sonnet-4-6", "gpt-oss-120b-medium"] {
            let r = c.resolve(fixed, *level).unwrap();
            assert_eq!((r.model.as_str(), r.effort), (fixed, None), "{level:?}");
        }
    }
    // The same clamp as a function, on other tier sets.
    assert_eq!(clamp_effort(&[Medium, High], Some(T::Low)), Some(Medium));
    assert_eq!(clamp_effort(&[Low, Medium], Some(T::High)), Some(Medium));
    assert_eq!(clamp_effort(&[High], Some(T::Off)), Some(High));
    assert_eq!(clamp_effort(&[], Some(T::High)), None);
}

#[test]
fn resolve_accepts_tier_slugs_and_old_ids_and_rejects_unknowns() {
    let c = clamp_catalog();
    // A tier slug pins its tier whatever the level.
    let r = c
        .resolve("gemini-3.7-flash-high", Some(ThinkingLevel::Low))
        .unwrap();
    assert_eq!(
        (r.id.as_str(), r.model.as_str(), r.effort),
        ("gemini-3.7-flash", "gemini-3.7-flash", Some(High))
    );
    // The TypeScript bridge's ids (`gemini-3-7-flash`) still resolve.
    let r = c
        .resolve("gemini-3-7-flash", Some(ThinkingLevel::Medium))
        .unwrap();
    assert_eq!(
        (r.id.as_str(), r.effort),
        ("gemini-3.7-flash", Some(Medium))
    );
    match c.resolve("gemini-9-ultra", None) {
        Err(ModelError::UnknownModel { given, choices }) => {
            assert_eq!(given, "gemini-9-ultra");
            assert_eq!(choices, c.ids());
        }
        other => panic!("{other:?}"),
    }
    let e = c.resolve("nope", None).unwrap_err().to_string();
    assert!(
        e.contains("gemini-3.7-flash") && e.contains("claude-opus-4-6"),
        "{e}"
    );
    assert!(matches!(
        c.resolve("--effort", None),
        Err(ModelError::Invalid { .. })
    ));
}

// --- aliases ---------------------------------------------------------------------------

/// Two Flash versions, so version words matter.
fn alias_catalog() -> Catalog {
    let text = format!("{MODELS_FORMAT_1}{MODELS_FORMAT_3}");
    Catalog::from_output(&text)
}

#[test]
fn aliases_resolve_like_the_original() {
    let c = alias_catalog();
    let table: &[(&str, Option<Effort>, &str, Option<Effort>)] = &[
        // Friendly names: newest version, family default tier.
        ("flash", None, "gemini-3.7-flash", Some(Medium)),
        ("gemini", None, "gemini-3.7-flash", Some(Medium)),
        ("", None, "gemini-3.7-flash", Some(Medium)),
        ("pro", None, "gemini-3.7-pro", Some(High)),
        ("sonnet", None, "claude-sonnet-4-6", None),
        ("claude", None, "claude-sonnet-4-6", None),
        ("opus", None, "claude-opus-4-6", None),
        ("gpt-oss", None, "gpt-oss-120b-medium", None),
        ("GPT-OSS", None, "gpt-oss-120b-medium", None),
        // The configured default thinking tier, when the model offers it.
        ("flash", Some(Low), "gemini-3.7-flash", Some(Low)),
        ("flash", Some(High), "gemini-3.7-flash", Some(High)),
        ("pro", Some(Medium), "gemini-3.7-pro", Some(High)),
        ("pro", Some(Low), "gemini-3.7-pro", Some(Low)),
        // Tier words win over the default; a missing tier clamps (ties up).
        ("flash high", Some(Low), "gemini-3.7-flash", Some(High)),
        ("pro high", None, "gemini-3.7-pro", Some(High)),
        ("pro low", None, "gemini-3.7-pro", Some(Low)),
        ("pro medium", None, "gemini-3.7-pro", Some(High)),
        ("high pro", None, "gemini-3.7-pro", Some(High)),
        // Versions.
        ("3.5 flash low", None, "gemini-3.5-flash", Some(Low)),
        ("3.5 flash", None, "gemini-3.5-flash", Some(Medium)),
        ("flash 3.5 high", None, "gemini-3.5-flash", Some(High)),
        ("gemini 3.7 flash low", None, "gemini-3.7-flash", Some(Low)),
        // 3.5 Pro is listed with one tier: fixed, never an effort.
        ("3.5 pro", None, "gemini-3.5-pro-high", None),
        ("3.5 pro low", None, "gemini-3.5-pro-high", None),
        ("sonnet 4.6", None, "claude-sonnet-4-6", None),
        ("sonnet 4.5", None, "claude-sonnet-4-5", None),
        ("claude sonnet 4.5", None, "claude-sonnet-4-5", None),
        // Fixed models ignore tier words.
        ("sonnet high", None, "claude-sonnet-4-6", None),
        // Exact ids, tier slugs and display names.
        ("gemini-3.7-flash", Some(Low), "gemini-3.7-flash", Some(Low)),
        ("gemini-3.7-pro", None, "gemini-3.7-pro", Some(High)),
        (
            "gemini-3.5-flash-high",
            None,
            "gemini-3.5-flash",
            Some(High),
        ),
        ("claude-sonnet-4-5", None, "claude-sonnet-4-5", None),
        (
            "Gemini 3.7 Flash (Low)",
            None,
            "gemini-3.7-flash",
            Some(Low),
        ),
        ("Claude Opus 4.6", None, "claude-opus-4-6", None),
    ];
    for (alias, default, id, effort) in table {
        let r = c
            .resolve_alias(alias, *default)
            .unwrap_or_else(|e| panic!("{alias:?}: {e}"));
        assert_eq!(
            (r.id.as_str(), r.effort),
            (*id, *effort),
            "alias {alias:?} with default {default:?}"
        );
        assert_eq!(r.model, *id, "--model for {alias:?}");
    }
}

#[test]
fn unknown_aliases_are_typed_errors_listing_the_choices() {
    let c = alias_catalog();
    for bad in [
        "banana",
        "3.9 flash",
        "flash ultra",
        "sonnet 9.9",
        "pro flash claude",
    ] {
        match c.resolve_alias(bad, None) {
            Err(ModelError::UnknownAlias {
                given,
                reason,
                choices,
            }) => {
                assert_eq!(given, bad);
                assert!(!reason.is_empty());
                for want in ["flash", "pro", "gemini", "sonnet", "opus", "gpt-oss"] {
                    assert!(choices.iter().any(|c| c == want), "{bad}: {choices:?}");
                }
                assert!(choices.iter().any(|c| c == "gemini-3.7-flash"));
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let msg = c.resolve_alias("banana", None).unwrap_err().to_string();
    assert!(
        msg.contains("banana") && msg.contains("flash, pro, gemini"),
        "{msg}"
    );
    assert!(matches!(
        c.resolve_alias("-p", None),
        Err(ModelError::Invalid { .. })
    ));
}

#[test]
fn claude_and_gpt_oss_aliases_fall_back_when_agy_does_not_list_them() {
    let only_gemini = Catalog::from_output("gemini-3.7-flash-low\ngemini-3.7-flash-high\n");
    let r = only_gemini.resolve_alias("opus", None).unwrap();
    assert_eq!(
        (r.model.as_str(), r.effort),
        ("claude-opus-4-6-thinking", None)
    );
    let r = only_gemini.resolve_alias("gpt-oss", None).unwrap();
    assert_eq!(r.model, "gpt-oss-120b-medium");
    // Gemini aliases do not: a missing Pro is an error, not a guess.
    assert!(only_gemini.resolve_alias("pro", None).is_err());
}

// --- pi model objects -------------------------------------------------------------

#[test]
fn pi_model_objects_have_pi_ai_0_84_shape() {
    let c = Catalog::from_output(
        "gemini-3.7-flash-low\tGemini 3.7 Flash (Low)\n\
         gemini-3.7-flash-medium\tGemini 3.7 Flash (Medium)\n\
         gemini-3.7-flash-high\tGemini 3.7 Flash (High)\n\
         gemini-3.7-pro-low\tGemini 3.7 Pro (Low)\n\
         gemini-3.7-pro-high\tGemini 3.7 Pro (High)\n\
         claude-sonnet-4-6\tClaude Sonnet 4.6\n\
         claude-opus-4-6-thinking\tClaude Opus 4.6 (Thinking)\n\
         gpt-oss-120b-medium\tGPT-OSS 120B (Medium)\n",
    );
    let json = serde_json::to_value(c.to_pi()).unwrap();
    let arr = json.as_array().unwrap();
    assert_eq!(arr.len(), 5);
    for m in arr {
        assert_eq!(m["api"], "agy-bridge");
        assert_eq!(m["provider"], "antigravity");
        assert!(m["baseUrl"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(m["input"], serde_json::json!(["text"]));
        assert_eq!(
            m["cost"],
            serde_json::json!({"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0})
        );
        assert!(m["contextWindow"].as_u64().unwrap() > 0);
        assert!(m["maxTokens"].as_u64().unwrap() > 0);
        assert!(m["name"].as_str().is_some_and(|s| !s.is_empty()));
    }
    let by_id = |id: &str| arr.iter().find(|m| m["id"] == id).unwrap().clone();
    let flash = by_id("gemini-3.7-flash");
    assert_eq!(flash["name"], "Gemini 3.7 Flash");
    assert_eq!(flash["reasoning"], true);
    assert_eq!(
        flash["thinkingLevelMap"],
        serde_json::json!({"off": null, "minimal": null, "low": "low", "medium": "medium",
                           "high": "high", "xhigh": null, "max": null})
    );
    assert_eq!(flash["contextWindow"], 1_048_576);
    assert_eq!(flash["maxTokens"], 65_536);
    let pro = by_id("gemini-3.7-pro");
    assert_eq!(pro["thinkingLevelMap"]["medium"], Value::Null);
    assert_eq!(pro["thinkingLevelMap"]["high"], "high");
    // A fixed model that does not think: no toggle, no map.
    let sonnet = by_id("claude-sonnet-4-6");
    assert_eq!(sonnet["reasoning"], false);
    assert!(sonnet.get("thinkingLevelMap").is_none());
    assert_eq!(sonnet["contextWindow"], 200_000);
    assert_eq!(sonnet["maxTokens"], 64_000);
    // Fixed reasoning models show the one level they always run at.
    let opus = by_id("claude-opus-4-6-thinking");
    assert_eq!(opus["reasoning"], true);
    assert_eq!(
        opus["thinkingLevelMap"],
        serde_json::json!({"off": null, "minimal": null, "low": null, "medium": null,
                           "high": "high", "xhigh": null, "max": null})
    );
    let oss = by_id("gpt-oss-120b-medium");
    assert_eq!(oss["reasoning"], true);
    assert_eq!(oss["thinkingLevelMap"]["medium"], "medium");
    assert_eq!(oss["thinkingLevelMap"]["high"], Value::Null);
    assert_eq!(oss["contextWindow"], 131_072);
}

/// agy 1.3.x lists one slug per tier (docs/agy-format.md, "Efforts
/// (1.3.1)"): pi is offered exactly the efforts agy takes for each model
/// (gemini-3.1-pro low and high, gpt-oss-120b medium, gemini-3.8-flash low
/// to high), never `xhigh` or `max`, and a level pi asks for outside them
/// is clamped into them, so no turn sends agy an effort it refuses.
#[test]
fn a_1_3_listing_offers_pi_only_the_efforts_agy_takes() {
    let mut listing = String::new();
    for base in ["gemini-3.8-flash", "gemini-3.7-flash", "gemini-3.6-flash"] {
        for tier in ["high", "medium", "low"] {
            listing.push_str(&format!("{base}-{tier}\tGemini ({tier})\n"));
        }
    }
    for tier in ["high", "low"] {
        listing.push_str(&format!("gemini-3.1-pro-{tier}\tGemini 3.1 Pro ({tier})\n"));
    }
    for family in ["claude-opus-5-5", "claude-sonnet-5-5"] {
        for tier in ["low", "medium", "high"] {
            listing.push_str(&format!("{family}-{tier}\tClaude 5.5 ({tier})\n"));
        }
    }
    listing.push_str("gpt-oss-120b-medium\tGPT-OSS 120B (Medium)\n");
    let c = Catalog::from_output(&listing);
    let offered = |id: &str| -> Vec<String> {
        let pi = serde_json::to_value(model(&c, id).to_pi()).unwrap();
        let map = pi["thinkingLevelMap"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(
            map["xhigh"].is_null() && map["max"].is_null(),
            "{id}: {map:?}"
        );
        ["off", "minimal", "low", "medium", "high"]
            .iter()
            .filter(|l| !map[**l].is_null())
            .map(|l| l.to_string())
            .collect()
    };
    assert_eq!(offered("gemini-3.1-pro"), ["low", "high"]);
    assert_eq!(offered("gemini-3.8-flash"), ["low", "medium", "high"]);
    assert_eq!(offered("gpt-oss-120b-medium"), ["medium"]);
    assert_eq!(offered("claude-opus-5-5-high"), ["high"]);
    assert_eq!(c.models.len(), 4 + 6 + 1, "{:?}", c.ids());
    for (level, effort) in [
        (ThinkingLevel::Medium, High),
        (ThinkingLevel::Xhigh, High),
        (ThinkingLevel::Max, High),
        (ThinkingLevel::Minimal, Low),
    ] {
        let r = c.resolve("gemini-3.1-pro", Some(level)).unwrap();
        assert_eq!(r.effort, Some(effort), "{level}");
    }
    let oss = c
        .resolve("gpt-oss-120b-medium", Some(ThinkingLevel::Max))
        .unwrap();
    assert_eq!(
        (oss.model.as_str(), oss.effort),
        ("gpt-oss-120b-medium", None)
    );
}

// --- running agy (library) ---------------------------------------------------------

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A cancellation token nobody cancels.
fn never() -> tokio_util::sync::CancellationToken {
    tokio_util::sync::CancellationToken::new()
}

fn loader(bin: &Path, state: &Path) -> Loader {
    Loader {
        agy_bin: bin.to_path_buf(),
        state_dir: Some(state.to_path_buf()),
        timeout: Duration::from_millis(500),
        ttl: testing::CACHE_TTL,
        failure_ttl: testing::FAILURE_TTL,
    }
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn a_hung_agy_is_killed_with_its_group_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let bin = script(
        dir.path(),
        "agy",
        &format!("sleep 30 &\necho $! > {}\nwait", pidfile.display()),
    );
    let started = Instant::now();
    let err = testing::fetch(&bin, Duration::from_millis(1500), &never()).unwrap_err();
    assert_eq!(err, Unavailable::TimedOut { secs: 2 });
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid), "the grandchild {pid} outlived the timeout");

    // Through the loader: fallback, and the failure is remembered briefly.
    let state = dir.path().join("state");
    let l = loader(&bin, &state);
    let loaded = l.load(Policy::CacheFirst, &never());
    assert!(loaded.is_fallback());
    assert_eq!(loaded.catalog, Catalog::fallback());
    assert!(loaded.note().unwrap().contains("did not finish within 1s"));
    let entry = testing::read_cache(&l).unwrap();
    assert_eq!(entry.raw, "");
    assert!(entry.unavailable.is_some());
    let again = l.load(Policy::CacheFirst, &never());
    assert!(matches!(
        again.source,
        Source::Fallback { age: Some(_), .. }
    ));
}

#[test]
fn failures_are_classified() {
    let dir = tempfile::tempdir().unwrap();
    let boom = script(dir.path(), "boom", "echo 'boom: quota' >&2\nexit 3");
    assert_eq!(
        testing::fetch(&boom, Duration::from_secs(5), &never()).unwrap_err(),
        Unavailable::Exited {
            code: "status 3".into(),
            detail: "boom: quota".into()
        }
    );
    let signed_out = script(
        dir.path(),
        "signed-out",
        "echo 'Please sign in to view available models'\nexit 0",
    );
    assert_eq!(
        testing::fetch(&signed_out, Duration::from_secs(5), &never()).unwrap_err(),
        Unavailable::SignedOut {
            message: "Please sign in to view available models".into()
        }
    );
    // The progress line is never the reason a run failed.
    let failed = script(
        dir.path(),
        "failed",
        "echo 'Fetching available models...' >&2\necho 'Error: backend unavailable' >&2\nexit 1",
    );
    assert_eq!(
        testing::fetch(&failed, Duration::from_secs(5), &never())
            .unwrap_err()
            .to_string(),
        "`agy models` exited with status 1: Error: backend unavailable"
    );
    let empty = script(dir.path(), "empty", "echo 'Fetching available models...'");
    assert_eq!(
        testing::fetch(&empty, Duration::from_secs(5), &never()).unwrap_err(),
        Unavailable::NoModels
    );
    let missing = dir.path().join("no-such-agy");
    assert!(matches!(
        testing::fetch(&missing, Duration::from_secs(5), &never()).unwrap_err(),
        Unavailable::NotInstalled { .. }
    ));
    let ok = script(
        dir.path(),
        "ok",
        &format!("cat <<'EOF'\n{MODELS_FORMAT_3}EOF"),
    );
    assert_eq!(
        testing::fetch(&ok, Duration::from_secs(5), &never()).unwrap(),
        MODELS_FORMAT_3
    );
}

#[test]
fn a_failed_refresh_keeps_the_good_cache() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let ok = script(
        dir.path(),
        "ok",
        &format!("cat <<'EOF'\n{MODELS_FORMAT_3}EOF"),
    );
    let boom = script(dir.path(), "boom", "exit 1");
    let good = loader(&ok, &state).load(Policy::Refresh, &never());
    assert_eq!(good.source, Source::Agy);
    let bad = loader(&boom, &state);
    let loaded = bad.load(Policy::Refresh, &never());
    assert!(matches!(loaded.source, Source::CacheAfterFailure { .. }));
    assert_eq!(loaded.catalog, Catalog::from_output(MODELS_FORMAT_3));
    assert!(loaded
        .note()
        .unwrap()
        .contains("showing the catalog cached"));
    assert!(bad.refresh_quietly(&never()).is_err());
    let entry = testing::read_cache(&bad).unwrap();
    assert_eq!(entry.raw, MODELS_FORMAT_3);
    assert_eq!(entry.unavailable, None);
    // A corrupt cache is ignored and replaced.
    std::fs::write(state.join(testing::CACHE_FILE), "{not json").unwrap();
    let loaded = loader(&ok, &state).load(Policy::CacheFirst, &never());
    assert_eq!(loaded.source, Source::Agy);
}

// --- `agy-bridge models` with fake-agy ----------------------------------------------

/// fake-agy, built next to this test binary (`cargo test --workspace`, or
/// `cargo build -p fake-agy`).
fn fake_agy() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("fake-agy");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo test --workspace` (or `cargo build -p fake-agy` first)",
        bin.display()
    );
    bin
}

/// The ids fake-agy's built-in catalog folds to in formats 2 and 3 (agy
/// 1.1.20's listing).
const FAKE_IDS: [&str; 7] = [
    "gemini-3.7-flash",
    "gemini-3.6-flash",
    "gemini-3.5-flash",
    "gemini-3.1-pro",
    "claude-sonnet-4-6",
    "claude-opus-4-6-thinking",
    "gpt-oss-120b-medium",
];

/// fake-agy's format 1 (agy 1.0.10's labels), each label mapped to the slug
/// a later listing pairs it with.
const FAKE_IDS_1_0_10: [&str; 5] = [
    "gemini-3.5-flash",
    "gemini-3.1-pro",
    "claude-sonnet-4-6",
    "claude-opus-4-6-thinking",
    "gpt-oss-120b-medium",
];

/// The built-in catalog: agy 1.1.24's listing.
const FALLBACK_IDS: [&str; 7] = [
    "gemini-3.8-flash",
    "gemini-3.7-flash",
    "gemini-3.6-flash",
    "gemini-3.1-pro",
    "claude-sonnet-4-6",
    "claude-opus-4-6-thinking",
    "gpt-oss-120b-medium",
];

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn cache(&self) -> PathBuf {
        self.state().join(testing::CACHE_FILE)
    }

    fn cmd(&self, agy: &Path) -> Command {
        let mut cmd = Command::cargo_bin("agy-bridge").unwrap();
        cmd.timeout(Duration::from_secs(60))
            .env("HOME", self.dir.path())
            .env("AGY_BRIDGE_STATE_DIR", self.state())
            .env("AGY_BIN", agy)
            .env_remove("FAKE_AGY_MODELS_FORMAT")
            .env_remove("FAKE_AGY_MODELS_SIGNED_OUT")
            .args(["models"]);
        cmd
    }

    /// `models --json` → (ids, stderr).
    fn json(&self, cmd: &mut Command) -> (Vec<String>, String) {
        let out = cmd.arg("--json").output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("stdout is not pure JSON ({e}): {out:?}"));
        let ids = v
            .as_array()
            .expect("an array")
            .iter()
            .map(|m| {
                assert_eq!(m["provider"], "antigravity");
                m["id"].as_str().unwrap().to_string()
            })
            .collect();
        (ids, String::from_utf8_lossy(&out.stderr).into_owned())
    }

    fn saved_at(&self) -> Option<f64> {
        let text = std::fs::read_to_string(self.cache()).ok()?;
        serde_json::from_str::<Value>(&text).ok()?["savedAt"].as_f64()
    }
}

#[test]
fn cli_json_lists_fake_agys_models_in_every_format() {
    for (format, want) in [
        ("1", &FAKE_IDS_1_0_10[..]),
        ("2", &FAKE_IDS[..]),
        ("3", &FAKE_IDS[..]),
    ] {
        let env = Env::new();
        let (ids, stderr) = env.json(env.cmd(&fake_agy()).env("FAKE_AGY_MODELS_FORMAT", format));
        assert_eq!(ids, want, "format {format}");
        assert_eq!(stderr, "", "format {format}");
        assert!(env.cache().is_file());
    }
    // Without a format knob fake-agy prints its recording's output: format 3
    // as synth has it.
    let env = Env::new();
    let (ids, _) = env.json(&mut env.cmd(&fake_agy()));
    assert_eq!(ids, Catalog::from_output(MODELS_FORMAT_3).ids());
}

#[test]
fn cli_json_objects_are_full_pi_models() {
    let env = Env::new();
    let out = env
        .cmd(&fake_agy())
        .env("FAKE_AGY_MODELS_FORMAT", "3")
        .arg("--json")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for m in v.as_array().unwrap() {
        assert_eq!(m["type"], "chat", "{m}");
        for key in [
            "id",
            "name",
            "api",
            "provider",
            "baseUrl",
            "reasoning",
            "input",
            "cost",
            "contextWindow",
            "maxTokens",
        ] {
            assert!(m.get(key).is_some(), "{key} missing in {m}");
        }
    }
    let flash = &v[0];
    assert_eq!(flash["id"], "gemini-3.7-flash");
    assert_eq!(flash["name"], "Gemini 3.7 Flash");
    assert_eq!(flash["thinkingLevelMap"]["low"], "low");
    assert_eq!(flash["thinkingLevelMap"]["off"], Value::Null);
}

#[test]
fn cli_table() {
    let env = Env::new();
    let out = env
        .cmd(&fake_agy())
        .env("FAKE_AGY_MODELS_FORMAT", "2")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "{text}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("EFFORTS"),
        "{text}"
    );
    assert!(lines[1].starts_with("gemini-3.7-flash "), "{text}");
    assert!(lines[1].contains("Gemini 3.7 Flash") && lines[1].contains("low,medium,high"));
    assert!(lines[1].ends_with("gemini-3.7-flash --effort"), "{text}");
    assert!(lines[4].starts_with("gemini-3.1-pro ") && lines[4].contains("low,high"));
    assert!(lines[5].starts_with("claude-sonnet-4-6 ") && lines[5].contains("fixed"));
    assert!(lines[5].contains("Claude Sonnet 4.6 (Thinking)"), "{text}");
    assert!(lines[5].ends_with("claude-sonnet-4-6"));
    assert!(out.stderr.is_empty());
}

#[test]
fn cli_falls_back_when_signed_out() {
    let env = Env::new();
    let (ids, stderr) = env.json(env.cmd(&fake_agy()).env("FAKE_AGY_MODELS_SIGNED_OUT", "1"));
    assert_eq!(ids, FALLBACK_IDS);
    assert_eq!(
        stderr,
        "agy-bridge: note: agy models unavailable (agy is not signed in: Please sign in to view \
         available models. Launch the CLI without arguments to sign in.); using the built-in \
         fallback catalog\n"
    );
    // Readable mode says so too (stderr), the table stays on stdout.
    let out = env
        .cmd(&fake_agy())
        .env("FAKE_AGY_MODELS_SIGNED_OUT", "1")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("gemini-3.8-flash"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fallback"));
}

#[test]
fn cli_never_remembers_a_missing_agy() {
    let env = Env::new();
    let missing = env.dir.path().join("bin/agy");
    let (ids, stderr) = env.json(&mut env.cmd(&missing));
    assert_eq!(ids, FALLBACK_IDS);
    assert!(stderr.contains("agy is not installed"), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    assert!(!env.cache().exists(), "a missing agy was cached");
    // Asked again, it is looked for again (not "checked ... ago").
    let (_, stderr) = env.json(&mut env.cmd(&missing));
    assert!(
        stderr.contains("agy is not installed") && !stderr.contains("checked"),
        "{stderr}"
    );
    // Installed where AGY_BIN points: its catalog at once, no --refresh.
    std::fs::create_dir_all(missing.parent().unwrap()).unwrap();
    std::fs::copy(fake_agy(), &missing).unwrap();
    let (ids, stderr) = env.json(env.cmd(&missing).env("FAKE_AGY_MODELS_FORMAT", "3"));
    assert_eq!(ids, FAKE_IDS);
    assert_eq!(stderr, "");
}

#[test]
fn cli_a_remembered_failure_speaks_only_for_the_agy_that_failed() {
    let env = Env::new();
    let broken = script(
        env.dir.path(),
        "broken-agy",
        "echo 'Error: backend unavailable' >&2\nexit 2",
    );
    let (ids, stderr) = env.json(&mut env.cmd(&broken));
    assert_eq!(ids, FALLBACK_IDS);
    assert!(
        stderr.contains("exited with status 2: Error: backend unavailable"),
        "{stderr}"
    );
    let cache: Value =
        serde_json::from_str(&std::fs::read_to_string(env.cache()).unwrap()).unwrap();
    assert_eq!(cache["raw"], "");
    assert_eq!(
        cache["binary"]["path"],
        std::fs::canonicalize(&broken)
            .unwrap()
            .display()
            .to_string()
    );
    // The same agy again within a minute: the failure is remembered.
    let (ids, stderr) = env.json(&mut env.cmd(&broken));
    assert_eq!(ids, FALLBACK_IDS);
    assert!(
        stderr.contains("checked") && stderr.contains("--refresh"),
        "{stderr}"
    );
    // The same file touched (a reinstall): asked again.
    let later = SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&broken)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let (_, stderr) = env.json(&mut env.cmd(&broken));
    assert!(
        stderr.contains("exited with status 2") && !stderr.contains("checked"),
        "{stderr}"
    );
    // AGY_BIN pointing at a working agy: its catalog at once.
    let (ids, stderr) = env.json(env.cmd(&fake_agy()).env("FAKE_AGY_MODELS_FORMAT", "2"));
    assert_eq!(ids, FAKE_IDS);
    assert_eq!(stderr, "");
}

#[test]
fn cli_fresh_cache_is_served_without_running_agy() {
    let env = Env::new();
    let (ids, _) = env.json(env.cmd(&fake_agy()).env("FAKE_AGY_MODELS_FORMAT", "1"));
    assert_eq!(ids, FAKE_IDS_1_0_10);
    let saved = env.saved_at().unwrap();
    let missing = env.dir.path().join("gone/agy");
    let (ids, stderr) = env.json(&mut env.cmd(&missing));
    assert_eq!(ids, FAKE_IDS_1_0_10);
    assert_eq!(stderr, "");
    assert_eq!(env.saved_at(), Some(saved));
    // --refresh runs agy even when the cache is fresh; when agy fails the
    // good cache is shown and kept.
    let (ids, stderr) = env.json(env.cmd(&missing).arg("--refresh"));
    assert_eq!(ids, FAKE_IDS_1_0_10);
    assert!(stderr.contains("showing the catalog cached"), "{stderr}");
    assert_eq!(env.saved_at(), Some(saved));
}

#[test]
fn cli_stale_cache_is_served_and_refreshed_in_the_background() {
    let env = Env::new();
    std::fs::create_dir_all(env.state()).unwrap();
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    let old = now_ms - 10.0 * 60_000.0;
    // The TypeScript bridge's cache format.
    std::fs::write(
        env.cache(),
        serde_json::json!({ "raw": MODELS_FORMAT_2, "savedAt": old }).to_string(),
    )
    .unwrap();
    let started = Instant::now();
    let (ids, stderr) = env.json(env.cmd(&fake_agy()).env("FAKE_AGY_MODELS_FORMAT", "3"));
    assert_eq!(ids, Catalog::from_output(MODELS_FORMAT_2).ids());
    assert_eq!(stderr, "");
    // The refresh runs detached after the command returned.
    let deadline = Instant::now() + Duration::from_secs(20);
    while env.saved_at() == Some(old) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let saved = env.saved_at().expect("cache still readable");
    assert!(saved > old, "the cache was not refreshed within 20 s");
    assert!(saved >= now_ms - 1000.0);
    // The refresh held its lock while it ran, and let go of it when done.
    let lock = env.state().join(testing::REFRESH_LOCK_FILE);
    assert!(lock.is_file(), "no refresh lock was taken");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lock_is_free(&lock) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lock_is_free(&lock), "the refresh lock was left held");
    let (ids, stderr) = env.json(&mut env.cmd(&env.dir.path().join("gone/agy")));
    assert_eq!(ids, FAKE_IDS);
    assert_eq!(stderr, "");
    let tmp_left: Vec<_> = std::fs::read_dir(env.state())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(tmp_left.is_empty(), "{tmp_left:?}");
    eprintln!("stale round trip took {:?}", started.elapsed());
}

/// Whether nobody holds an `flock` on `path`.
fn lock_is_free(path: &Path) -> bool {
    use nix::fcntl::{Flock, FlockArg};
    let Ok(file) = std::fs::File::open(path) else {
        return true;
    };
    Flock::lock(file, FlockArg::LockExclusiveNonblock).is_ok()
}

#[test]
fn a_running_refresh_keeps_others_from_starting() {
    use nix::fcntl::{Flock, FlockArg};
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("ran.log");
    let agy = script(
        dir.path(),
        "agy",
        &format!(
            "echo ran >> {}\ncat <<'EOF'\n{MODELS_FORMAT_3}EOF",
            log.display()
        ),
    );
    let l = loader(&agy, &state);
    std::fs::create_dir_all(&state).unwrap();
    let file = std::fs::File::create(state.join(testing::REFRESH_LOCK_FILE)).unwrap();
    let held = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
    // Another refresh holds the lock: none starts, none runs agy.
    assert_eq!(
        l.refresh_quietly(&never()).unwrap_err(),
        Unavailable::RefreshRunning
    );
    assert!(!l.spawn_refresh(Path::new("/bin/true")));
    assert!(!log.exists(), "agy ran while another refresh held the lock");
    drop(held);
    assert_eq!(
        l.refresh_quietly(&never()).unwrap(),
        Catalog::from_output(MODELS_FORMAT_3)
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ran\n");
    assert!(lock_is_free(&state.join(testing::REFRESH_LOCK_FILE)));
}

// --- real agy output ------------------------------------------------------------------

/// Every file in `$AGY_CAPTURES_DIR/models/` through the parser, the
/// catalog and (for failures) a real run of a script replaying it: the
/// models agy listed, in agy's order, and the sentences we say.
#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn real_agy_models_captures() {
    let dir = common::captures_dir();
    let models_dir = dir.join("models");
    let mut names: Vec<String> = std::fs::read_dir(&models_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", models_dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no captures in {}", models_dir.display());
    let tmp = tempfile::tempdir().unwrap();
    for name in &names {
        let path = models_dir.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        match name.as_str() {
            "gobby-1.0.10-display.stdout" => check_1_0_10_labels(&text),
            "gobby-1.1.18.stdout" => {
                check_1_1_20_listing(&text);
                // With its stderr, as agy printed both: a catalog, and the
                // progress line is no model.
                let bin = script(
                    tmp.path(),
                    "agy-1.1.18",
                    &format!(
                        "cat '{}'\ncat '{}' >&2",
                        path.display(),
                        models_dir.join("gobby-1.1.18.stderr").display()
                    ),
                );
                assert_eq!(
                    testing::fetch(&bin, Duration::from_secs(10), &never()).unwrap(),
                    text
                );
            }
            "gobby-1.1.18.stderr" => {
                assert_eq!(text, "Fetching available models...\n");
                assert!(text.lines().all(models::is_progress));
                assert_eq!(parse_models_output(&text), vec![]);
            }
            "v1.1.24-merged.stdout" => check_1_1_24_merged(&text),
            "signed-out-1.1.20.stderr" => check_signed_out(&path, tmp.path()),
            other => panic!("no expectation for the capture models/{other}: add one here"),
        }
    }
}

fn check_1_0_10_labels(text: &str) {
    let raw = parse_models_output(text);
    assert!(raw.iter().all(|r| r.slug.is_none()), "{raw:?}");
    let slugs: Vec<String> = raw.iter().map(RawModel::slug).collect();
    assert_eq!(
        slugs,
        [
            "gemini-3.5-flash-low",
            "gemini-3.5-flash-medium",
            "gemini-3.5-flash-high",
            "gemini-3.1-pro-low",
            "gemini-3.1-pro-high",
            // Labels that do not spell their slugs.
            "claude-sonnet-4-6",
            "claude-opus-4-6-thinking",
            "gpt-oss-120b-medium",
        ]
    );
    let c = Catalog::from_output(text);
    assert_eq!(c.ids(), FAKE_IDS_1_0_10);
    let names: Vec<&str> = c.models.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Gemini 3.5 Flash",
            "Gemini 3.1 Pro",
            "Claude Sonnet 4.6 (Thinking)",
            "Claude Opus 4.6 (Thinking)",
            "GPT-OSS 120B (Medium)",
        ]
    );
    assert_eq!(model(&c, "gemini-3.5-flash").efforts, [Low, Medium, High]);
    assert_eq!(model(&c, "gemini-3.1-pro").efforts, [Low, High]);
}

fn check_1_1_20_listing(text: &str) {
    let raw = parse_models_output(text);
    assert_eq!(raw.len(), 14);
    for (r, line) in raw.iter().zip(text.lines()) {
        let (slug, label) = line.split_once('\t').unwrap();
        assert_eq!(
            r,
            &RawModel {
                slug: Some(slug.into()),
                display: label.into()
            }
        );
    }
    let c = Catalog::from_output(text);
    assert_eq!(c.ids(), FAKE_IDS);
    assert_eq!(model(&c, "gemini-3.7-flash").efforts, [Low, Medium, High]);
    assert!(model(&c, "claude-sonnet-4-6").thinking);
}

fn check_1_1_24_merged(text: &str) {
    let (first, rest) = text.split_once('\n').unwrap();
    assert!(models::is_progress(first), "{first}");
    let raw = parse_models_output(text);
    let pairs: Vec<(String, String)> = raw
        .iter()
        .map(|r| (r.slug.clone().unwrap(), r.display.clone()))
        .collect();
    let listing: Vec<(String, String)> = testing::LISTING_1_1_24
        .iter()
        .map(|(s, l)| (s.to_string(), l.to_string()))
        .collect();
    assert_eq!(pairs, listing, "the built-in catalog is this listing");
    assert_eq!(Catalog::from_output(text), Catalog::fallback());
    assert_eq!(Catalog::fallback().ids(), FALLBACK_IDS);
    // Merged the other way round, the progress line comes last: the same.
    let progress_last = format!("{rest}{first}\n");
    assert_eq!(parse_models_output(&progress_last), raw);
}

fn check_signed_out(capture: &Path, tmp: &Path) {
    let text = std::fs::read_to_string(capture).unwrap();
    assert_eq!(parse_models_output(&text), vec![]);
    let bin = script(
        tmp,
        "agy-signed-out",
        &format!("cat '{}' >&2\nexit 1", capture.display()),
    );
    let err = testing::fetch(&bin, Duration::from_secs(10), &never()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agy is not signed in: Please sign in to view available models. Launch the CLI \
         without arguments to sign in."
    );
    let loaded = loader(&bin, &tmp.join("state-signed-out")).load(Policy::CacheFirst, &never());
    assert!(loaded.is_fallback());
    assert!(
        loaded
            .note()
            .unwrap()
            .starts_with("agy models unavailable (agy is not signed in: Please sign in"),
        "{:?}",
        loaded.note()
    );
}
