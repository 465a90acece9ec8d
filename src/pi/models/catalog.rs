//! The catalog: Gemini tiers folded into one model with efforts, fixed
//! models as they are, the pi model projection, and resolving a pi model id
//! or an AskAntigravity alias to `--model` / `--effort`.

use super::listed::LISTING_1_1_24;
use super::parse::{
    display_from_slug, is_slug, is_version_token, parse_models_output, slug_from_display,
    split_tier, version_key, RawModel, SlugParts,
};
use super::{clamp_effort, nearest_effort, ThinkingLevel, EFFORTS, PI_API, PI_BASE_URL};
use crate::pi::provider::PROVIDER_ID;
use agy_format::agy_args::Effort;
use serde::Serialize;

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
pub(crate) enum Family {
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

    pub(crate) fn family(&self) -> Family {
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
    pub(crate) fn fixed_tier(&self) -> Option<Effort> {
        if self.is_fixed() {
            split_tier(&self.slug).1
        } else {
            None
        }
    }

    /// The full tier slug for `effort` (`gemini-3.7-flash-high`).
    pub(crate) fn tier_slug(&self, effort: Effort) -> Option<&str> {
        self.efforts
            .iter()
            .position(|e| *e == effort)
            .and_then(|i| self.tier_slugs.get(i))
            .map(String::as_str)
    }

    /// (context window, max output tokens). agy does not report them; these
    /// are the families' documented sizes.
    pub(crate) fn limits(&self) -> (u64, u64) {
        match self.family() {
            Family::Gemini => (1_048_576, 65_536),
            Family::Claude => (200_000, 64_000),
            Family::GptOss => (131_072, 32_768),
            Family::Other => (131_072, 32_768),
        }
    }

    /// The model's context window in tokens (its family's documented size:
    /// agy does not report it).
    pub fn context_window(&self) -> u64 {
        self.limits().0
    }

    /// The pi `Model<Api>` object for this model.
    pub fn to_pi(&self) -> PiModel {
        let (context_window, max_tokens) = self.limits();
        PiModel {
            kind: "chat",
            id: self.id.clone(),
            name: self.name.clone(),
            api: PI_API,
            provider: PROVIDER_ID,
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

/// pi-ai's chat `Model<Api>` (1.6.0's dist/types.d.ts `interface Model`;
/// pi-coding-agent's `ProviderChatModelConfig`), as JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiModel {
    /// The model's operation: always `chat` (pi also has `image` and
    /// `classifier` models; an omitted `type` means `chat`, said here all the same).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The id pi sends back in its request (the catalog id).
    pub id: String,
    /// The name pi's model picker shows.
    pub name: String,
    /// The `api` the pi extension registers its stream under (`agy-bridge`).
    pub api: &'static str,
    /// The provider id (`antigravity`).
    pub provider: &'static str,
    /// A placeholder URL: pi requires one, nothing connects to it.
    pub base_url: &'static str,
    /// Whether the model thinks, so pi offers thinking levels.
    pub reasoning: bool,
    /// The thinking levels pi may offer, mapped to agy's tiers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<ThinkingLevelMap>,
    /// What the model takes in: text only, as `agy -p` does.
    pub input: &'static [&'static str],
    /// Prices per token, all zero.
    pub cost: PiCost,
    /// The context window in tokens, which pi's meter measures against.
    pub context_window: u64,
    /// The most tokens one answer may have.
    pub max_tokens: u64,
}

/// pi-ai's `ThinkingLevelMap` (`Partial<Record<ModelThinkingLevel, string |
/// null>>`); `null` marks a level unsupported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThinkingLevelMap {
    /// pi's `off` level; always unsupported.
    pub off: Option<String>,
    /// pi's `minimal` level; always unsupported.
    pub minimal: Option<String>,
    /// pi's `low` level: agy's `low` tier when offered.
    pub low: Option<String>,
    /// pi's `medium` level: agy's `medium` tier when offered.
    pub medium: Option<String>,
    /// pi's `high` level: agy's `high` tier when offered.
    pub high: Option<String>,
    /// pi's `xhigh` level; always unsupported.
    pub xhigh: Option<String>,
    /// pi's `max` level; always unsupported.
    pub max: Option<String>,
}

/// pi-ai's `ModelCost`: all zero (agy bills through the user's subscription).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiCost {
    /// Per input token.
    pub input: f64,
    /// Per output token.
    pub output: f64,
    /// Per token read from the prompt cache.
    pub cache_read: f64,
    /// Per token written to the prompt cache.
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
    /// No model in the catalog has this id or name.
    #[error("unknown model {given:?}; available models: {}", choices.join(", "))]
    UnknownModel {
        /// The id asked for.
        given: String,
        /// The catalog's ids, to choose from.
        choices: Vec<String>,
    },
    /// An AskAntigravity alias names no model, or more than one.
    #[error("unknown model alias {given:?} ({reason}); choose one of: {}", choices.join(", "))]
    UnknownAlias {
        /// The alias asked for.
        given: String,
        /// Why it did not resolve.
        reason: String,
        /// The aliases and ids to choose from.
        choices: Vec<String>,
    },
    /// The name would read as a flag on agy's command line.
    #[error("model {given:?} starts with \"-\" and is not a valid model name")]
    Invalid {
        /// The name asked for.
        given: String,
    },
}

/// The models, in agy's order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Catalog {
    /// One entry per model: a Gemini base with its tiers, or a fixed model.
    pub models: Vec<Model>,
}

/// The short aliases AskAntigravity documents.
pub(crate) const ALIASES: &[&str] = &["flash", "pro", "gemini", "sonnet", "opus", "gpt-oss"];

pub(super) fn strip_tier_suffix(display: &str) -> String {
    let d = display.trim();
    for e in EFFORTS {
        let suffix = format!("({})", e.as_arg());
        if d.len() > suffix.len() && d.to_lowercase().ends_with(&suffix) {
            return d[..d.len() - suffix.len()].trim_end().to_string();
        }
    }
    d.to_string()
}

pub(super) fn is_thinking_name(s: &str) -> bool {
    s.to_lowercase().contains("thinking")
}

impl Catalog {
    /// Parse `agy models` output and fold it ([`parse_models_output`] then
    /// `Catalog::from_raw`).
    pub fn from_output(stdout: &str) -> Catalog {
        Catalog::from_raw(&parse_models_output(stdout))
    }

    /// Fold parsed lines into models. A Gemini base listed with two or more
    /// tiers becomes one effort model (id = base slug, efforts = the tiers
    /// listed); every other slug (Claude, GPT-OSS, a Gemini base with a
    /// single tier) is a fixed model under agy's own slug. First-seen order
    /// is kept; duplicate slugs are dropped.
    pub(crate) fn from_raw(raw: &[RawModel]) -> Catalog {
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

    /// The built-in fallback catalog: agy 1.1.24's listing
    /// (`LISTING_1_1_24`) folded as agy's own output is.
    pub fn fallback() -> Catalog {
        let raw: Vec<RawModel> = LISTING_1_1_24
            .iter()
            .map(|(slug, label)| RawModel {
                slug: Some(slug.to_string()),
                display: label.to_string(),
            })
            .collect();
        Catalog::from_raw(&raw)
    }

    /// Whether agy listed no model (signed out, or an empty listing).
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The pi model ids, in agy's order: what an unknown id is told to choose from.
    pub fn ids(&self) -> Vec<String> {
        self.models.iter().map(|m| m.id.clone()).collect()
    }

    /// The pi model objects, in order.
    pub fn to_pi(&self) -> Vec<PiModel> {
        self.models.iter().map(Model::to_pi).collect()
    }

    /// A model by id, or by something naming it: one of its tier slugs
    /// (with that tier), its display name (any case), or the TypeScript bridge's
    /// punctuation-free id (`gemini-3-7-flash`), so old configs keep working.
    pub(crate) fn find(&self, name: &str) -> Option<(&Model, Option<Effort>)> {
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
    /// clamped to its tiers (see `clamp_effort`); a tier slug given as the
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
    /// Accepted: an exact id, tier slug or display name (as `Catalog::find`);
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

pub(super) fn resolved(model: &Model, effort: Option<Effort>) -> Resolved {
    let effort = if model.is_fixed() { None } else { effort };
    Resolved {
        id: model.id.clone(),
        name: model.name.clone(),
        model: model.slug.clone(),
        effort,
        tier_slug: effort.and_then(|e| model.tier_slug(e)).map(str::to_string),
    }
}

/// Lowercase alphanumerics only: `gemini-3.7-flash` and the TypeScript bridge's
/// `gemini-3-7-flash` compare equal.
pub(super) fn flatten(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The tier AskAntigravity uses when none is asked for (the TypeScript bridge's
/// FAMILY_DEFAULT_TIER): Pro runs high, everything else medium.
pub(super) fn family_default_tier(model: &Model) -> Effort {
    if SlugParts::of(&model.slug).words.iter().any(|w| w == "pro") {
        Effort::High
    } else {
        Effort::Medium
    }
}

/// An alias taken apart: `3.5 flash low` → vendor gemini, words [flash],
/// version 3.5, tier low.
#[derive(Debug, Clone)]
pub(super) struct AliasQuery {
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
