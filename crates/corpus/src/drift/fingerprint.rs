//! Fingerprints: what a set of recordings and databases shows about agy's
//! format, in a form that is stable JSON (the baseline file) and cheap to
//! compare.
//!
//! For each step type: how many steps, their statuses, every field path seen
//! in `step_payload` (`20.1`) and in the other blob columns of `steps`
//! (`metadata.4.2`, `render_info.3`), each with its wire types and the number
//! of steps it appeared in. Plus: the statuses seen, the tables and columns,
//! the schema DDL, the top-level paths of the other tables' blobs, the
//! `agy models` output formats, the decode errors, and the writes of a
//! recording that its schema cannot hold. Every version of a step counts (a
//! recording's every write, a database's final rows); a step is counted once
//! per path however many versions carried it. Paths are walked with the
//! decoder's own known-field tree ([`steps::walk_paths`]), so a path inside a
//! message the decoder does not know is reported at its top.
//!
//! Counts per path cannot say *which* steps lost a path and gained another,
//! so the current inputs also keep, per step type, how each load-bearing
//! path met the length-delimited fields the decoder does not read in the
//! message around it ([`StandIn`]): in the same step, or one instead of the
//! other. That tally stays in memory; the baseline file does not carry it.

use super::known::content_alternatives;
use crate::db::{self, TableRows};
use crate::recording::{Op, Recording, SqlValue, Write};
use crate::source::{self, SourceKind};
use agy_format::schema;
use agy_format::steps::{self, StepType, LOAD_BEARING};
use agy_format::wire::WireType;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// Bump on an incompatible change of the fingerprint JSON.
pub(crate) const FINGERPRINT_FORMAT: u32 = 1;

/// A field path, ordered numerically by segment (`20.3` < `20.12`), with
/// side-column names after all numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PathKey(pub String);

impl PathKey {
    fn segments(&self) -> Vec<(u8, u64, &str)> {
        steps::path_order(&self.0)
    }
}

impl Ord for PathKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.segments()
            .cmp(&other.segments())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for PathKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for PathKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One field path of one step type (or one blob column).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathPrint {
    /// Steps (rows) the path appeared in, with any wire type.
    pub steps: u64,
    /// Wire type name (`varint`, `i64`, `len`, `i32`) -> steps with it.
    pub wire: BTreeMap<String, u64>,
    /// The first source (by name) it appeared in.
    pub example: String,
}

/// One step type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepTypePrint {
    pub label: String,
    pub steps: u64,
    pub example: String,
    /// Status -> steps that had it in some version.
    pub statuses: BTreeMap<i64, u64>,
    /// Steps with a payload or side column that does not decode.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decode_errors: u64,
    pub paths: BTreeMap<PathKey, PathPrint>,
    /// Load-bearing path -> a length-delimited field the decoder does not
    /// read, in the message that encloses the path -> how the two met.
    /// Computed for the inputs at hand, never written to (or read from) the
    /// baseline file: only the current steps are paired.
    #[serde(skip)]
    pub stand_ins: BTreeMap<PathKey, BTreeMap<PathKey, StandIn>>,
}

/// How a length-delimited field the decoder does not read met a load-bearing
/// path, counted in steps. "In the message that encloses the path" means a
/// field directly inside the nearest ancestor of the path that the step
/// carries (the top of the blob when it carries none), so that `20.2` meets
/// `20.1`, but a new field inside a tool call (`20.7.20`) does not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StandIn {
    /// Steps where the field appeared while the path was absent and no
    /// alternative the decoder reads carried its content: where the path's
    /// content may have gone.
    pub instead: u64,
    /// Steps where both appeared: the field is something else.
    pub beside: u64,
    /// The first source (by name) where it appeared instead.
    pub example: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a set of recordings and databases shows about agy's format.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub fingerprint_format: u32,
    /// The inputs' file names, sorted.
    pub sources: Vec<String>,
    pub step_types: BTreeMap<i64, StepTypePrint>,
    /// Status -> steps that had it (all types).
    pub statuses: BTreeMap<i64, u64>,
    /// Table -> its columns, as declared.
    pub tables: BTreeMap<String, Vec<String>>,
    /// The distinct schema statements, in order of first appearance.
    pub ddl: Vec<String>,
    /// `table.column` of blobs outside `steps` -> their top-level paths.
    pub other_blobs: BTreeMap<String, BTreeMap<PathKey, PathPrint>>,
    /// `agy models` output format (`1`, `2`, `3` or `unknown`) -> example.
    pub models_formats: BTreeMap<String, String>,
    /// Steps that failed to decode, all types.
    pub decode_errors: u64,
    /// `table` or `table.column` a recording writes that `decode` and
    /// fake-agy cannot replay (see [`WriteTarget`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown_writes: BTreeMap<String, WriteTarget>,
}

/// A table or column a recording writes although agy's schema as this build
/// knows it (`src/schema.rs`, what `decode` and fake-agy replay into) lacks
/// it: replaying the recording fails on that write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteTarget {
    /// Whether the recording's own schema (its header, captured from the
    /// database) declares it: a newer agy's schema, rather than a write no
    /// database could hold.
    pub declared: bool,
    /// The first source (by name) that writes it.
    pub example: String,
}

/// Why drift could not run.
#[derive(Debug, thiserror::Error)]
pub enum DriftError {
    #[error(transparent)]
    Load(#[from] source::LoadError),
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error("baseline {path}: {message}")]
    Baseline { path: PathBuf, message: String },
}

/// One input, already read.
#[derive(Debug, Clone)]
pub enum Source {
    Recording(Box<Recording>),
    Database {
        tables: Vec<TableRows>,
        ddl: Vec<String>,
    },
}

/// Read a recording or a database.
pub fn load(path: &Path) -> Result<Source, DriftError> {
    let input = |message: String| DriftError::Input {
        path: path.to_path_buf(),
        message,
    };
    match source::detect(path)? {
        SourceKind::Recording => Recording::load(path)
            .map(|r| Source::Recording(Box::new(r)))
            .map_err(|e| input(e.to_string())),
        SourceKind::Database => {
            let conn =
                agy_format::database::open_read_only(path).map_err(|e| input(e.to_string()))?;
            let _ = conn.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            );
            let tx = conn
                .unchecked_transaction()
                .map_err(|e| input(e.to_string()))?;
            let tables = db::read_tables(&tx).map_err(|e| input(e.to_string()))?;
            let ddl = schema::master_sql(&tx).map_err(|e| input(e.to_string()))?;
            tx.finish().map_err(|e| input(e.to_string()))?;
            Ok(Source::Database { tables, ddl })
        }
    }
}

/// The name a source is reported by: its file name.
pub fn source_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Fingerprint files (recordings or databases).
pub fn fingerprint_paths(paths: &[PathBuf]) -> Result<Fingerprint, DriftError> {
    let mut sources = Vec::new();
    for p in paths {
        sources.push((source_name(p), load(p)?));
    }
    Ok(fingerprint(&sources))
}

/// Which `agy models` output format `output` is in (docs/agy-format.md, "agy models"):
/// `1` display names, `2` one slug per line, `3` `slug<TAB>Display Name`,
/// `unknown` for anything else. `None` when there is nothing to judge (no
/// output, or only the preamble, log lines and a sign-in message).
pub fn models_format(output: &str) -> Option<&'static str> {
    let is_slug = |s: &str| {
        !s.is_empty()
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._".contains(&b))
    };
    let is_log = |s: &str| {
        let b = s.as_bytes();
        b.len() > 5 && b"IWEF".contains(&b[0]) && b[1..5].iter().all(u8::is_ascii_digit)
    };
    let mut found: Option<&'static str> = None;
    for line in output.lines() {
        let line = line.trim_end_matches('\r');
        let t = line.trim();
        if t.is_empty()
            || t.starts_with("Fetching available models")
            || t.starts_with("Please sign in")
            || is_log(t)
        {
            continue;
        }
        let kind = if let Some((slug, name)) = line.split_once('\t') {
            if is_slug(slug.trim()) && !name.trim().is_empty() && !name.contains('\t') {
                "3"
            } else {
                "unknown"
            }
        } else if is_slug(t) {
            "2"
        } else if t.starts_with(|c: char| c.is_ascii_uppercase())
            && t.chars().all(|c| !c.is_control())
            && !t.contains(['{', '}', '[', ']', '"', ':', '='])
        {
            "1"
        } else {
            "unknown"
        };
        found = match found {
            None => Some(kind),
            Some(k) if k == kind => Some(k),
            Some(_) => Some("unknown"),
        };
    }
    found
}

#[derive(Default)]
struct StepAcc {
    statuses: BTreeSet<i64>,
    paths: BTreeSet<(String, WireType)>,
    /// Paths seen length-delimited where the known-field tree does not list
    /// them so: fields whose content the decoder would not show.
    unread_len: BTreeSet<String>,
    error: bool,
}

fn observe_step(
    acc: &mut BTreeMap<(String, String, i64, i64), StepAcc>,
    source: &str,
    db: &str,
    key: &BTreeMap<String, SqlValue>,
    values: &BTreeMap<String, SqlValue>,
) {
    let row = crate::db::step_row(key, values);
    let (idx, step_type, status) = (row.idx, row.step_type, row.status);
    let a = acc
        .entry((source.to_string(), db.to_string(), idx, step_type))
        .or_default();
    a.statuses.insert(status);
    if steps::decode(&row).decode_error.is_some() {
        a.error = true;
    }
    let mut visit = |p: steps::FieldPath| {
        if p.wire_type == WireType::Len && !p.known {
            a.unread_len.insert(p.path.clone());
        }
        a.paths.insert((p.path, p.wire_type));
    };
    if let Some(payload) = &row.payload {
        let _ = steps::walk_paths(payload, steps::STEP, "", &mut visit);
    }
    for (column, b, tree) in row.side_columns() {
        let _ = steps::walk_paths(b, tree, column, &mut visit);
    }
    // Any other blob column of `steps` (render_info, or a new one).
    for (column, v) in values {
        if let SqlValue::Blob(b) = v {
            if column == "step_payload" || steps::SIDE_COLUMNS.iter().any(|(c, _)| c == column) {
                continue;
            }
            let _ = steps::walk_paths(b, &[], column, &mut visit);
        }
    }
}

type BlobAcc = BTreeMap<String, BTreeMap<(String, String, String), BTreeSet<(String, WireType)>>>;

fn observe_other(
    acc: &mut BlobAcc,
    source: &str,
    db: &str,
    table: &str,
    key: &BTreeMap<String, SqlValue>,
    values: &BTreeMap<String, SqlValue>,
) {
    let row_id = serde_json::to_string(key).unwrap_or_default();
    for (column, v) in values {
        if let SqlValue::Blob(b) = v {
            let set = acc
                .entry(format!("{table}.{column}"))
                .or_default()
                .entry((source.to_string(), db.to_string(), row_id.clone()))
                .or_default();
            let _ = steps::walk_paths(b, &[], "", &mut |p| {
                set.insert((p.path, p.wire_type));
            });
        }
    }
}

/// The tables, columns and DDL a recording declares (its `schema`, else
/// [`schema::DDL`]).
fn declared_tables(ddl: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let Ok(conn) = rusqlite::Connection::open_in_memory() else {
        return out;
    };
    for stmt in ddl {
        let _ = conn.execute(stmt, []);
    }
    for t in db::table_names(&conn).unwrap_or_default() {
        let cols = schema::columns(&conn, &t).unwrap_or_default();
        out.insert(t, cols);
    }
    out
}

fn merge_example(slot: &mut String, name: &str) {
    if slot.is_empty() || name < slot.as_str() {
        *slot = name.to_string();
    }
}

fn add_paths(
    into: &mut BTreeMap<PathKey, PathPrint>,
    paths: &BTreeSet<(String, WireType)>,
    source: &str,
) {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (path, wt) in paths {
        let p = into.entry(PathKey(path.clone())).or_default();
        if seen.insert(path) {
            p.steps += 1;
        }
        *p.wire.entry(wt.name().to_string()).or_insert(0) += 1;
        merge_example(&mut p.example, source);
    }
}

/// What the sources seen so far show, before it is counted per step type.
#[derive(Default)]
struct Acc {
    steps: BTreeMap<(String, String, i64, i64), StepAcc>,
    blobs: BlobAcc,
}

/// Fingerprint named sources.
pub fn fingerprint(sources: &[(String, Source)]) -> Fingerprint {
    let mut order: Vec<&(String, Source)> = sources.iter().collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let mut fp = Fingerprint {
        fingerprint_format: FINGERPRINT_FORMAT,
        ..Fingerprint::default()
    };
    let mut acc = Acc::default();
    for (name, source) in order {
        fp.sources.push(name.clone());
        let (ddl, tables) = match source {
            Source::Recording(rec) => observe_recording(&mut fp, &mut acc, name, rec),
            Source::Database { tables, ddl } => {
                observe_database(&mut acc, name, tables);
                let declared = tables
                    .iter()
                    .map(|t| (t.name.clone(), t.columns.clone()))
                    .collect();
                (ddl.clone(), declared)
            }
        };
        merge_schema(&mut fp, ddl, tables);
    }
    count_steps(&mut fp, &acc);
    for (column, rows) in acc.blobs {
        let into = fp.other_blobs.entry(column).or_default();
        for ((source, _, _), paths) in rows {
            add_paths(into, &paths, &source);
        }
    }
    fp
}

/// Observe every upsert of a recording; returns its declared schema (its
/// header's, else [`schema::DDL`]) and tables.
fn observe_recording(
    fp: &mut Fingerprint,
    acc: &mut Acc,
    name: &str,
    rec: &Recording,
) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
    let ddl: Vec<String> = if rec.header.schema.is_empty() {
        schema::DDL.iter().map(|s| s.to_string()).collect()
    } else {
        rec.header.schema.clone()
    };
    if let Some(format) = models_format(&rec.header.models_output) {
        merge_example(
            fp.models_formats.entry(format.to_string()).or_default(),
            name,
        );
    }
    let declared = declared_tables(&ddl);
    let replayable = declared_tables(
        &schema::DDL
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
    );
    for commit in &rec.commits {
        for w in &commit.writes {
            note_unknown_write(fp, name, w, &declared, &replayable);
            if w.op != Op::Upsert {
                continue;
            }
            if w.table == "steps" {
                observe_step(&mut acc.steps, name, &commit.db, &w.key, &w.values);
            } else {
                observe_other(
                    &mut acc.blobs,
                    name,
                    &commit.db,
                    &w.table,
                    &w.key,
                    &w.values,
                );
            }
        }
    }
    (ddl, declared)
}

/// Record a write to a table or column the replay schema lacks (the
/// replay in `recording::apply_commit` refuses such a write, and so
/// `decode` refuses the whole recording).
fn note_unknown_write(
    fp: &mut Fingerprint,
    source: &str,
    w: &Write,
    declared: &BTreeMap<String, Vec<String>>,
    replayable: &BTreeMap<String, Vec<String>>,
) {
    let mut note = |target: String, declared: bool| {
        let slot = fp.unknown_writes.entry(target).or_insert(WriteTarget {
            declared,
            example: String::new(),
        });
        slot.declared &= declared;
        merge_example(&mut slot.example, source);
    };
    let Some(columns) = replayable.get(&w.table) else {
        note(w.table.clone(), declared.contains_key(&w.table));
        return;
    };
    for column in w.key.keys().chain(w.values.keys()) {
        if !columns.contains(column) {
            let is_declared = declared
                .get(&w.table)
                .is_some_and(|cols| cols.contains(column));
            note(format!("{}.{column}", w.table), is_declared);
        }
    }
}

fn observe_database(acc: &mut Acc, name: &str, tables: &[TableRows]) {
    for t in tables {
        for r in &t.rows {
            if t.name == "steps" {
                observe_step(&mut acc.steps, name, "", &r.key, &r.values);
            } else {
                observe_other(&mut acc.blobs, name, "", &t.name, &r.key, &r.values);
            }
        }
    }
}

/// Add one source's schema statements and tables to the fingerprint.
fn merge_schema(fp: &mut Fingerprint, ddl: Vec<String>, tables: BTreeMap<String, Vec<String>>) {
    for stmt in ddl {
        if !fp.ddl.contains(&stmt) {
            fp.ddl.push(stmt);
        }
    }
    for (t, cols) in tables {
        let have = fp.tables.entry(t).or_default();
        for c in cols {
            if !have.contains(&c) {
                have.push(c);
            }
        }
    }
}

/// Count the observed steps per type, status and path.
fn count_steps(fp: &mut Fingerprint, acc: &Acc) {
    for ((source, _, _, step_type), a) in &acc.steps {
        let t = fp.step_types.entry(*step_type).or_default();
        t.label = StepType::from_raw(*step_type).label().to_string();
        t.steps += 1;
        merge_example(&mut t.example, source);
        for s in &a.statuses {
            *t.statuses.entry(*s).or_insert(0) += 1;
            *fp.statuses.entry(*s).or_insert(0) += 1;
        }
        if a.error {
            t.decode_errors += 1;
            fp.decode_errors += 1;
        }
        add_paths(&mut t.paths, &a.paths, source);
        add_stand_ins(&mut t.stand_ins, a, source);
    }
}

/// How one step's unread length-delimited fields met the load-bearing paths.
fn add_stand_ins(
    into: &mut BTreeMap<PathKey, BTreeMap<PathKey, StandIn>>,
    a: &StepAcc,
    source: &str,
) {
    if a.unread_len.is_empty() {
        return;
    }
    let present: BTreeSet<&str> = a.paths.iter().map(|(p, _)| p.as_str()).collect();
    for (path, _) in LOAD_BEARING {
        for field in &a.unread_len {
            let Some(met) = meeting(path, field, &present) else {
                continue;
            };
            let s = into
                .entry(PathKey(path.to_string()))
                .or_default()
                .entry(PathKey(field.clone()))
                .or_default();
            match met {
                Meeting::Beside => s.beside += 1,
                Meeting::Instead => {
                    s.instead += 1;
                    merge_example(&mut s.example, source);
                }
            }
        }
    }
}

/// How a field and a load-bearing path met in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meeting {
    Beside,
    Instead,
}

/// How `field` met `path` in a step carrying `present`: `None` when the
/// field is not in the message enclosing the path (another message, another
/// blob), or when an alternative the decoder reads carries the path's
/// content, so nothing of it is lost there.
fn meeting(path: &str, field: &str, present: &BTreeSet<&str>) -> Option<Meeting> {
    if blob(path) != blob(field) {
        return None;
    }
    if present.contains(path) {
        return child_within(path, parent(field)).map(|_| Meeting::Beside);
    }
    // The field sits in the nearest ancestor of the path this step carries:
    // the path's ancestor directly inside the field's message is absent.
    let below = child_within(path, parent(field))?;
    if present.contains(below) {
        return None;
    }
    let carried = content_alternatives(path)
        .iter()
        .any(|alt| present.contains(alt));
    (!carried).then_some(Meeting::Instead)
}

/// The ancestor of `path` (or `path` itself) that sits directly inside
/// `message` (`None`: the top of the blob), if `message` encloses `path`.
fn child_within<'a>(path: &'a str, message: Option<&str>) -> Option<&'a str> {
    let mut at = path;
    loop {
        let up = parent(at);
        if up == message {
            return Some(at);
        }
        at = up?;
    }
}

/// The parent of a path (`20.7.2` -> `20.7`); `None` at the top (`20`,
/// `metadata.4`: the column is not a path of its own).
pub(super) fn parent(path: &str) -> Option<&str> {
    let (head, _) = path.rsplit_once('.')?;
    head.contains(|c: char| c.is_ascii_digit()).then_some(head)
}

/// The blob a path is in: its column (`metadata` for `metadata.4.2`), or ``
/// for `step_payload`, whose paths are bare.
fn blob(path: &str) -> &str {
    path.split('.')
        .next()
        .filter(|s| !s.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or("")
}

impl Fingerprint {
    /// Pretty JSON with a trailing newline (the baseline file's form).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    pub fn load(path: &Path) -> Result<Fingerprint, DriftError> {
        let err = |message: String| DriftError::Baseline {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        Fingerprint::from_json(&text, path)
    }

    /// A baseline from its JSON text; `path` names it in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Fingerprint, DriftError> {
        let err = |message: String| DriftError::Baseline {
            path: path.to_path_buf(),
            message,
        };
        let fp: Fingerprint = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        if fp.fingerprint_format > FINGERPRINT_FORMAT {
            return Err(err(format!(
                "fingerprint format {} is newer than this build ({FINGERPRINT_FORMAT})",
                fp.fingerprint_format
            )));
        }
        Ok(fp)
    }

    /// Every step across types.
    pub fn total_steps(&self) -> u64 {
        self.step_types.values().map(|t| t.steps).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_formats() {
        // The three formats agy has printed are checked against the
        // corpus's own samples in agy-synth (`models_formats_of_the_corpus`).
        assert_eq!(models_format(""), None);
        assert_eq!(
            models_format("Please sign in to view available models\n"),
            None
        );
        assert_eq!(
            models_format("I0701 12:00:00.000 model_config_manager.go:157] x\nclaude-sonnet-4-6\n"),
            Some("2")
        );
        assert_eq!(
            models_format("[{\"id\":\"gemini-3.7-flash\"}]\n"),
            Some("unknown")
        );
    }

    #[test]
    fn parents_stop_at_the_top_of_a_blob() {
        assert_eq!(parent("20.7.2"), Some("20.7"));
        assert_eq!(parent("20"), None);
        assert_eq!(parent("metadata.4.2"), Some("metadata.4"));
        assert_eq!(parent("metadata.4"), None);
    }

    #[test]
    fn a_field_meets_a_path_only_in_the_message_that_encloses_it() {
        let step = |paths: &[&'static str]| paths.iter().copied().collect::<BTreeSet<_>>();
        let planner = step(&["20", "20.2", "20.7", "20.7.1", "20.7.20"]);
        // The text gone, an unread field in the message it was in.
        assert_eq!(meeting("20.1", "20.2", &planner), Some(Meeting::Instead));
        // Inside a tool call: another message.
        assert_eq!(meeting("20.1", "20.7.20", &planner), None);
        // The tool call is there, its name gone: 20.2 is outside that call.
        assert_eq!(meeting("20.7.2", "20.2", &planner), None);
        // Beside the text.
        let both = step(&["20", "20.1", "20.2"]);
        assert_eq!(meeting("20.1", "20.2", &both), Some(Meeting::Beside));
        // The whole body gone: a new top-level field stands in, one in a
        // side column does not.
        let renumbered = step(&["1", "21", "metadata.30"]);
        assert_eq!(meeting("20.1", "21", &renumbered), Some(Meeting::Instead));
        assert_eq!(meeting("20.1", "metadata.30", &renumbered), None);
        // The body is there: a top-level field is not in its place.
        assert_eq!(meeting("20.1", "21", &planner), None);
        // The modified response (20.8) carries the text: nothing is lost.
        let modified = step(&["20", "20.2", "20.8"]);
        assert_eq!(meeting("20.1", "20.2", &modified), None);
    }

    #[test]
    fn path_keys_sort_numerically() {
        let mut v = [
            PathKey("20.12".into()),
            PathKey("metadata.4".into()),
            PathKey("20.3".into()),
            PathKey("5".into()),
        ];
        v.sort();
        let s: Vec<&str> = v.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(s, ["5", "20.3", "20.12", "metadata.4"]);
    }
}
