//! `agy-bridge drift`: fingerprint what agy writes and compare it with the
//! corpus baseline, so that a new agy version's format change shows up as a
//! red report instead of an empty stream.
//!
//! A [`Fingerprint`] is built from recordings and/or databases. For each step
//! type: how many steps, their statuses, every field path seen in
//! `step_payload` (`20.1`) and in the other blob columns of `steps`
//! (`metadata.4.2`, `render_info.3`), each with its wire types and the number
//! of steps it appeared in. Plus: the statuses seen, the tables and columns,
//! the schema DDL, the top-level paths of the other tables' blobs, the
//! `agy models` output formats and the decode errors. Every version of a step
//! counts (a recording's every write, a database's final rows); a step is
//! counted once per path however many versions carried it. Paths are walked
//! with the decoder's own known-field tree ([`steps::walk_paths`]), so a path
//! inside a message the decoder does not know is reported at its top.
//!
//! [`compare`] turns a baseline and a current fingerprint into [`Finding`]s,
//! each **breaking** (the decoder would lose or misread data) or **additive**
//! (new, ignorable). See `recordings/README.md` for the rules.

use crate::decode::{self, SourceKind};
use crate::record::{self, TableRows};
use crate::recording::{Op, Recording, SqlValue};
use crate::schema;
use crate::steps::{self, Kind, Known, StepRow, StepStatus, StepType, LOAD_BEARING};
use crate::wire::WireType;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// Bump on an incompatible change of the fingerprint JSON.
pub const FINGERPRINT_FORMAT: u32 = 1;

/// The baseline file name in `recordings/`.
pub const BASELINE_FILE: &str = "schema-baseline.json";

/// The baseline of this source tree.
pub fn bundled_baseline() -> PathBuf {
    crate::recording::bundled_dir().join(BASELINE_FILE)
}

/// The `steps` columns the reader needs: the four every `steps` table has,
/// and the side columns the poller reads when all four are present.
pub const NEEDED_STEP_COLUMNS: &[&str] = &[
    "idx",
    "step_type",
    "status",
    "step_payload",
    "metadata",
    "error_details",
    "permissions",
    "task_details",
];

/// A baseline path absent from all N current steps of its type is evidence
/// of a change only when that would be unlikely by chance: when
/// `(1 - b/B)^N` is below this, where the baseline saw it in b of B steps.
/// (20.1 is in 26 of the corpus's 27 planner responses: missing from a
/// single step is a 4% chance, so even one step is evidence; thinking, 20.3,
/// is in 5 of 27: fifteen steps without it are needed.)
pub const SIGNIFICANCE: f64 = 0.05;

/// A field path, ordered numerically by segment (`20.3` < `20.12`), with
/// side-column names after all numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PathKey(pub String);

impl PathKey {
    fn segments(&self) -> Vec<(u8, u64, &str)> {
        self.0
            .split('.')
            .map(|seg| match seg.parse::<u64>() {
                Ok(n) => (0, n, ""),
                Err(_) => (1, 0, seg),
            })
            .collect()
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
}

/// Why drift could not run.
#[derive(Debug, thiserror::Error)]
pub enum DriftError {
    #[error(transparent)]
    Load(#[from] decode::LoadError),
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
    match decode::detect(path)? {
        SourceKind::Recording => Recording::load(path)
            .map(|r| Source::Recording(Box::new(r)))
            .map_err(|e| input(e.to_string())),
        SourceKind::Database => {
            let conn = crate::poller::open_read_only(path).map_err(|e| input(e.to_string()))?;
            let _ = conn.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            );
            let tx = conn
                .unchecked_transaction()
                .map_err(|e| input(e.to_string()))?;
            let tables = record::read_tables(&tx).map_err(|e| input(e.to_string()))?;
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

/// Which `agy models` output format `output` is in (agy-format.md §7):
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
    error: bool,
}

fn blob(v: Option<&SqlValue>) -> Option<Vec<u8>> {
    match v {
        Some(SqlValue::Blob(b)) => Some(b.clone()),
        Some(SqlValue::Text(t)) => Some(t.as_bytes().to_vec()),
        _ => None,
    }
}

/// Side columns of `steps` and their trees (`render_info` has none).
const SIDE: &[(&str, &[Known])] = &[
    ("metadata", steps::METADATA),
    ("error_details", steps::ERROR_DETAILS),
    ("permissions", steps::PERMISSIONS),
    ("task_details", steps::TASK_DETAILS),
];

fn observe_step(
    acc: &mut BTreeMap<(String, String, i64, i64), StepAcc>,
    source: &str,
    db: &str,
    key: &BTreeMap<String, SqlValue>,
    values: &BTreeMap<String, SqlValue>,
) {
    let idx = key.get("idx").and_then(SqlValue::as_i64).unwrap_or(0);
    let step_type = values
        .get("step_type")
        .and_then(SqlValue::as_i64)
        .unwrap_or(0);
    let status = values.get("status").and_then(SqlValue::as_i64).unwrap_or(0);
    let row = StepRow {
        idx,
        step_type,
        status,
        payload: blob(values.get("step_payload")),
        metadata: blob(values.get("metadata")),
        error_details: blob(values.get("error_details")),
        permissions: blob(values.get("permissions")),
        task_details: blob(values.get("task_details")),
    };
    let a = acc
        .entry((source.to_string(), db.to_string(), idx, step_type))
        .or_default();
    a.statuses.insert(status);
    if steps::decode(&row).decode_error.is_some() {
        a.error = true;
    }
    let mut visit = |p: steps::FieldPath| {
        a.paths.insert((p.path, p.wire_type));
    };
    if let Some(payload) = &row.payload {
        let _ = steps::walk_paths(payload, steps::STEP, "", &mut visit);
    }
    for (column, tree) in SIDE {
        if let Some(b) = blob(values.get(*column)) {
            let _ = steps::walk_paths(&b, tree, column, &mut visit);
        }
    }
    // Any other blob column of `steps` (render_info, or a new one).
    for (column, v) in values {
        if let SqlValue::Blob(b) = v {
            if column == "step_payload" || SIDE.iter().any(|(c, _)| c == column) {
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
    for t in record::table_names(&conn).unwrap_or_default() {
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

/// Fingerprint named sources.
pub fn fingerprint(sources: &[(String, Source)]) -> Fingerprint {
    let mut order: Vec<&(String, Source)> = sources.iter().collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let mut fp = Fingerprint {
        fingerprint_format: FINGERPRINT_FORMAT,
        ..Fingerprint::default()
    };
    let mut steps_acc: BTreeMap<(String, String, i64, i64), StepAcc> = BTreeMap::new();
    let mut blobs: BlobAcc = BTreeMap::new();
    for (name, source) in order {
        fp.sources.push(name.clone());
        let (ddl, tables) = match source {
            Source::Recording(rec) => {
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
                for commit in &rec.commits {
                    for w in &commit.writes {
                        if w.op != Op::Upsert {
                            continue;
                        }
                        if w.table == "steps" {
                            observe_step(&mut steps_acc, name, &commit.db, &w.key, &w.values);
                        } else {
                            observe_other(
                                &mut blobs, name, &commit.db, &w.table, &w.key, &w.values,
                            );
                        }
                    }
                }
                let tables = declared_tables(&ddl);
                (ddl, tables)
            }
            Source::Database { tables, ddl } => {
                for t in tables {
                    for r in &t.rows {
                        if t.name == "steps" {
                            observe_step(&mut steps_acc, name, "", &r.key, &r.values);
                        } else {
                            observe_other(&mut blobs, name, "", &t.name, &r.key, &r.values);
                        }
                    }
                }
                let declared = tables
                    .iter()
                    .map(|t| (t.name.clone(), t.columns.clone()))
                    .collect();
                (ddl.clone(), declared)
            }
        };
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
    for ((source, _, _, step_type), a) in &steps_acc {
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
    }
    for (column, rows) in blobs {
        let into = fp.other_blobs.entry(column).or_default();
        for ((source, _, _), paths) in rows {
            add_paths(into, &paths, &source);
        }
    }
    fp
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
        let fp: Fingerprint = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
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

// ---------------------------------------------------------------------------
// Comparison.
// ---------------------------------------------------------------------------

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The decoder would lose or misread data.
    Breaking,
    /// New or unused by the decoder: ignorable, printed as a warning.
    Additive,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    MissingLoadBearing,
    WireTypeChange,
    VanishedPath,
    VanishedStepType,
    DecodeErrors,
    VanishedTable,
    VanishedColumn,
    ModelsFormat,
    NewStatus,
    NewStepType,
    NewPath,
    NewTable,
    NewColumn,
    SchemaChange,
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
    /// The readable line (without the class prefix).
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.class {
            Class::Breaking => "BREAKING",
            Class::Additive => "warning",
        };
        write!(f, "{tag}: {}", self.message)
    }
}

/// The outcome of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub breaking: usize,
    pub additive: usize,
    pub findings: Vec<Finding>,
    /// Baseline step types these inputs do not exercise (not findings: a
    /// sample that lacks a tool call says nothing about tool calls).
    pub not_exercised: Vec<String>,
    /// Baseline paths absent here where that could well be chance (see
    /// [`SIGNIFICANCE`]); findings only when the inputs cover every baseline
    /// source.
    pub not_seen: Vec<String>,
}

impl Report {
    pub fn is_breaking(&self) -> bool {
        self.breaking > 0
    }
}

/// Every path the known-field tree lists, with its wire type
/// (`20.1` -> len, `metadata.4.2` -> len).
pub fn known_paths() -> BTreeMap<String, WireType> {
    fn walk(tree: &[Known], prefix: &str, out: &mut BTreeMap<String, WireType>) {
        for k in tree {
            let path = if prefix.is_empty() {
                k.number.to_string()
            } else {
                format!("{prefix}.{}", k.number)
            };
            out.insert(path.clone(), k.kind.wire_type());
            if let Kind::Msg(sub) = k.kind {
                walk(sub, &path, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(steps::STEP, "", &mut out);
    for (column, tree) in SIDE {
        walk(tree, column, &mut out);
    }
    out
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

/// Compare `current` with `baseline`.
pub fn compare(baseline: &Fingerprint, current: &Fingerprint) -> Report {
    let known = known_paths();
    let load_bearing: BTreeSet<&str> = LOAD_BEARING.iter().map(|(p, _)| *p).collect();
    let covered = baseline.sources.iter().all(|s| current.sources.contains(s));
    let mut findings = Vec::new();
    let mut not_exercised = Vec::new();
    let mut not_seen = Vec::new();
    let mut push = |class,
                    kind,
                    step_type: Option<i64>,
                    path: Option<&str>,
                    message: String,
                    example: Option<&str>| {
        findings.push(Finding {
            class,
            kind,
            step_type,
            path: path.map(str::to_string),
            message,
            example: example.filter(|e| !e.is_empty()).map(str::to_string),
        })
    };

    for (t, cur) in &current.step_types {
        let name = type_name(*t);
        let Some(base) = baseline.step_types.get(t) else {
            push(
                Class::Additive,
                FindingKind::NewStepType,
                Some(*t),
                None,
                format!(
                    "{name}: new step type in {} steps, {} field paths (e.g. {})",
                    cur.steps,
                    cur.paths.len(),
                    cur.example
                ),
                Some(&cur.example),
            );
            continue;
        };
        if cur.decode_errors > 0 && base.decode_errors == 0 {
            push(
                Class::Breaking,
                FindingKind::DecodeErrors,
                Some(*t),
                None,
                format!(
                    "{name}: {}/{} steps fail to decode (e.g. {})",
                    cur.decode_errors, cur.steps, cur.example
                ),
                Some(&cur.example),
            );
        }
        for (path, p) in &cur.paths {
            let Some(bp) = base.paths.get(path) else {
                let note = if known.contains_key(&path.0) {
                    " [known to the decoder]"
                } else {
                    ""
                };
                push(
                    Class::Additive,
                    FindingKind::NewPath,
                    Some(*t),
                    Some(&path.0),
                    format!(
                        "{name}: new path {path} {} in {}/{} steps (e.g. {}){note}",
                        wire_list(&p.wire),
                        p.steps,
                        cur.steps,
                        p.example
                    ),
                    Some(&p.example),
                );
                continue;
            };
            let changed: Vec<&String> = p
                .wire
                .keys()
                .filter(|w| !bp.wire.contains_key(*w))
                .collect();
            if !changed.is_empty() {
                let lb = load_bearing.contains(path.0.as_str());
                let is_known = known.contains_key(&path.0);
                let class = if lb || is_known {
                    Class::Breaking
                } else {
                    Class::Additive
                };
                let note = if lb {
                    " [load-bearing]"
                } else if is_known {
                    " [read by the decoder]"
                } else {
                    ""
                };
                let n: u64 = changed.iter().map(|w| p.wire[*w]).sum();
                push(
                    class,
                    FindingKind::WireTypeChange,
                    Some(*t),
                    Some(&path.0),
                    format!(
                        "{name}: {path} {} -> {} in {n}/{} steps (e.g. {}){note}",
                        wire_list(&bp.wire),
                        join_wires(changed.iter().copied()),
                        cur.steps,
                        p.example
                    ),
                    Some(&p.example),
                );
            }
        }
        let mut optional_unseen: Vec<String> = Vec::new();
        for (path, bp) in &base.paths {
            if cur.paths.contains_key(path) {
                continue;
            }
            let lb = load_bearing.contains(path.0.as_str());
            let is_known = known.contains_key(&path.0);
            let share = if base.steps > 0 {
                bp.steps as f64 / base.steps as f64
            } else {
                0.0
            };
            let chance = (1.0 - share).powi(cur.steps.min(i32::MAX as u64) as i32);
            let significant = chance < SIGNIFICANCE;
            if !significant && !covered {
                optional_unseen.push(path.0.clone());
                continue;
            }
            let (class, kind, note) = match (lb, is_known, significant) {
                (true, _, true) => (
                    Class::Breaking,
                    FindingKind::MissingLoadBearing,
                    " [load-bearing]",
                ),
                (false, true, true) => (
                    Class::Breaking,
                    FindingKind::VanishedPath,
                    " [read by the decoder]",
                ),
                (true, _, false) => (
                    Class::Additive,
                    FindingKind::MissingLoadBearing,
                    " [load-bearing, but this could be chance]",
                ),
                (false, true, false) => (
                    Class::Additive,
                    FindingKind::VanishedPath,
                    " [read by the decoder, but this could be chance]",
                ),
                (false, false, _) => (Class::Additive, FindingKind::VanishedPath, ""),
            };
            push(
                class,
                kind,
                Some(*t),
                Some(&path.0),
                format!(
                    "{name}: {path} {} -> missing in {}/{} steps (baseline: {}/{} steps, chance {:.1}%; e.g. {}){note}",
                    wire_list(&bp.wire),
                    cur.steps,
                    cur.steps,
                    bp.steps,
                    base.steps,
                    chance * 100.0,
                    cur.example
                ),
                Some(&cur.example),
            );
        }
        if !optional_unseen.is_empty() {
            not_seen.push(format!("{name}: {}", optional_unseen.join(", ")));
        }
    }
    for (t, base) in &baseline.step_types {
        if current.step_types.contains_key(t) {
            continue;
        }
        if covered {
            let is_known = StepType::from_raw(*t).is_known();
            push(
                if is_known {
                    Class::Breaking
                } else {
                    Class::Additive
                },
                FindingKind::VanishedStepType,
                Some(*t),
                None,
                format!(
                    "{}: step type vanished (baseline: {} steps, e.g. {})",
                    type_name(*t),
                    base.steps,
                    base.example
                ),
                Some(&base.example),
            );
        } else {
            not_exercised.push(type_name(*t));
        }
    }
    for s in current.statuses.keys() {
        if baseline.statuses.contains_key(s) {
            continue;
        }
        let st = StepStatus::from_raw(*s);
        let (class, what) = if st.is_known() {
            (Class::Additive, format!("new status {st}"))
        } else {
            (
                Class::Breaking,
                format!("unknown status {s}: the decoder cannot tell whether such a step finished"),
            )
        };
        let example = current
            .step_types
            .values()
            .filter(|t| t.statuses.contains_key(s))
            .map(|t| t.example.clone())
            .min()
            .unwrap_or_default();
        push(
            class,
            FindingKind::NewStatus,
            None,
            None,
            format!("{what} (e.g. {example})"),
            Some(&example),
        );
    }
    if current.decode_errors > 0 && baseline.decode_errors == 0 {
        // Per-type findings above name them; this covers new types too.
        let new_types: u64 = current
            .step_types
            .iter()
            .filter(|(t, _)| !baseline.step_types.contains_key(t))
            .map(|(_, c)| c.decode_errors)
            .sum();
        if new_types > 0 {
            push(
                Class::Breaking,
                FindingKind::DecodeErrors,
                None,
                None,
                format!("{new_types} steps of new step types fail to decode"),
                None,
            );
        }
    }

    // Tables and columns.
    let example = current.sources.first().cloned().unwrap_or_default();
    for (table, cols) in &current.tables {
        match baseline.tables.get(table) {
            None => push(
                Class::Additive,
                FindingKind::NewTable,
                None,
                None,
                format!("new table {table} ({})", cols.join(", ")),
                Some(&example),
            ),
            Some(base_cols) => {
                for c in cols.iter().filter(|c| !base_cols.contains(c)) {
                    push(
                        Class::Additive,
                        FindingKind::NewColumn,
                        None,
                        None,
                        format!("new column {table}.{c}"),
                        Some(&example),
                    );
                }
                for c in base_cols.iter().filter(|c| !cols.contains(c)) {
                    let needed = table == "steps" && NEEDED_STEP_COLUMNS.contains(&c.as_str());
                    push(
                        if needed {
                            Class::Breaking
                        } else {
                            Class::Additive
                        },
                        FindingKind::VanishedColumn,
                        None,
                        None,
                        format!(
                            "column {table}.{c} vanished{}",
                            if needed { " [read by the decoder]" } else { "" }
                        ),
                        Some(&example),
                    );
                }
            }
        }
    }
    for table in baseline.tables.keys() {
        if !current.tables.contains_key(table) {
            let needed = table == "steps";
            push(
                if needed {
                    Class::Breaking
                } else {
                    Class::Additive
                },
                FindingKind::VanishedTable,
                None,
                None,
                format!(
                    "table {table} vanished{}",
                    if needed { " [read by the decoder]" } else { "" }
                ),
                Some(&example),
            );
        }
    }
    for stmt in current.ddl.iter().filter(|s| !baseline.ddl.contains(s)) {
        push(
            Class::Additive,
            FindingKind::SchemaChange,
            None,
            None,
            format!("schema statement not in the baseline: {stmt}"),
            Some(&example),
        );
    }
    if covered {
        for stmt in baseline.ddl.iter().filter(|s| !current.ddl.contains(s)) {
            push(
                Class::Additive,
                FindingKind::SchemaChange,
                None,
                None,
                format!("baseline schema statement no longer present: {stmt}"),
                None,
            );
        }
    }

    // Blobs of the other tables (never read by the decoder).
    for (column, paths) in &current.other_blobs {
        let base = baseline.other_blobs.get(column);
        for (path, p) in paths {
            match base.and_then(|b| b.get(path)) {
                None => push(
                    Class::Additive,
                    FindingKind::NewPath,
                    None,
                    Some(&format!("{column}.{path}")),
                    format!(
                        "{column}: new path {path} {} in {} rows (e.g. {})",
                        wire_list(&p.wire),
                        p.steps,
                        p.example
                    ),
                    Some(&p.example),
                ),
                Some(bp) => {
                    let changed: Vec<&String> = p
                        .wire
                        .keys()
                        .filter(|w| !bp.wire.contains_key(*w))
                        .collect();
                    if !changed.is_empty() {
                        push(
                            Class::Additive,
                            FindingKind::WireTypeChange,
                            None,
                            Some(&format!("{column}.{path}")),
                            format!(
                                "{column}: {path} {} -> {} (e.g. {})",
                                wire_list(&bp.wire),
                                join_wires(changed.iter().copied()),
                                p.example
                            ),
                            Some(&p.example),
                        );
                    }
                }
            }
        }
    }

    for (format, example) in &current.models_formats {
        if baseline.models_formats.contains_key(format) {
            continue;
        }
        if format == "unknown" {
            push(
                Class::Breaking,
                FindingKind::ModelsFormat,
                None,
                None,
                format!("`agy models` output is in a format none of 1/2/3 matches (e.g. {example}): the model list would be misread"),
                Some(example),
            );
        } else {
            push(
                Class::Additive,
                FindingKind::ModelsFormat,
                None,
                None,
                format!("`agy models` format {format} not in the baseline (e.g. {example})"),
                Some(example),
            );
        }
    }

    findings.sort_by(|a, b| {
        (
            a.class,
            a.step_type,
            a.kind,
            a.path.as_ref().map(|p| PathKey(p.clone())),
        )
            .cmp(&(
                b.class,
                b.step_type,
                b.kind,
                b.path.as_ref().map(|p| PathKey(p.clone())),
            ))
    });
    Report {
        breaking: findings
            .iter()
            .filter(|f| f.class == Class::Breaking)
            .count(),
        additive: findings
            .iter()
            .filter(|f| f.class == Class::Additive)
            .count(),
        findings,
        not_exercised,
        not_seen,
    }
}

impl Report {
    /// The readable report.
    pub fn to_text(&self, current: &Fingerprint, baseline_path: &Path) -> String {
        let mut out = format!(
            "drift: {} input(s), {} steps, against {}\n",
            current.sources.len(),
            current.total_steps(),
            baseline_path.display()
        );
        for f in &self.findings {
            out.push_str(&f.to_string());
            out.push('\n');
        }
        if !self.not_exercised.is_empty() {
            out.push_str(&format!(
                "note: not exercised by these inputs (not checked): {}\n",
                self.not_exercised.join(", ")
            ));
        }
        if !self.not_seen.is_empty() {
            out.push_str(&format!(
                "note: baseline paths not seen, which could be chance (not checked): {}\n",
                self.not_seen.join("; ")
            ));
        }
        if self.findings.is_empty() {
            out.push_str("no drift\n");
        } else {
            out.push_str(&format!(
                "{} breaking, {} additive\n",
                self.breaking, self.additive
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_formats() {
        assert_eq!(models_format(crate::synth::MODELS_FORMAT_1), Some("1"));
        assert_eq!(models_format(crate::synth::MODELS_FORMAT_2), Some("2"));
        assert_eq!(models_format(crate::synth::MODELS_FORMAT_3), Some("3"));
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
