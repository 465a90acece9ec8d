//! `agy-bridge record`: capture a real agy run (or an existing database) as a
//! recording in the corpus format.
//!
//! The recorder runs agy exactly as the runner does ([`runner::run_observed`],
//! same arguments, same discovery) and rides along as an [`Observer`]: on
//! every wake-up of the runner it reads, read-only, every table of the bound
//! conversation database and of every subagent database, diffs each against
//! the previous snapshot and emits one [`Commit`] per database that changed,
//! stamped with the milliseconds since agy was spawned. Writes are full-row
//! upserts (an in-place rewrite is an upsert of the same key) and deletes for
//! rows that vanished, so replaying the recording rebuilds every state the
//! recorder saw.
//!
//! ## Resolution limit
//!
//! A SQLite reader only ever sees committed states, and the recorder sees
//! only the states that are current at its wake-ups. Two commits that land
//! between two wake-ups are captured as one commit (the later state, at the
//! later time); nothing half-written is ever captured. Wake-ups are the
//! runner's: an inotify event on the bound database's files, plus the
//! fallback tick, which the recorder shortens to `CAPTURE_INTERVAL` (5 ms).
//! The tick matters more than it seems: agy's WAL write raises the inotify
//! event *before* the commit is published in the `-shm` index (a memory
//! write, which raises no event), so the event-driven poll often runs a few
//! microseconds too early and the commit is then seen at the next tick.
//! Subagent databases' writes do not wake the runner at all; they are seen at
//! the next tick too. Measured (`cargo bench --bench capture_latency`,
//! fake-agy replaying `hello` at full speed on a
//! loaded 2-core machine): every root commit seen 0-5 ms after it committed.
//! So commits closer together than about 5 ms (10 ms under heavy load) may
//! merge into one captured commit. Commits made before the database is bound
//! (discovery needs the file to exist and, where `/proc` is readable, to be
//! held open by our agy) are captured at the first poll after binding,
//! typically as one commit.
//!
//! The recorder never writes, never holds a read transaction between wake-ups
//! and never checkpoints, so it cannot block or disturb agy.

use crate::follow::discovery::{self, Snapshot};
use crate::process::short::{self, Program};
use crate::runner::{self, Observer, RunConfig, RunResult, TurnRequest};
use agy_corpus::recording::{Commit, Header, Provenance, Recording, SqlValue, Write};
use agy_format::database::{self, ReadError};
use agy_format::ids::ConversationId;
use agy_format::schema;
use agy_format::steps::{self, Body, StepRow};
use rusqlite::Connection;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The runner's fallback wake-up interval while recording. It bounds how
/// late a change is seen when the inotify wake-up came too early (see the
/// module docs) or never comes (subagent databases), and costs one `PRAGMA
/// data_version` per database per tick (about 5% of one core in a debug
/// build).
pub(crate) const CAPTURE_INTERVAL: Duration = Duration::from_millis(5);

/// How long `agy --version` may take.
pub(crate) const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long `agy models` may take (it fetches the list over the network).
pub(crate) const MODELS_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a recording could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// agy's version, which the recording's header names, could not be had.
    #[error("cannot run {bin} --version: {message}")]
    Version {
        /// The agy binary run.
        bin: String,
        /// Why it failed.
        message: String,
    },
    /// The run ended without the recorder finding agy's conversation.
    #[error("agy ran but no conversation database could be bound: {reason}")]
    NotBound {
        /// Why no database was bound.
        reason: String,
    },
    /// A conversation database could not be read whole.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A query on a conversation database failed.
    #[error("cannot read {path}: {source}")]
    Sql {
        /// The database.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

use agy_corpus::db::{diff_tables, read_tables, TableRows};

/// The child conversations named by type-127 steps (payload field 127.1).
fn children_in(tables: &[TableRows]) -> Vec<String> {
    let rows: Vec<StepRow> = tables
        .iter()
        .filter(|t| t.name == "steps")
        .flat_map(|t| t.rows.iter())
        .map(|r| agy_corpus::db::step_row(&r.key, &r.values))
        .collect();
    steps::subagent_children(&rows)
        .into_iter()
        .map(|id| id.as_str().to_string())
        .collect()
}

/// Whether any text or blob in `tables` contains `needle`.
fn mentions(tables: &[TableRows], table: &str, needle: &str) -> bool {
    let needle = needle.as_bytes();
    tables
        .iter()
        .filter(|t| t.name == table)
        .flat_map(|t| t.rows.iter())
        .flat_map(|r| r.key.values().chain(r.values.values()))
        .any(|v| match v {
            SqlValue::Text(s) => contains_bytes(s.as_bytes(), needle),
            SqlValue::Blob(b) => contains_bytes(b, needle),
            _ => false,
        })
}

fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn open(path: &Path) -> Result<Connection, ReadError> {
    let conn = database::open_read_only(path)?;
    // A read-only handle cannot checkpoint; make sure closing it never tries.
    let _ = conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    );
    Ok(conn)
}

/// Read a whole database in one read transaction: tables and schema.
fn read_consistent(
    conn: &Connection,
    path: &Path,
) -> Result<(Vec<TableRows>, Vec<String>), RecordError> {
    let sql = |source| RecordError::Sql {
        path: path.to_path_buf(),
        source,
    };
    let tx = conn.unchecked_transaction().map_err(sql)?;
    let tables = read_tables(&tx).map_err(sql)?;
    let ddl = schema::master_sql(&tx).map_err(sql)?;
    tx.finish().map_err(sql)?;
    Ok((tables, ddl))
}

// ---------------------------------------------------------------------------
// Capturing a live run.
// ---------------------------------------------------------------------------

/// One database being followed.
struct Tracked {
    id: String,
    path: PathBuf,
    conn: Option<Connection>,
    data_version: Option<i64>,
    tables: Option<Vec<TableRows>>,
    ddl: Vec<String>,
}

impl Tracked {
    fn new(id: String, path: PathBuf) -> Tracked {
        Tracked {
            id,
            path,
            conn: None,
            data_version: None,
            tables: None,
            ddl: Vec::new(),
        }
    }

    /// The writes since the last read, or `None` when nothing was committed
    /// (or the database is not readable yet).
    fn poll(&mut self, stats: &mut CaptureStats) -> Option<Vec<Write>> {
        if self.conn.is_none() {
            self.conn = open(&self.path).ok();
        }
        let conn = self.conn.as_ref()?;
        stats.version_checks += 1;
        let version: i64 = match conn.query_row("PRAGMA data_version", [], |r| r.get(0)) {
            Ok(v) => v,
            Err(_) => {
                self.conn = None;
                self.data_version = None;
                return None;
            }
        };
        if self.data_version == Some(version) {
            return None;
        }
        match read_consistent(conn, &self.path) {
            Ok((tables, ddl)) => {
                stats.reads += 1;
                self.data_version = Some(version);
                let writes = diff_tables(self.tables.as_deref(), &tables);
                self.tables = Some(tables);
                if !ddl.is_empty() {
                    self.ddl = ddl;
                }
                Some(writes)
            }
            Err(_) => {
                // Locked or mid-creation: try again at the next wake-up.
                None
            }
        }
    }
}

/// Counters for the record summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CaptureStats {
    /// Times the recorder looked at the databases (a change seen, or the tick).
    pub wakes: u64,
    /// `PRAGMA data_version` queries: the cheap check before a read.
    pub version_checks: u64,
    /// Whole-database reads (one per observed change).
    pub reads: u64,
}

/// The [`Observer`] that captures a run. Create it before spawning agy
/// (it snapshots the conversations directory), call [`Capturer::start`] right
/// before the run, and take [`Capturer::commits`] after.
pub struct Capturer {
    t0: Instant,
    before: Snapshot,
    dbs: Vec<Tracked>,
    root: Option<String>,
    /// child -> parent, from type-127 steps.
    links: BTreeMap<String, String>,
    commits: Vec<Commit>,
    stats: CaptureStats,
    /// The stdin turn being captured (a warm agy runs several).
    turn: u32,
}

impl Capturer {
    /// A capturer for a new conversation in `dir`.
    pub fn new(dir: &Path) -> Capturer {
        Capturer {
            t0: Instant::now(),
            before: discovery::snapshot(dir).unwrap_or_default(),
            dbs: Vec::new(),
            root: None,
            links: BTreeMap::new(),
            commits: Vec::new(),
            stats: CaptureStats::default(),
            turn: 0,
        }
    }

    /// A capturer for a run that resumes conversation `id`: its current
    /// state (and its subagents') becomes `pre` commits at t=0, so a replay
    /// onto an existing conversation skips it.
    pub(crate) fn resume(dir: &Path, id: &ConversationId) -> Capturer {
        let mut c = Capturer::new(dir);
        let root = id.as_str().to_string();
        c.root = Some(root.clone());
        let mut queue = vec![root];
        while let Some(id) = queue.pop() {
            if c.dbs.iter().any(|d| d.id == id) {
                continue;
            }
            let path = dir.join(format!("{id}.db"));
            let mut t = Tracked::new(id.clone(), path);
            let writes = t.poll(&mut c.stats).unwrap_or_default();
            if let Some(tables) = &t.tables {
                for child in children_in(tables) {
                    c.links.entry(child.clone()).or_insert(id.clone());
                    queue.push(child);
                }
            }
            if !writes.is_empty() {
                c.commits.push(Commit {
                    t_ms: 0,
                    db: id.clone(),
                    pre: true,
                    gate: None,
                    mcp_call: None,
                    turn: 0,
                    writes,
                });
            }
            c.dbs.push(t);
        }
        c
    }

    /// Start the clock: commit offsets are measured from here.
    pub fn start(&mut self) {
        self.t0 = Instant::now();
    }

    /// The next stdin turn of the same agy begins now: later commits are
    /// that turn's, timed from here (the recording format's `turn`).
    pub(crate) fn next_turn(&mut self) {
        self.turn += 1;
        self.start();
    }

    pub(crate) fn stats(&self) -> CaptureStats {
        self.stats
    }

    fn track(&mut self, dir: &Path, id: &str) {
        if !self.dbs.iter().any(|d| d.id == id) {
            self.dbs
                .push(Tracked::new(id.to_string(), dir.join(format!("{id}.db"))));
        }
    }

    /// Look at every database once (what a wake-up does).
    pub(crate) fn capture(&mut self, dir: &Path, root_db: &Path) {
        self.stats.wakes += 1;
        let t_ms = self.t0.elapsed().as_millis() as u64;
        let root = root_db
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if self.root.is_none() {
            self.root = Some(root.clone());
        }
        self.track(dir, &root);
        // Any database created since the run started may be a subagent's;
        // unrelated ones are dropped in `finish`.
        if let Ok(new) = discovery::new_since(dir, &self.before) {
            for id in new {
                self.track(dir, id.as_str());
            }
        }
        // Root first, then in the order first seen.
        let mut order: Vec<usize> = (0..self.dbs.len()).collect();
        order.sort_by_key(|&i| self.dbs[i].id != root);
        let mut named = Vec::new();
        for i in order {
            let Some(writes) = self.dbs[i].poll(&mut self.stats) else {
                continue;
            };
            if writes.is_empty() {
                continue;
            }
            if let Some(tables) = &self.dbs[i].tables {
                for child in children_in(tables) {
                    named.push((child, self.dbs[i].id.clone()));
                }
            }
            self.commits.push(Commit {
                t_ms,
                db: self.dbs[i].id.clone(),
                pre: false,
                gate: None,
                mcp_call: None,
                turn: self.turn,
                writes,
            });
        }
        for (child, parent) in named {
            self.links.entry(child.clone()).or_insert(parent);
            // A child whose database pre-dates the run is followed too.
            if dir.join(format!("{child}.db")).is_file() {
                self.track(dir, &child);
            }
        }
    }

    /// The conversations that belong to the run: the root, the children
    /// its type-127 steps name (transitively), and any new database whose
    /// `parent_references` name one of those.
    fn kept(&self) -> BTreeSet<String> {
        let mut kept = BTreeSet::new();
        let Some(root) = &self.root else {
            return kept;
        };
        kept.insert(root.clone());
        loop {
            let before = kept.len();
            for d in &self.dbs {
                if kept.contains(&d.id) {
                    continue;
                }
                let linked = self
                    .links
                    .get(&d.id)
                    .map(|p| kept.contains(p))
                    .unwrap_or(false);
                let referenced = d
                    .tables
                    .as_deref()
                    .map(|t| kept.iter().any(|k| mentions(t, "parent_references", k)))
                    .unwrap_or(false);
                if linked || referenced {
                    kept.insert(d.id.clone());
                }
            }
            if kept.len() == before {
                return kept;
            }
        }
    }

    /// The root conversation's schema as `sqlite_master` holds it.
    pub(crate) fn schema(&self) -> Vec<String> {
        self.root
            .as_ref()
            .and_then(|r| self.dbs.iter().find(|d| &d.id == r))
            .map(|d| d.ddl.clone())
            .unwrap_or_default()
    }

    /// The captured commits of the run's own conversations, in order.
    pub fn commits(&self) -> Vec<Commit> {
        let kept = self.kept();
        self.commits
            .iter()
            .filter(|c| kept.contains(&c.db))
            .cloned()
            .collect()
    }

    pub(crate) fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }
}

impl Observer for Capturer {
    fn wake(&mut self, dir: &Path, db: &Path) {
        self.capture(dir, db);
    }
}

/// What `record` asks agy to do, beyond the runner's own config.
#[derive(Debug, Clone, Default)]
pub struct RecordRequest {
    /// The prompt and agy's options for the one turn recorded.
    pub turn: TurnRequest,
}

/// A finished recording and the run it came from.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The recording, ready to be written (and redacted).
    pub recording: Recording,
    /// How agy's run ended.
    pub result: RunResult,
    /// What capturing cost.
    pub stats: CaptureStats,
    /// Problems that did not stop the recording (e.g. `agy models` failed).
    pub warnings: Vec<String>,
}

/// Run `bin args`, with `env`, stdin from /dev/null, as a short program,
/// and return its stdout (and whether it exited 0), giving up (and ending
/// its tree) after `timeout` or when `cancel` fires.
async fn probe(
    bin: &Path,
    args: &[&str],
    env: &[(String, String)],
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<(String, bool), String> {
    let program = Program::new(bin, args, timeout).env(env);
    let out = short::run(&program, cancel)
        .await
        .map_err(|e| e.to_string())?;
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    ))
}

/// The version token of `agy --version` output (`1.2.8`), else the trimmed
/// first line.
pub(crate) fn version_of(output: &str) -> String {
    match crate::runner::version::parse_version(output) {
        Some((a, b, c)) => format!("{a}.{b}.{c}"),
        None => output.lines().next().unwrap_or("").trim().to_string(),
    }
}

/// `agy --version` and `agy models`, as the recording's header keeps them;
/// what went wrong on the way becomes a warning.
async fn probe_agy(
    cfg: &RunConfig,
    warnings: &mut Vec<String>,
    cancel: &CancellationToken,
) -> Result<(String, String), RecordError> {
    let bin_name = cfg.agy_bin.display().to_string();
    let version = probe(
        &cfg.agy_bin,
        &["--version"],
        &cfg.env,
        VERSION_TIMEOUT,
        cancel,
    );
    let (version_output, ok) = version.await.map_err(|message| RecordError::Version {
        bin: bin_name.clone(),
        message,
    })?;
    if !ok {
        warnings.push(format!("`{bin_name} --version` exited with an error"));
    }
    let models = probe(&cfg.agy_bin, &["models"], &cfg.env, MODELS_TIMEOUT, cancel);
    let models_output = match models.await {
        Ok((out, true)) => out,
        Ok((out, false)) => {
            warnings.push(format!(
                "`{bin_name} models` exited with an error (not signed in?); its stdout is kept"
            ));
            out
        }
        Err(e) => {
            warnings.push(format!("`{bin_name} models` failed: {e}"));
            String::new()
        }
    };
    Ok((version_output, models_output))
}

/// The header of a captured run.
fn captured_header(
    req: &RecordRequest,
    result: &RunResult,
    root: String,
    capturer: &Capturer,
    version_output: String,
    models_output: String,
) -> Header {
    let workspace = req
        .turn
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .map(|p| p.display().to_string());
    let agy_version = version_of(&version_output);
    let exit_code = result
        .exit_code
        .or_else(|| result.signal.map(|s| 128 + s))
        .unwrap_or(-1);
    Header {
        format: agy_corpus::recording::FORMAT_VERSION,
        agy_version: agy_version.clone(),
        provenance: Provenance::Captured {
            agy_version,
            redacted: false,
        },
        description: String::new(),
        prompt: req.turn.prompt.clone(),
        model: req.turn.model.clone(),
        workspace,
        root_conversation: root,
        stdout: result.stdout.clone(),
        stderr: result.stderr_tail.clone(),
        exit_code,
        models_output,
        version_output,
        schema: capturer.schema(),
        outcome: None,
    }
}

/// Record one agy run: spawn agy as the runner does (binding by discovery,
/// so that stdout is agy's plain print-mode text, exactly as a recording
/// holds it), capture every change of its databases, and build the
/// recording. Cancelling `cancel` stops agy and keeps what was captured.
pub async fn record(
    cfg: &RunConfig,
    req: &RecordRequest,
    cancel: CancellationToken,
) -> Result<Recorded, RecordError> {
    let mut warnings = Vec::new();
    let (version_output, models_output) = probe_agy(cfg, &mut warnings, &cancel).await?;

    let mut run_cfg = cfg.clone();
    run_cfg.bind = agy_format::agy_args::BindMode::Discovery;
    run_cfg.poll_interval = run_cfg.poll_interval.min(CAPTURE_INTERVAL);
    let dir = run_cfg.conversations_dir.clone();
    let _ = std::fs::create_dir_all(&dir);
    let mut capturer = match &req.turn.conversation {
        Some(id) => Capturer::resume(&dir, id),
        None => Capturer::new(&dir),
    };
    // Nobody reads the events (the capture is the record): a closed
    // channel makes the runner drop them instead of holding them.
    let (tx, rx) = runner::event_channel();
    drop(rx);
    capturer.start();
    let result = runner::run_observed(
        &run_cfg,
        &req.turn,
        cancel,
        tx,
        Some(&mut capturer as &mut dyn Observer),
    )
    .await;

    let Some(root) = result
        .conversation_id
        .clone()
        .or_else(|| capturer.root().map(str::to_string))
    else {
        return Err(RecordError::NotBound {
            reason: result
                .failure
                .as_ref()
                .map(|f| f.to_string())
                .unwrap_or_else(|| "no database appeared".into()),
        });
    };
    if let Some(f) = &result.failure {
        warnings.push(format!("the run did not succeed: {f}"));
    }
    let header = captured_header(req, &result, root, &capturer, version_output, models_output);
    Ok(Recorded {
        recording: Recording {
            header,
            commits: capturer.commits(),
        },
        stats: capturer.stats(),
        result,
        warnings,
    })
}

// ---------------------------------------------------------------------------
// An existing database.
// ---------------------------------------------------------------------------

/// Turn an existing conversation database (and the subagent databases its
/// type-127 steps name, when they sit beside it) into a recording: one
/// commit per database holding every row, all at t=0. The header is filled
/// from the data where possible: the prompt from the first user-input step,
/// stdout from the decoded answer text; version and models are unknown.
pub fn from_database(path: &Path) -> Result<Recording, RecordError> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let root = match ConversationId::parse(&stem) {
        Ok(id) => id.as_str().to_string(),
        // A non-UUID name would be replaced everywhere it appears in text
        // on replay; give the conversation a real id instead.
        Err(_) => uuid::Uuid::new_v4().to_string(),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let conn = open(path)?;
    let (tables, ddl) = read_consistent(&conn, path)?;
    drop(conn);
    let mut commits = vec![Commit {
        t_ms: 0,
        db: root.clone(),
        pre: false,
        gate: None,
        mcp_call: None,
        turn: 0,
        writes: diff_tables(None, &tables),
    }];
    let mut seen = BTreeSet::from([root.clone()]);
    let mut queue = children_in(&tables);
    while let Some(child) = queue.pop() {
        if !seen.insert(child.clone()) {
            continue;
        }
        let child_path = dir.join(format!("{child}.db"));
        let Ok(c) = open(&child_path) else { continue };
        let Ok((child_tables, _)) = read_consistent(&c, &child_path) else {
            continue;
        };
        queue.extend(children_in(&child_tables));
        commits.push(Commit {
            t_ms: 0,
            db: child,
            pre: false,
            gate: None,
            mcp_call: None,
            turn: 0,
            writes: diff_tables(None, &child_tables),
        });
    }

    let rows = database::read_all(&database::open_read_only(path)?, path).unwrap_or_default();
    let decoded = crate::view::decode::decode_rows(&rows);
    let prompt = decoded
        .iter()
        .find_map(|s| match &s.step.body {
            Some(Body::UserInput(u)) => Some(u.text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    // agy prints the final answer: the text of the last step that has any.
    let transcript = crate::follow::transcript::Transcript::from_events(
        decoded.iter().flat_map(|s| s.events.iter().cloned()),
    );
    let text = transcript
        .last_answer()
        .map(str::to_string)
        .unwrap_or_default();
    let header = Header {
        format: agy_corpus::recording::FORMAT_VERSION,
        agy_version: "unknown".into(),
        provenance: Provenance::Captured {
            agy_version: "unknown".into(),
            redacted: false,
        },
        description: format!("Converted from the database {stem}.db (no timing)."),
        prompt,
        model: None,
        workspace: None,
        root_conversation: root,
        stdout: if text.is_empty() {
            String::new()
        } else {
            format!("{text}\n")
        },
        stderr: String::new(),
        exit_code: 0,
        models_output: String::new(),
        version_output: String::new(),
        schema: ddl,
        outcome: None,
    };
    Ok(Recording { header, commits })
}

/// What `record` warns about when the output is not redacted.
pub const PRIVACY_WARNING: &str = "warning: this recording holds private data (your home and workspace paths, user name, conversation ids and the prompt); pass --redact before publishing it";
