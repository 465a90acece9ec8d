//! The recording format: an agy run as a header plus the sequence of
//! committed database transactions it made, in JSON Lines.
//!
//! A recording is what fake-agy replays, what `agy-bridge record` captures and
//! what the drift tool fingerprints, so all three share this one reader and
//! writer. It is text so that a new recording diffs well in review; blobs are
//! base64 because they are protobuf. The format is documented in
//! `recordings/README.md`; bump [`FORMAT_VERSION`] on any incompatible change.

use agy_format::schema;
use base64::Engine as _;
use rusqlite::types::{ToSqlOutput, Value as SqlRaw, ValueRef};
use rusqlite::ToSql;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// 2 added the `denied` gate (a reader of version 1 would refuse it as an
/// unknown variant) and the optional `outcome` and `follows`. 3 added a
/// write's `stream_error` and the outcome's `killed`: a version-2 reader
/// would silently drop them and replay a different run (a result for a run
/// that was killed, a tool error without its text), so it must refuse them.
/// 4 added a commit's `turn`: a recording of several stdin turns in one
/// process; a version-3 reader would replay them all as one turn, so it must
/// refuse them. Older files read unchanged (every commit is turn 0).
pub const FORMAT_VERSION: u32 = 4;

/// The format of a recording of one turn: the writer marks a file
/// [`FORMAT_VERSION`] only when it has several turns, so version-3 readers
/// keep reading every recording they can replay faithfully.
pub const SINGLE_TURN_FORMAT: u32 = 3;

/// agy's start-up before it prints `init` and reads its first stdin line:
/// about 2.4 s in a real agy 1.2.14 capture. A replay waits this long only
/// when asked (fake-agy's `FAKE_AGY_BOOT_MS`, 0 by default so tests start
/// fast); benches that measure what a user waits for ask for it.
pub const REALISTIC_BOOT_MS: u64 = 2400;

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("cannot read recording {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("recording line {line}: {source}")]
    Json {
        line: usize,
        source: serde_json::Error,
    },
    #[error("recording has no header line (the first line must be {{\"kind\":\"header\",...}})")]
    MissingHeader,
    #[error("recording line {line}: a second header")]
    SecondHeader { line: usize },
    #[error("recording line {line}: turn {found} after turn {previous} (turns go in order)")]
    TurnOrder {
        line: usize,
        found: u32,
        previous: u32,
    },
    #[error("recording format {found} is newer than this build understands ({FORMAT_VERSION})")]
    FormatVersion { found: u32 },
    #[error("commit {commit}: table {table:?} is not part of agy's schema")]
    UnknownTable { commit: usize, table: String },
    #[error("commit {commit}: write to {table} lacks key column {column:?}")]
    MissingKey {
        commit: usize,
        table: String,
        column: String,
    },
    #[error("no recording named {name:?} (looked for {tried})")]
    NotFound { name: String, tried: String },
    #[error("database error while applying commit {commit}: {source}")]
    Sql {
        commit: usize,
        source: rusqlite::Error,
    },
}

/// Where a recording came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provenance {
    /// Built by code; `from` says from what, `follows` names the real agy
    /// capture whose output it reproduces (public source and file name).
    Synthesized {
        from: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        follows: Option<String>,
    },
    /// Captured from a real agy run by `agy-bridge record`.
    Captured {
        agy_version: String,
        #[serde(default)]
        redacted: bool,
    },
}

/// The first line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    /// The agy version this recording emulates (what `--version` prints).
    pub agy_version: String,
    pub provenance: Provenance,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub prompt: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub workspace: Option<String>,
    /// The conversation id the run created (or resumed). Commits name their
    /// database by conversation id; replays map these ids to fresh ones.
    pub root_conversation: String,
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
    /// Exactly what `agy models` printed (stdout).
    pub models_output: String,
    /// Exactly what `agy --version` printed.
    pub version_output: String,
    /// The `sqlite_master` SQL of the root database, in creation order, when
    /// the recording was captured from a real agy (`agy-bridge record` fills
    /// it). Empty means [`schema::DDL`], the schema fake-agy creates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema: Vec<String>,
    /// How the run ended, beyond `stdout`/`stderr`/`exit_code`: what agy's
    /// stream-json `result` said. Absent: derived (exit code 0 is SUCCESS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
}

/// The `result` facts of a run that did not simply succeed (agy's outcome
/// table: docs/agy-format.md, "Outcomes"). `stderr` and `exit_code` stay in
/// the header, verbatim; this says what the stream-json `result` carried, so
/// a replay prints the stream, stderr and exit code of one and the same run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// `result.status`: `SUCCESS`, `ERROR` or `CANCELED` (empty for a run
    /// that was `killed` and printed no result).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// `result.error`: agy's human sentence (never the AGY_ERROR JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// agy failed before it created a conversation (sign-in, model
    /// validation): no database, no `init` line, `conversation_id` `""` and
    /// `num_turns` 0 in the result.
    #[serde(default, skip_serializing_if = "is_false")]
    pub before_conversation: bool,
    /// The turn's usage when it is not the sum of the recorded model calls
    /// (a capture that kept only part of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<agy_format::stream_json::Usage>,
    /// Actions agy auto-denied on the recorded path itself (a captured run
    /// without `--dangerously-skip-permissions`; synthesized recordings mark
    /// denials with the `denied` gate instead).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_actions: Vec<agy_format::stream_json::DeniedAction>,
    /// agy was killed after the last commit (a real capture of a run
    /// stopped with `taskkill /F`): it printed nothing more, no `result`, and
    /// the process ended with `exit_code` (fake-agy: or by SIGKILL, with
    /// `FAKE_AGY_CRASH_MODE=sigkill`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub killed: bool,
}

/// What fake-agy does at a gated commit. Both kinds are skipped with
/// `--dangerously-skip-permissions` (agy never asks then).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// The commit is agy asking for permission. Without the flag it is
    /// applied; then an agy before 1.1.7 stalls (print mode cannot ask),
    /// a later one auto-denies (the `denied` commits that follow).
    Permission,
    /// What agy writes after auto-denying the permission asked for just
    /// before (the tool step ending without output, maybe an answer after
    /// it). Applied only on the denied path, which ends with the last of
    /// them; the ungated commits after them are the permitted path.
    Denied,
}

/// Whether a write inserts/replaces a whole row or deletes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `INSERT OR REPLACE`: the row becomes key + values (other columns take
    /// their defaults), which is also how an in-place rewrite is recorded.
    #[default]
    Upsert,
    Delete,
}

/// One row write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Write {
    pub table: String,
    #[serde(default, skip_serializing_if = "is_upsert")]
    pub op: Op,
    pub key: BTreeMap<String, SqlValue>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, SqlValue>,
    /// For a `steps` write that ends a tool step in ERROR: the error text
    /// agy printed in stream-json (`tool_info.error.message`) when the row
    /// itself holds none. Never written to the database. Why: real captures
    /// (agy 1.2.7's denied `write_to_file` and MCP calls) show the text in
    /// stream-json, and nobody has shown that agy's database holds it; a
    /// recording must be able to give the stream its text while the step's
    /// row lacks it, so the bridge can be tested on exactly that case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_error: Option<String>,
}

fn is_upsert(op: &Op) -> bool {
    *op == Op::Upsert
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One committed transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// Milliseconds from process start.
    pub t_ms: u64,
    /// The conversation id of the database written.
    pub db: String,
    /// State that existed before the run (the earlier turns of a resumed
    /// conversation). A replay onto an existing conversation skips it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pre: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
    /// agy calls a tool on an MCP server at this point (fake-agy makes the
    /// call, waits for the answer and writes the type-38 step with it,
    /// before this commit's own writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_call: Option<McpCall>,
    /// Which stdin turn of the process wrote it (0: the first, or the only
    /// one). The `t_ms` of a later turn counts from when its input line
    /// arrived, so a replay keeps each turn's pace however late the caller
    /// sends it. Turns go in order and do not interleave: agy runs one turn
    /// at a time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turn: u32,
    pub writes: Vec<Write>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Commit {
    /// The `(idx, step_payload)` of each `steps` write, in order.
    pub fn step_payloads(&self) -> Vec<(i64, Vec<u8>)> {
        self.writes
            .iter()
            .filter(|w| w.table == "steps")
            .filter_map(|w| {
                let idx = w.key.get("idx")?.as_i64()?;
                let p = w.values.get("step_payload")?.as_blob()?.to_vec();
                Some((idx, p))
            })
            .collect()
    }
}

/// A call of an MCP tool in a recording (see recordings/README.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCall {
    /// The server's name in agy's MCP configuration.
    pub server: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: serde_json::Value,
    /// The step index of the type-38 step the call becomes.
    pub idx: i64,
}

/// A column value. JSON: `null`, an integer, a string, `{"real": f}` or
/// `{"base64": "..."}` for blobs.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl SqlValue {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            SqlValue::Integer(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_blob(&self) -> Option<&[u8]> {
        match self {
            SqlValue::Blob(b) => Some(b),
            _ => None,
        }
    }

    pub fn from_ref(v: ValueRef<'_>) -> SqlValue {
        match v {
            ValueRef::Null => SqlValue::Null,
            ValueRef::Integer(i) => SqlValue::Integer(i),
            ValueRef::Real(f) => SqlValue::Real(f),
            ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
        }
    }
}

impl ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            SqlValue::Null => ToSqlOutput::Owned(SqlRaw::Null),
            SqlValue::Integer(i) => ToSqlOutput::Owned(SqlRaw::Integer(*i)),
            SqlValue::Real(f) => ToSqlOutput::Owned(SqlRaw::Real(*f)),
            SqlValue::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            SqlValue::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

impl Serialize for SqlValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            SqlValue::Null => s.serialize_none(),
            SqlValue::Integer(i) => s.serialize_i64(*i),
            SqlValue::Text(t) => s.serialize_str(t),
            SqlValue::Real(f) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("real", f)?;
                m.end()
            }
            SqlValue::Blob(b) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(
                    "base64",
                    &base64::engine::general_purpose::STANDARD.encode(b),
                )?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for SqlValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        Ok(match v {
            serde_json::Value::Null => SqlValue::Null,
            serde_json::Value::Bool(b) => SqlValue::Integer(b as i64),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => SqlValue::Integer(i),
                None => {
                    return Err(D::Error::custom(format!(
                        "{n} is not a 64-bit integer; write reals as {{\"real\": x}}"
                    )))
                }
            },
            serde_json::Value::String(s) => SqlValue::Text(s),
            serde_json::Value::Object(m) => {
                if let Some(b) = m.get("base64").and_then(|v| v.as_str()) {
                    SqlValue::Blob(
                        base64::engine::general_purpose::STANDARD
                            .decode(b)
                            .map_err(|e| D::Error::custom(format!("bad base64 blob: {e}")))?,
                    )
                } else if let Some(f) = m.get("real").and_then(|v| v.as_f64()) {
                    SqlValue::Real(f)
                } else {
                    return Err(D::Error::custom(
                        "expected {\"base64\": ...} or {\"real\": ...}",
                    ));
                }
            }
            serde_json::Value::Array(_) => {
                return Err(D::Error::custom("arrays are not column values"))
            }
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Header(Box<Header>),
    Commit(Commit),
}

/// A whole recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub header: Header,
    pub commits: Vec<Commit>,
}

/// How a replay applies a recording.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// Behave as with `--dangerously-skip-permissions` (gates are skipped).
    pub skip_permissions: bool,
    /// Skip `pre` commits (replaying onto an existing conversation).
    pub skip_pre: bool,
    /// Added to the idx key of step-indexed tables.
    pub idx_offset: i64,
    /// Recorded id -> id to write instead, in keys, text and blobs.
    pub id_map: Vec<(String, String)>,
    /// Only the commits of this turn (`None`: every turn, as one run).
    pub turn: Option<u32>,
}

impl Recording {
    pub fn parse(text: &str) -> Result<Recording, RecordingError> {
        let mut header = None;
        let mut commits = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let parsed: Line =
                serde_json::from_str(line).map_err(|source| RecordingError::Json {
                    line: i + 1,
                    source,
                })?;
            match parsed {
                Line::Header(h) => {
                    let h = *h;
                    if header.is_some() {
                        return Err(RecordingError::SecondHeader { line: i + 1 });
                    }
                    if h.format > FORMAT_VERSION {
                        return Err(RecordingError::FormatVersion { found: h.format });
                    }
                    header = Some(h);
                }
                Line::Commit(c) => {
                    if header.is_none() {
                        return Err(RecordingError::MissingHeader);
                    }
                    let previous = commits.last().map_or(0, |p: &Commit| p.turn);
                    if c.turn < previous {
                        return Err(RecordingError::TurnOrder {
                            line: i + 1,
                            found: c.turn,
                            previous,
                        });
                    }
                    commits.push(c);
                }
            }
        }
        let header = header.ok_or(RecordingError::MissingHeader)?;
        Ok(Recording { header, commits })
    }

    pub fn load(path: &Path) -> Result<Recording, RecordingError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Recording::parse(&text)
    }

    /// One JSON object per line, header first, ending in a newline.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        let mut push = |line: &Line| {
            // Serialising plain data with string keys cannot fail.
            out.push_str(&serde_json::to_string(line).unwrap_or_default());
            out.push('\n');
        };
        let mut header = self.header.clone();
        header.format = header.format.max(self.min_format());
        push(&Line::Header(Box::new(header)));
        for c in &self.commits {
            push(&Line::Commit(c.clone()));
        }
        out
    }

    pub fn save(&self, path: &Path) -> Result<(), RecordingError> {
        std::fs::write(path, self.to_jsonl()).map_err(|source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Write the recording readable by its owner alone (mode 0600, also
    /// when `path` already existed with a wider mode): an unredacted
    /// recording holds the prompt, paths, the user's name and ids.
    pub fn save_private(&self, path: &Path) -> Result<(), RecordingError> {
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let io_err = |source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(io_err)?;
        // `mode` applies only to a file this call created.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io_err)?;
        file.write_all(self.to_jsonl().as_bytes()).map_err(io_err)
    }

    /// The conversation ids the recording writes, root first.
    pub fn conversations(&self) -> Vec<String> {
        let mut ids = vec![self.header.root_conversation.clone()];
        for c in &self.commits {
            if !ids.contains(&c.db) {
                ids.push(c.db.clone());
            }
        }
        ids
    }

    /// The commits a replay with `opts` applies, in order.
    pub fn effective_commits<'a>(
        &'a self,
        opts: &'a ApplyOptions,
    ) -> impl Iterator<Item = (usize, &'a Commit)> + 'a {
        self.commits.iter().enumerate().filter(move |(_, c)| {
            (!opts.skip_pre || !c.pre)
                && (!opts.skip_permissions || c.gate.is_none())
                && opts.turn.is_none_or(|t| c.turn == t)
        })
    }

    /// The lowest format a reader needs for the turns: [`FORMAT_VERSION`]
    /// for several, else nothing beyond what the header says (a single turn
    /// reads as in format 3). The writer raises the header to it, so a file
    /// with turns never claims a format that would replay them as one.
    pub fn min_format(&self) -> u32 {
        if self.turns() > 1 {
            FORMAT_VERSION
        } else {
            0
        }
    }

    /// How many stdin turns the recording holds (1 for a recording without
    /// `turn`s, and for one without commits).
    pub fn turns(&self) -> u32 {
        self.commits.last().map_or(0, |c| c.turn) + 1
    }

    /// Replay every commit for `db` into a fresh in-memory database with the
    /// full schema, as a finished run would leave it (permissions skipped).
    pub fn final_database(&self, db: &str) -> Result<rusqlite::Connection, RecordingError> {
        let sql = |source| RecordingError::Sql { commit: 0, source };
        let conn = rusqlite::Connection::open_in_memory().map_err(sql)?;
        schema::create(&conn).map_err(sql)?;
        let opts = ApplyOptions {
            skip_permissions: true,
            ..ApplyOptions::default()
        };
        for (i, commit) in self.effective_commits(&opts) {
            if commit.db == db {
                apply_commit(&conn, i, commit, &opts)?;
            }
        }
        Ok(conn)
    }

    /// The final text the run printed, without the trailing newline.
    pub fn stdout_text(&self) -> &str {
        self.header.stdout.trim_end_matches('\n')
    }
}

/// Apply one commit in one transaction, so a reader sees all of it or none.
pub fn apply_commit(
    conn: &rusqlite::Connection,
    index: usize,
    commit: &Commit,
    opts: &ApplyOptions,
) -> Result<(), RecordingError> {
    let sql = |source| RecordingError::Sql {
        commit: index,
        source,
    };
    let tx = conn.unchecked_transaction().map_err(sql)?;
    for write in &commit.writes {
        let keys =
            schema::key_columns(&write.table).ok_or_else(|| RecordingError::UnknownTable {
                commit: index,
                table: write.table.clone(),
            })?;
        for k in keys {
            if !write.key.contains_key(*k) {
                return Err(RecordingError::MissingKey {
                    commit: index,
                    table: write.table.clone(),
                    column: k.to_string(),
                });
            }
        }
        let shift_idx = schema::IDX_TABLES.contains(&write.table.as_str());
        let map_value = |col: &str, v: &SqlValue| -> SqlValue {
            match v {
                SqlValue::Integer(i) if shift_idx && col == "idx" => {
                    SqlValue::Integer(i + opts.idx_offset)
                }
                SqlValue::Text(t) => SqlValue::Text(replace_ids_text(t, &opts.id_map)),
                SqlValue::Blob(b) => SqlValue::Blob(replace_ids_bytes(b, &opts.id_map)),
                other => other.clone(),
            }
        };
        let table = schema::quote_ident(&write.table);
        match write.op {
            Op::Delete => {
                let cond: Vec<String> = write
                    .key
                    .keys()
                    .enumerate()
                    .map(|(i, c)| format!("{} = ?{}", schema::quote_ident(c), i + 1))
                    .collect();
                let params: Vec<SqlValue> =
                    write.key.iter().map(|(c, v)| map_value(c, v)).collect();
                tx.execute(
                    &format!("DELETE FROM {table} WHERE {}", cond.join(" AND ")),
                    rusqlite::params_from_iter(params.iter()),
                )
                .map_err(sql)?;
            }
            Op::Upsert => {
                let cols: Vec<(&String, &SqlValue)> =
                    write.key.iter().chain(write.values.iter()).collect();
                let names: Vec<String> = cols.iter().map(|(c, _)| schema::quote_ident(c)).collect();
                let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
                let params: Vec<SqlValue> = cols.iter().map(|(c, v)| map_value(c, v)).collect();
                tx.execute(
                    &format!(
                        "INSERT OR REPLACE INTO {table} ({}) VALUES ({})",
                        names.join(","),
                        marks.join(",")
                    ),
                    rusqlite::params_from_iter(params.iter()),
                )
                .map_err(sql)?;
            }
        }
    }
    tx.commit().map_err(sql)
}

fn replace_ids_text(s: &str, map: &[(String, String)]) -> String {
    let mut out = s.to_string();
    for (from, to) in map {
        if out.contains(from.as_str()) {
            out = out.replace(from.as_str(), to);
        }
    }
    out
}

/// Replace ids inside blobs. Only same-length replacements are made, so
/// protobuf length prefixes stay valid (conversation ids are all 36-byte
/// UUIDs); the redactor, which changes lengths, re-encodes instead.
fn replace_ids_bytes(b: &[u8], map: &[(String, String)]) -> Vec<u8> {
    let mut out = b.to_vec();
    for (from, to) in map {
        let (from, to) = (from.as_bytes(), to.as_bytes());
        if from.is_empty() || from.len() != to.len() || out.len() < from.len() {
            continue;
        }
        let mut i = 0;
        while i + from.len() <= out.len() {
            if &out[i..i + from.len()] == from {
                out[i..i + from.len()].copy_from_slice(to);
                i += from.len();
            } else {
                i += 1;
            }
        }
    }
    out
}

/// Find a recording by file path or by name in `dir` (`NAME.jsonl`).
pub fn resolve(name_or_path: &str, dir: &Path) -> Result<PathBuf, RecordingError> {
    let direct = PathBuf::from(name_or_path);
    if direct.is_file() {
        return Ok(direct);
    }
    let named = dir.join(format!("{name_or_path}.jsonl"));
    if named.is_file() {
        return Ok(named);
    }
    Err(RecordingError::NotFound {
        name: name_or_path.to_string(),
        tried: format!("{} and {}", direct.display(), named.display()),
    })
}

/// The `recordings/` directory of this source tree (for tests and the demo).
pub fn bundled_dir() -> PathBuf {
    // This crate sits at crates/corpus: the repository is two folders up.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/corpus has a repository around it")
        .join("recordings")
}

/// The names of the recordings in `dir`, sorted.
pub fn list(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".jsonl").map(str::to_string)
        })
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_line(format: u32) -> String {
        format!(
            r#"{{"kind":"header","format":{format},"agy_version":"1.2.7","provenance":{{"kind":"synthesized","from":"test"}},"prompt":"p","root_conversation":"r","stdout":"","stderr":"","exit_code":0,"models_output":"","version_output":""}}"#
        )
    }

    fn commit_line(t_ms: u64, turn: Option<u32>) -> String {
        let turn = turn.map(|t| format!(r#","turn":{t}"#)).unwrap_or_default();
        format!(r#"{{"kind":"commit","t_ms":{t_ms},"db":"r"{turn},"writes":[]}}"#)
    }

    #[test]
    fn a_recording_without_turns_is_one_turn_and_stays_format_3() {
        let text = [header_line(3), commit_line(0, None), commit_line(5, None)].join("\n");
        let rec = Recording::parse(&text).expect("parse");
        assert_eq!(rec.turns(), 1);
        assert!(rec.commits.iter().all(|c| c.turn == 0));
        let written = rec.to_jsonl();
        assert!(!written.contains("\"turn\""), "{written}");
        let again = Recording::parse(&written).expect("round trip");
        assert_eq!(again.header.format, 3);
    }

    #[test]
    fn turns_select_their_commits_and_mark_the_file_format_4() {
        let text = [
            header_line(3),
            commit_line(0, None),
            commit_line(5, Some(1)),
            commit_line(9, Some(1)),
        ]
        .join("\n");
        let rec = Recording::parse(&text).expect("parse");
        assert_eq!(rec.turns(), 2);
        let second = ApplyOptions {
            turn: Some(1),
            ..ApplyOptions::default()
        };
        let picked: Vec<usize> = rec.effective_commits(&second).map(|(i, _)| i).collect();
        assert_eq!(picked, [1, 2]);
        let all = ApplyOptions::default();
        assert_eq!(rec.effective_commits(&all).count(), 3);
        let written = Recording::parse(&rec.to_jsonl()).expect("round trip");
        assert_eq!(written.header.format, FORMAT_VERSION);
        assert_eq!(written.commits, rec.commits);
    }

    #[test]
    fn turns_out_of_order_are_refused() {
        let text = [
            header_line(4),
            commit_line(0, Some(1)),
            commit_line(5, Some(0)),
        ]
        .join("\n");
        match Recording::parse(&text) {
            Err(RecordingError::TurnOrder {
                line: 3,
                found: 0,
                previous: 1,
            }) => {}
            other => panic!("{other:?}"),
        }
    }
}
