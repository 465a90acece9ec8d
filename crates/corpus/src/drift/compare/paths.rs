//! The rules judged path by path within one step type present in both
//! fingerprints: paths new here, wire types changed, load-bearing paths
//! missing or their content moved to a field the decoder does not read, and
//! optional paths proto3 omitted.

use super::{join_wires, named_by_type, plural, wire_list, Ctx, Findings, TypePair};
use crate::drift::finding::{Class, FindingKind};
use crate::drift::fingerprint::{parent, PathKey};
use crate::drift::known::{content_alternatives, is_zero_able};
use crate::drift::report::describe_path;
use crate::drift::SIGNIFICANCE;
use agy_format::wire::WireType;
use std::collections::BTreeSet;

pub(super) fn new_paths(ctx: &Ctx<'_>, p: &TypePair<'_>, f: &mut Findings) {
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

pub(super) fn wire_type_changes(ctx: &Ctx<'_>, p: &TypePair<'_>, f: &mut Findings) {
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
pub(super) fn missing_paths(
    ctx: &Ctx<'_>,
    p: &TypePair<'_>,
    moved: &BTreeSet<String>,
    f: &mut Findings,
) {
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
pub(super) fn moved_content(ctx: &Ctx<'_>, p: &TypePair<'_>, f: &mut Findings) -> BTreeSet<String> {
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
