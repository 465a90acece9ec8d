//! The drift rules: a baseline and a current [`Fingerprint`] in, [`Finding`]s
//! out, judged the way a maintainer would judge them.
//!
//! **Breaking** means data a user sees would be lost or misread:
//! - a load-bearing path (`steps::LOAD_BEARING`) whose content moved: absent
//!   in steps where, in the message that encloses it, a length-delimited
//!   field appeared that the decoder does not read, the baseline never saw
//!   length-delimited there, and that never appears beside the path, when
//!   so many such steps lacking the path is unlikely to be chance (see
//!   [`super::SIGNIFICANCE`]). Judged step by step (the fingerprint's
//!   [`super::StandIn`] tally), so a field in a tool call or in other steps
//!   is not taken for where the text went, and steps of an older agy that
//!   still carry the path hide nothing;
//! - a load-bearing path gone from every step that should carry it, when
//!   that is unlikely to be chance, no alternative the decoder reads carries
//!   its content ([`content_alternatives`]), and the path is one a step
//!   always has (a tool call's name, a subagent's child id);
//! - a path the decoder reads arriving with a wire type the decoder does not
//!   read it as;
//! - content-bearing steps (user input, planner responses, tool steps, ...)
//!   that fail to decode;
//! - a content-bearing step type gone from a re-recorded corpus while a step
//!   type the decoder does not know appeared;
//! - a status outside `CortexStepStatus`, a `steps` table or column the
//!   reader needs gone, `agy models` output in no known format, and a
//!   recording that writes a table or column its own schema lacks (no
//!   database could hold it; `decode` refuses such a recording).
//!
//! A missing path alone is **not** breaking: proto3 omits zero and empty
//! values (a usage count of 0, a false flag, an empty string, no stop
//! reason), so optional and zero-able paths that are absent are reported as
//! notes ([`Class::Info`]). New things are **additive** warnings. A baseline
//! step type or message these inputs never show was not exercised: that is
//! coverage, listed in the report, never a finding.
//!
//! [`compare`] runs one function per family of finding, each adding to a
//! [`Findings`] builder.

use super::fingerprint::{parent, Fingerprint, PathKey, StepTypePrint};
use super::report::{describe_path, Report};
use super::{NEEDED_STEP_COLUMNS, SIGNIFICANCE};
use agy_format::steps::{self, Kind, Known, StepStatus, StepType, LOAD_BEARING};
use agy_format::wire::WireType;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::OnceLock;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Data a user sees would be lost or misread: exit 1.
    Breaking,
    /// New, or unused by the decoder: printed as a warning.
    Additive,
    /// Worth knowing, loses nothing (an absent optional path): a note.
    Info,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    MissingLoadBearing,
    WireTypeChange,
    VanishedStepType,
    DecodeErrors,
    VanishedTable,
    VanishedColumn,
    UnknownWrite,
    ModelsFormat,
    NewStatus,
    NewStepType,
    NewPath,
    NewTable,
    NewColumn,
    SchemaChange,
    /// A load-bearing path absent, its content carried by an alternative.
    CarriedElsewhere,
    /// An optional or zero-able path absent (proto3 omitted it).
    AbsentPath,
}

/// One difference from the baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub class: Class,
    pub kind: FindingKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_type: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The readable sentence (without the class prefix).
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl Finding {
    fn at(&mut self, step_type: i64) -> &mut Self {
        self.step_type = Some(step_type);
        self
    }

    fn path(&mut self, path: &str) -> &mut Self {
        self.path = Some(path.to_string());
        self
    }

    fn example(&mut self, example: &str) -> &mut Self {
        self.example = Some(example.to_string()).filter(|e| !e.is_empty());
        self
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.class {
            Class::Breaking => "BREAKING",
            Class::Additive => "warning",
            Class::Info => "note",
        };
        write!(f, "{tag}: {}", self.message)
    }
}

/// The findings of one comparison, and what the inputs did not exercise.
#[derive(Default)]
pub(super) struct Findings {
    list: Vec<Finding>,
    /// Baseline step types absent here.
    not_exercised: Vec<String>,
    /// Baseline paths absent here where that could well be chance.
    not_seen: Vec<String>,
}

impl Findings {
    fn add(&mut self, class: Class, kind: FindingKind, message: String) -> &mut Finding {
        self.list.push(Finding {
            class,
            kind,
            step_type: None,
            path: None,
            message,
            example: None,
        });
        let last = self.list.len() - 1;
        &mut self.list[last]
    }

    fn finish(mut self, nothing_to_compare: bool) -> Report {
        let key = |f: &Finding| (f.class, f.step_type, f.kind, f.path.clone().map(PathKey));
        self.list.sort_by_key(key);
        let count = |c: Class| self.list.iter().filter(|f| f.class == c).count();
        Report {
            breaking: count(Class::Breaking),
            additive: count(Class::Additive),
            info: count(Class::Info),
            nothing_to_compare,
            findings: self.list,
            not_exercised: self.not_exercised,
            not_seen: self.not_seen,
        }
    }
}

/// A path the decoder's known-field tree lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownPath {
    /// The wire types the decoder reads it as (one, unless the tree lists a
    /// field number twice).
    pub wire: Vec<WireType>,
    /// What it is, from the tree's names: `planner response text`.
    pub label: String,
}

/// Every path the known-field tree lists (`20.1`, `metadata.4.2`), built
/// once from [`steps::STEP`] and the side-column trees.
pub fn known_paths() -> &'static BTreeMap<String, KnownPath> {
    static KNOWN: OnceLock<BTreeMap<String, KnownPath>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        fn walk(tree: &[Known], prefix: &str, label: &str, out: &mut BTreeMap<String, KnownPath>) {
            for k in tree {
                let path = if prefix.is_empty() {
                    k.number.to_string()
                } else {
                    format!("{prefix}.{}", k.number)
                };
                let name = k.name.replace('_', " ");
                let label = if label.is_empty() {
                    name
                } else {
                    format!("{label} {name}")
                };
                let entry = out.entry(path.clone()).or_insert_with(|| KnownPath {
                    wire: Vec::new(),
                    label: label.clone(),
                });
                if !entry.wire.contains(&k.kind.wire_type()) {
                    entry.wire.push(k.kind.wire_type());
                }
                if let Kind::Msg(sub) = k.kind {
                    walk(sub, &path, &label, out);
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(steps::STEP, "", "", &mut out);
        for (column, tree) in steps::SIDE_COLUMNS {
            walk(tree, column, "", &mut out);
        }
        out
    })
}

/// Load-bearing paths whose value proto3 omits in normal use, because it is
/// often empty: the answer text (a response that only calls tools), thinking,
/// a command's output (a command that printed nothing), a tool's arguments.
/// Their absence is breaking only when something unread appears in its
/// place in the same steps (see `moved_content`). A path under one of these
/// counts too (`28.21.1`).
pub const ZERO_ABLE: &[&str] = &["20.1", "20.3", "20.7.3", "28.21", "5.4.3", "metadata.4.3"];

/// Paths the decoder reads the same content from when a load-bearing path
/// is absent (its fallbacks in `steps::decode`): text or the modified
/// response, thinking or raw thinking, a tool call's name or its second name
/// field, the user's text or its items, a command or its second field, a
/// model error's user message or its summary and diagnostic.
const ALTERNATIVES: &[(&str, &[&str])] = &[
    ("20.1", &["20.8"]),
    ("20.3", &["20.16"]),
    ("20.7.2", &["20.7.9"]),
    ("5.4.2", &["5.4.9"]),
    ("metadata.4.2", &["metadata.4.9"]),
    ("19.2", &["19.3.1"]),
    ("19.3.1", &["19.2"]),
    ("28.23", &["28.25"]),
    ("28.25", &["28.23"]),
    ("24.3.9", &["24.3.2", "24.3.3"]),
    ("40.1", &["40.3"]),
];

/// The paths that carry `path`'s content for the decoder when it is absent.
pub fn content_alternatives(path: &str) -> &'static [&'static str] {
    ALTERNATIVES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, alts)| *alts)
        .unwrap_or(&[])
}

/// Step types the decoder recognises but shows nothing of (bookkeeping:
/// ephemeral messages 90, conversation history 98).
const BOOKKEEPING_TYPES: &[i64] = &[90, 98];

/// GENERIC (132): the tool step whose tool only its metadata names.
const GENERIC_TOOL_TYPE: i64 = 132;

/// Whether steps of this type carry something a user sees.
fn content_bearing(t: i64) -> bool {
    StepType::from_raw(t).is_known() && !BOOKKEEPING_TYPES.contains(&t)
}

fn is_zero_able(path: &str) -> bool {
    ZERO_ABLE
        .iter()
        .any(|z| path == *z || path.starts_with(&format!("{z}.")))
}

/// A tool-name path of the step's metadata (`5.4.2`, `metadata.4.2`).
fn is_tool_name(path: &str) -> bool {
    matches!(path, "5.4.2" | "5.4.9" | "metadata.4.2" | "metadata.4.9")
}

/// Whether the step type itself says what `path` would: a dedicated tool
/// step's type names its tool (GENERIC's does not).
fn named_by_type(t: i64, path: &str) -> bool {
    is_tool_name(path) && StepType::from_raw(t).tool_name().is_some() && t != GENERIC_TOOL_TYPE
}

/// `1 step`, `3 steps`.
fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn type_name(t: i64) -> String {
    format!("{t} ({})", StepType::from_raw(t).label())
}

fn wire_list(w: &BTreeMap<String, u64>) -> String {
    join_wires(w.keys())
}

/// Wire-type names as `len/varint`.
fn join_wires<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    names
        .into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("/")
}

/// What every rule reads.
struct Ctx<'a> {
    baseline: &'a Fingerprint,
    current: &'a Fingerprint,
    known: &'static BTreeMap<String, KnownPath>,
    load_bearing: BTreeSet<&'static str>,
    /// The inputs include every baseline source by name (a re-recorded
    /// corpus): an absence there is evidence, whatever the odds.
    covered: bool,
}

/// One step type present in both fingerprints.
struct TypePair<'a> {
    t: i64,
    name: String,
    base: &'a StepTypePrint,
    cur: &'a StepTypePrint,
}

/// Compare `current` with `baseline`.
pub fn compare(baseline: &Fingerprint, current: &Fingerprint) -> Report {
    let mut f = Findings::default();
    if current.sources.is_empty() || current.total_steps() == 0 {
        return f.finish(true);
    }
    let ctx = Ctx {
        baseline,
        current,
        known: known_paths(),
        load_bearing: LOAD_BEARING.iter().map(|(p, _)| *p).collect(),
        covered: baseline.sources.iter().all(|s| current.sources.contains(s)),
    };
    new_step_types(&ctx, &mut f);
    vanished_step_types(&ctx, &mut f);
    decode_errors(&ctx, &mut f);
    for (t, cur) in &current.step_types {
        let Some(base) = baseline.step_types.get(t) else {
            continue;
        };
        let pair = TypePair {
            t: *t,
            name: type_name(*t),
            base,
            cur,
        };
        new_paths(&ctx, &pair, &mut f);
        wire_type_changes(&ctx, &pair, &mut f);
        let moved = moved_content(&ctx, &pair, &mut f);
        missing_paths(&ctx, &pair, &moved, &mut f);
    }
    statuses(&ctx, &mut f);
    tables(&ctx, &mut f);
    unknown_writes(&ctx, &mut f);
    other_blobs(&ctx, &mut f);
    models_formats(&ctx, &mut f);
    f.finish(false)
}

fn new_step_types(ctx: &Ctx<'_>, f: &mut Findings) {
    for (t, cur) in &ctx.current.step_types {
        if ctx.baseline.step_types.contains_key(t) {
            continue;
        }
        let known = if StepType::from_raw(*t).is_known() {
            "the decoder knows this type"
        } else {
            "the decoder does not know it and skips such steps"
        };
        f.add(
            Class::Additive,
            FindingKind::NewStepType,
            format!(
                "step type {} is new: {} with {} field paths ({known}); e.g. {}",
                type_name(*t),
                plural(cur.steps, "step"),
                cur.paths.len(),
                cur.example
            ),
        )
        .at(*t)
        .example(&cur.example);
    }
}

fn vanished_step_types(ctx: &Ctx<'_>, f: &mut Findings) {
    let new_unknown: Vec<String> = ctx
        .current
        .step_types
        .keys()
        .filter(|t| !ctx.baseline.step_types.contains_key(t))
        .filter(|t| !StepType::from_raw(**t).is_known())
        .map(|t| t.to_string())
        .collect();
    for (t, base) in &ctx.baseline.step_types {
        if ctx.current.step_types.contains_key(t) {
            continue;
        }
        if !ctx.covered {
            f.not_exercised.push(type_name(*t));
            continue;
        }
        let what = format!(
            "step type {} no longer appears although these inputs include every baseline recording (baseline: {}, e.g. {})",
            type_name(*t),
            plural(base.steps, "step"),
            base.example
        );
        if content_bearing(*t) && !new_unknown.is_empty() {
            f.add(
                Class::Breaking,
                FindingKind::VanishedStepType,
                format!(
                    "{what}, and step types the decoder does not know appeared ({}): its steps have probably been renumbered and would not be shown",
                    new_unknown.join(", ")
                ),
            )
            .at(*t)
            .example(&base.example);
        } else {
            let why = if content_bearing(*t) {
                "no step type the decoder does not know took its place, so its steps are probably written as types the decoder reads (agy 1.1.18 moved most tools to GENERIC, 132) and nothing is lost"
            } else {
                "the decoder shows nothing of this type, so nothing is lost"
            };
            f.add(
                Class::Additive,
                FindingKind::VanishedStepType,
                format!("{what}; {why}"),
            )
            .at(*t)
            .example(&base.example);
        }
    }
}

fn decode_errors(ctx: &Ctx<'_>, f: &mut Findings) {
    for (t, cur) in &ctx.current.step_types {
        let base_errors = ctx
            .baseline
            .step_types
            .get(t)
            .map_or(0, |b| b.decode_errors);
        if cur.decode_errors == 0 || base_errors > 0 {
            continue;
        }
        let counts = format!(
            "{} of {} steps of type {} fail to decode (malformed protobuf; e.g. {})",
            cur.decode_errors,
            cur.steps,
            type_name(*t),
            cur.example
        );
        let (class, consequence) = if content_bearing(*t) {
            (Class::Breaking, "what they carry would not be shown")
        } else {
            (
                Class::Additive,
                "the decoder shows nothing of this type anyway",
            )
        };
        f.add(
            class,
            FindingKind::DecodeErrors,
            format!("{counts}: {consequence}"),
        )
        .at(*t)
        .example(&cur.example);
    }
}

fn new_paths(ctx: &Ctx<'_>, p: &TypePair<'_>, f: &mut Findings) {
    for (path, pp) in &p.cur.paths {
        if p.base.paths.contains_key(path) {
            continue;
        }
        let read = if ctx.known.contains_key(&path.0) {
            ", which the decoder reads,"
        } else {
            ""
        };
        f.add(
            Class::Additive,
            FindingKind::NewPath,
            format!(
                "{}: new field {}{read} with wire type {} in {} of {} steps (e.g. {})",
                p.name,
                describe_path(&path.0),
                wire_list(&pp.wire),
                pp.steps,
                p.cur.steps,
                pp.example
            ),
        )
        .at(p.t)
        .path(&path.0)
        .example(&pp.example);
    }
}

fn wire_type_changes(ctx: &Ctx<'_>, p: &TypePair<'_>, f: &mut Findings) {
    for (path, pp) in &p.cur.paths {
        let Some(bp) = p.base.paths.get(path) else {
            continue;
        };
        let changed: Vec<&String> = pp
            .wire
            .keys()
            .filter(|w| !bp.wire.contains_key(*w))
            .collect();
        if changed.is_empty() {
            continue;
        }
        let n: u64 = changed.iter().map(|w| pp.wire[*w]).sum();
        let what = format!(
            "{}: {} changed wire type from {} to {} in {n} of {} steps (e.g. {})",
            p.name,
            describe_path(&path.0),
            wire_list(&bp.wire),
            join_wires(changed.iter().copied()),
            p.cur.steps,
            pp.example
        );
        let misread = ctx.known.get(&path.0).is_some_and(|k| {
            changed
                .iter()
                .any(|w| !k.wire.iter().any(|kw| kw.name() == w.as_str()))
        });
        let (class, consequence) = match (ctx.known.get(&path.0), misread) {
            (Some(k), true) => (
                Class::Breaking,
                format!(
                    "the decoder reads it as {}, so it would be misread or dropped",
                    k.wire
                        .iter()
                        .map(|w| w.name())
                        .collect::<Vec<_>>()
                        .join("/")
                ),
            ),
            (Some(_), false) => (
                Class::Additive,
                "the decoder already reads it as that".to_string(),
            ),
            (None, _) => (Class::Additive, "the decoder does not read it".to_string()),
        };
        f.add(
            class,
            FindingKind::WireTypeChange,
            format!("{what}: {consequence}"),
        )
        .at(p.t)
        .path(&path.0)
        .example(&pp.example);
    }
}

/// How often a baseline path is expected where the current steps could carry
/// it: relative to its nearest enclosing message still present here (or to
/// the step, at the top), so that a tool call's name is judged only where
/// tool calls are.
struct Expectation {
    /// Current steps that lack the path although they carry the enclosing
    /// message (all of them: [`expectation`]; those where another field
    /// took its place: [`stand_in_expectation`]).
    n: u64,
    /// Baseline steps that carried the path, and the enclosing message.
    had: u64,
    of: u64,
    /// The chance that `n` steps all lack it by accident.
    chance: f64,
    /// The enclosing message (`None`: the step itself).
    scope: Option<String>,
}

impl Expectation {
    /// `path` missing from `n` current steps that carry `scope`.
    fn new(p: &TypePair<'_>, path: &str, scope: Option<&str>, n: u64) -> Expectation {
        let of = base_steps(p, scope);
        let had = base_steps(p, Some(path));
        let share = if of == 0 {
            0.0
        } else {
            (had as f64 / of as f64).min(1.0)
        };
        Expectation {
            n,
            had,
            of,
            chance: (1.0 - share).powi(n.min(i32::MAX as u64) as i32),
            scope: scope.map(str::to_string),
        }
    }
}

/// Baseline steps of this type that carry `path` (`None`: all of them).
fn base_steps(p: &TypePair<'_>, path: Option<&str>) -> u64 {
    match path {
        Some(q) => p
            .base
            .paths
            .get(&PathKey(q.to_string()))
            .map_or(0, |pp| pp.steps),
        None => p.base.steps,
    }
}

fn expectation(p: &TypePair<'_>, path: &str) -> Expectation {
    let mut scope = parent(path);
    while let Some(s) = scope {
        if p.cur.paths.contains_key(&PathKey(s.to_string())) {
            break;
        }
        scope = parent(s);
    }
    let n = match scope {
        Some(s) => p
            .cur
            .paths
            .get(&PathKey(s.to_string()))
            .map_or(0, |pp| pp.steps),
        None => p.cur.steps,
    };
    Expectation::new(p, path, scope, n)
}

/// The expectation of `path` in the `n` current steps where `field` appeared
/// instead of it, relative to the message that holds `field`.
fn stand_in_expectation(p: &TypePair<'_>, path: &str, field: &str, n: u64) -> Expectation {
    Expectation::new(p, path, parent(field), n)
}

/// Paths absent from every current step that could carry them, except
/// `moved` (already reported where their content went).
fn missing_paths(ctx: &Ctx<'_>, p: &TypePair<'_>, moved: &BTreeSet<String>, f: &mut Findings) {
    let mut chance_absent: Vec<String> = Vec::new();
    for path in p.base.paths.keys() {
        if p.cur.paths.contains_key(path) || moved.contains(&path.0) {
            continue;
        }
        let lb = ctx.load_bearing.contains(path.0.as_str());
        // Below an absent message, only load-bearing paths are judged: the
        // message's own line covers the rest.
        let parent_absent =
            parent(&path.0).is_some_and(|q| !p.cur.paths.contains_key(&PathKey(q.to_string())));
        if parent_absent && !lb {
            continue;
        }
        let e = expectation(p, &path.0);
        if e.n == 0 || (e.chance >= SIGNIFICANCE && !ctx.covered) {
            chance_absent.push(path.0.clone());
            continue;
        }
        if lb {
            missing_load_bearing(p, &path.0, &e, f);
        } else {
            absent_optional(ctx, p, &path.0, &e, f);
        }
    }
    if !chance_absent.is_empty() {
        let described: Vec<String> = chance_absent.iter().map(|q| describe_path(q)).collect();
        f.not_seen
            .push(format!("{}: {}", p.name, described.join(", ")));
    }
}

/// "absent from all 3 steps (baseline: in 26 of 27; chance 0.0%)"
fn absence(p: &TypePair<'_>, e: &Expectation) -> String {
    let (steps, carry) = if e.n == 1 {
        ("the one step".to_string(), "carries")
    } else {
        (format!("all {} steps", e.n), "carry")
    };
    let scope = match &e.scope {
        Some(s) => format!(" that {carry} {}", describe_path(s)),
        None => String::new(),
    };
    format!(
        "is absent from {steps}{scope} (baseline: in {} of {}; chance {:.1}%; e.g. {})",
        e.had,
        e.of,
        e.chance * 100.0,
        p.cur.example
    )
}

fn missing_load_bearing(p: &TypePair<'_>, path: &str, e: &Expectation, f: &mut Findings) {
    let what = format!("{}: {} {}", p.name, describe_path(path), absence(p, e));
    let alternative = content_alternatives(path)
        .iter()
        .find(|a| p.cur.paths.contains_key(&PathKey(a.to_string())))
        .map(|a| describe_path(a))
        .or_else(|| named_by_type(p.t, path).then(|| "the step type itself".to_string()));
    if let Some(alt) = alternative {
        f.add(
            Class::Info,
            FindingKind::CarriedElsewhere,
            format!("{what}, but {alt}, which the decoder reads instead, carries its content"),
        )
        .at(p.t)
        .path(path)
        .example(&p.cur.example);
        return;
    }
    // Moved content was reported by `moved_content`: what is left had
    // nothing unread take its place in these steps.
    if is_zero_able(path) {
        f.add(
            Class::Info,
            FindingKind::AbsentPath,
            format!("{what}; nothing the decoder does not read took its place in these steps, and proto3 omits empty values, so these steps most likely had none"),
        )
        .at(p.t)
        .path(path)
        .example(&p.cur.example);
        return;
    }
    f.add(
        Class::Breaking,
        FindingKind::MissingLoadBearing,
        format!("{what}, and nothing the decoder reads carries it: it would be lost"),
    )
    .at(p.t)
    .path(path)
    .example(&p.cur.example);
}

/// Load-bearing paths whose content moved: absent in steps where a
/// length-delimited field the decoder does not read appeared in the message
/// enclosing them, a field the baseline never saw length-delimited there and
/// that never appears beside the path. Each such pair is breaking, and
/// names both; the paths reported are returned so that they are not
/// reported again as merely absent. Unlike an absence from every step, this
/// holds in mixed inputs too (steps of an older agy that still carry the
/// path), because the fingerprint pairs them step by step.
fn moved_content(ctx: &Ctx<'_>, p: &TypePair<'_>, f: &mut Findings) -> BTreeSet<String> {
    let mut moved = BTreeSet::new();
    for (path, fields) in &p.cur.stand_ins {
        if !p.base.paths.contains_key(path) || named_by_type(p.t, &path.0) {
            continue;
        }
        for (field, s) in fields {
            let known_len = p
                .base
                .paths
                .get(field)
                .is_some_and(|bp| bp.wire.contains_key(WireType::Len.name()));
            if s.instead == 0 || s.beside > 0 || known_len {
                continue;
            }
            let e = stand_in_expectation(p, &path.0, &field.0, s.instead);
            if e.chance >= SIGNIFICANCE && !ctx.covered {
                continue;
            }
            let scope = match &e.scope {
                Some(m) => format!(" steps that carry {}", describe_path(m)),
                None => " steps".to_string(),
            };
            f.add(
                Class::Breaking,
                FindingKind::MissingLoadBearing,
                format!(
                    "{}: {} is absent in {} where the unread length-delimited field {} now appears instead, never beside it (baseline: in {} of {}{scope}; chance {:.1}%; e.g. {}): its content probably moved there and would not be shown",
                    p.name,
                    describe_path(&path.0),
                    plural(e.n, "step"),
                    describe_path(&field.0),
                    e.had,
                    e.of,
                    e.chance * 100.0,
                    s.example
                ),
            )
            .at(p.t)
            .path(&path.0)
            .example(&s.example);
            moved.insert(path.0.clone());
        }
    }
    moved
}

fn absent_optional(ctx: &Ctx<'_>, p: &TypePair<'_>, path: &str, e: &Expectation, f: &mut Findings) {
    let why = if ctx.known.contains_key(path) {
        "proto3 omits zero and empty values, so this loses nothing"
    } else {
        "the decoder does not read it"
    };
    f.add(
        Class::Info,
        FindingKind::AbsentPath,
        format!(
            "{}: {} {}; {why}",
            p.name,
            describe_path(path),
            absence(p, e)
        ),
    )
    .at(p.t)
    .path(path)
    .example(&p.cur.example);
}

fn statuses(ctx: &Ctx<'_>, f: &mut Findings) {
    for s in ctx.current.statuses.keys() {
        if ctx.baseline.statuses.contains_key(s) {
            continue;
        }
        let st = StepStatus::from_raw(*s);
        let example = ctx
            .current
            .step_types
            .values()
            .filter(|t| t.statuses.contains_key(s))
            .map(|t| t.example.clone())
            .min()
            .unwrap_or_default();
        let (class, what) = if st.is_known() {
            (Class::Additive, format!("new step status {st}"))
        } else {
            (
                Class::Breaking,
                format!(
                    "unknown step status {s}: the decoder cannot tell whether such a step finished"
                ),
            )
        };
        f.add(
            class,
            FindingKind::NewStatus,
            format!("{what} (e.g. {example})"),
        )
        .example(&example);
    }
}

fn tables(ctx: &Ctx<'_>, f: &mut Findings) {
    let (base, cur) = (&ctx.baseline.tables, &ctx.current.tables);
    let example = ctx.current.sources.first().cloned().unwrap_or_default();
    for (table, cols) in cur {
        let Some(base_cols) = base.get(table) else {
            f.add(
                Class::Additive,
                FindingKind::NewTable,
                format!(
                    "new table {table} ({}); the decoder does not read it",
                    cols.join(", ")
                ),
            )
            .example(&example);
            continue;
        };
        for c in cols.iter().filter(|c| !base_cols.contains(c)) {
            f.add(
                Class::Additive,
                FindingKind::NewColumn,
                format!("new column {table}.{c}; the decoder does not read it"),
            )
            .example(&example);
        }
        for c in base_cols.iter().filter(|c| !cols.contains(c)) {
            let needed = table == "steps" && NEEDED_STEP_COLUMNS.contains(&c.as_str());
            let (class, why) = if needed {
                (Class::Breaking, ": the decoder reads it")
            } else {
                (Class::Additive, "")
            };
            f.add(
                class,
                FindingKind::VanishedColumn,
                format!("column {table}.{c} vanished{why}"),
            )
            .example(&example);
        }
    }
    for table in base.keys().filter(|t| !cur.contains_key(*t)) {
        let (class, why) = if table == "steps" {
            (Class::Breaking, ": the decoder reads every step from it")
        } else {
            (Class::Additive, "")
        };
        f.add(
            class,
            FindingKind::VanishedTable,
            format!("table {table} vanished{why}"),
        )
        .example(&example);
    }
    schema_statements(ctx, &example, f);
}

fn schema_statements(ctx: &Ctx<'_>, example: &str, f: &mut Findings) {
    let (base, cur) = (&ctx.baseline.ddl, &ctx.current.ddl);
    for stmt in cur.iter().filter(|s| !base.contains(s)) {
        f.add(
            Class::Additive,
            FindingKind::SchemaChange,
            format!("schema statement not in the baseline: {stmt}"),
        )
        .example(example);
    }
    if ctx.covered {
        for stmt in base.iter().filter(|s| !cur.contains(s)) {
            f.add(
                Class::Additive,
                FindingKind::SchemaChange,
                format!("baseline schema statement no longer present: {stmt}"),
            );
        }
    }
}

fn unknown_writes(ctx: &Ctx<'_>, f: &mut Findings) {
    for (target, w) in &ctx.current.unknown_writes {
        let what = if target.contains('.') {
            format!("column {target}")
        } else {
            format!("table {target}")
        };
        let (class, message) = if w.declared {
            (
                Class::Additive,
                format!("{} writes {what}, which its schema declares but src/schema.rs does not: `decode` and fake-agy replay recordings into src/schema.rs's schema and refuse this one until it is added there", w.example),
            )
        } else {
            (
                Class::Breaking,
                format!("{} writes {what}, which its own schema does not declare: no agy database could hold this write, and `decode` and fake-agy refuse to replay the recording", w.example),
            )
        };
        f.add(class, FindingKind::UnknownWrite, message)
            .path(target)
            .example(&w.example);
    }
}

fn other_blobs(ctx: &Ctx<'_>, f: &mut Findings) {
    for (column, paths) in &ctx.current.other_blobs {
        let base = ctx.baseline.other_blobs.get(column);
        for (path, p) in paths {
            let full = format!("{column}.{path}");
            let Some(bp) = base.and_then(|b| b.get(path)) else {
                f.add(
                    Class::Additive,
                    FindingKind::NewPath,
                    format!(
                        "{column}: new field {path} ({}) in {} rows, which the decoder does not read (e.g. {})",
                        wire_list(&p.wire),
                        p.steps,
                        p.example
                    ),
                )
                .path(&full)
                .example(&p.example);
                continue;
            };
            let changed: Vec<&String> = p
                .wire
                .keys()
                .filter(|w| !bp.wire.contains_key(*w))
                .collect();
            if !changed.is_empty() {
                f.add(
                    Class::Additive,
                    FindingKind::WireTypeChange,
                    format!(
                        "{column}: field {path} changed wire type from {} to {}, which the decoder does not read (e.g. {})",
                        wire_list(&bp.wire),
                        join_wires(changed.iter().copied()),
                        p.example
                    ),
                )
                .path(&full)
                .example(&p.example);
            }
        }
    }
}

fn models_formats(ctx: &Ctx<'_>, f: &mut Findings) {
    for (format, example) in &ctx.current.models_formats {
        if ctx.baseline.models_formats.contains_key(format) {
            continue;
        }
        let (class, message) = if format == "unknown" {
            (Class::Breaking, format!("`agy models` output is in a format none of 1/2/3 matches (e.g. {example}): the model list would be misread"))
        } else {
            (
                Class::Additive,
                format!("`agy models` format {format} not in the baseline (e.g. {example})"),
            )
        };
        f.add(class, FindingKind::ModelsFormat, message)
            .example(example);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alternative_and_zero_able_path_is_one_the_decoder_reads() {
        let known = known_paths();
        for (path, alts) in ALTERNATIVES {
            for p in std::iter::once(path).chain(alts.iter()) {
                assert!(known.contains_key(*p), "{p} is not in the known-field tree");
            }
        }
        for p in ZERO_ABLE {
            assert!(known.contains_key(*p), "{p} is not in the known-field tree");
        }
    }

    #[test]
    fn zero_able_covers_sub_paths() {
        assert!(is_zero_able("28.21"));
        assert!(is_zero_able("28.21.1"));
        assert!(!is_zero_able("28.2"));
        assert!(!is_zero_able("20.7.2"));
    }
}
