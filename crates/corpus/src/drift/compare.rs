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
//!   its content ([`super::content_alternatives`]), and the path is one a step
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
//! [`Findings`] builder; the rules judged path by path within a step type
//! are in `paths`.

use super::finding::{Class, Finding, FindingKind};
use super::fingerprint::{Fingerprint, PathKey, StepTypePrint};
use super::known::{known_paths, KnownPath};
use super::report::Report;
use super::NEEDED_STEP_COLUMNS;
use agy_format::steps::{StepStatus, StepType, LOAD_BEARING};
use std::collections::{BTreeMap, BTreeSet};

mod paths;

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

/// Step types the decoder recognises but shows nothing of (bookkeeping:
/// ephemeral messages 90, conversation history 98).
const BOOKKEEPING_TYPES: &[i64] = &[90, 98];

/// GENERIC (132): the tool step whose tool only its metadata names.
const GENERIC_TOOL_TYPE: i64 = 132;

/// Whether steps of this type carry something a user sees.
fn content_bearing(t: i64) -> bool {
    StepType::from_raw(t).is_known() && !BOOKKEEPING_TYPES.contains(&t)
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
        paths::new_paths(&ctx, &pair, &mut f);
        paths::wire_type_changes(&ctx, &pair, &mut f);
        let moved = paths::moved_content(&ctx, &pair, &mut f);
        paths::missing_paths(&ctx, &pair, &moved, &mut f);
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
