//! The conversation databases as agy keeps them: created in WAL mode with
//! the full schema, the root one opened and its step idx continued when a
//! conversation is resumed, and the `steps` rows a commit writes. The
//! subagent databases are written by [`super::writer`] processes with the
//! same helpers, so both count idx the same way.

use super::conversation::Target;
use super::{Fatal, Run};
use crate::stream::Earlier;
use agy_corpus::recording::{apply_commit, Commit, Op, Write as RowWrite};
use agy_format::schema;
use agy_format::steps::{self, StepRow};
use rusqlite::Connection;
use std::path::Path;
use std::time::Duration;

/// Create a conversation database as agy does: WAL, then the full schema.
pub(super) fn create_db(path: &Path) -> Result<Connection, Fatal> {
    if path.exists() {
        return Err(Fatal::internal(format!(
            "refusing to overwrite existing database {}",
            path.display()
        )));
    }
    let conn = Connection::open(path)
        .map_err(|e| Fatal::internal(format!("cannot create {}: {e}", path.display())))?;
    set_wal(&conn, path)?;
    schema::create(&conn)
        .map_err(|e| Fatal::internal(format!("cannot create schema in {}: {e}", path.display())))?;
    Ok(conn)
}

fn set_wal(conn: &Connection, path: &Path) -> Result<(), Fatal> {
    let sql = |e: rusqlite::Error| Fatal::internal(format!("{}: {e}", path.display()));
    conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Fatal::internal(format!(
            "{}: journal_mode is {mode:?} after asking for WAL",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", synchronous()?)
        .map_err(sql)
}

/// `FAKE_AGY_SYNCHRONOUS`: how the writer syncs each commit. FULL by
/// default, SQLite's own default and what agy is assumed to use: each
/// commit waits for an fsync of the WAL before readers see it, a latency
/// a follower has to catch. NORMAL skips that fsync (OFF, EXTRA as SQLite).
fn synchronous() -> Result<&'static str, Fatal> {
    let value = super::knobs::env("FAKE_AGY_SYNCHRONOUS");
    match value
        .as_deref()
        .map(|v| v.trim().to_ascii_uppercase())
        .as_deref()
    {
        None | Some("FULL") => Ok("FULL"),
        Some("NORMAL") => Ok("NORMAL"),
        Some("OFF") => Ok("OFF"),
        Some("EXTRA") => Ok("EXTRA"),
        Some(_) => Err(Fatal::new(
            super::CONFIG_EXIT,
            format!(
                "FAKE_AGY_SYNCHRONOUS={:?}: expected FULL, NORMAL, OFF or EXTRA",
                value.unwrap_or_default()
            ),
        )),
    }
}

/// The `steps` rows a commit upserts: (idx after offset, step_type, status).
pub(super) fn step_writes(commit: &Commit, idx_offset: i64) -> Vec<(i64, i64, i64)> {
    commit
        .writes
        .iter()
        .filter(|w| w.table == "steps" && w.op == Op::Upsert)
        .filter_map(|w| {
            let idx = w.key.get("idx")?.as_i64()? + idx_offset;
            let get = |c: &str| w.values.get(c).and_then(|v| v.as_i64()).unwrap_or(0);
            Some((idx, get("step_type"), get("status")))
        })
        .collect()
}

pub(super) fn idx_list(written: &[i64]) -> String {
    if written.is_empty() {
        "-".to_string()
    } else {
        written
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The `steps` row a write upserts, as a reader would see it.
pub(super) fn step_row(w: &RowWrite, idx_offset: i64) -> Option<StepRow> {
    if w.table != "steps" || w.op != Op::Upsert {
        return None;
    }
    // The key must name a step; the row is the library's reading of it.
    w.key.get("idx")?.as_i64()?;
    let mut row = agy_corpus::db::step_row(&w.key, &w.values);
    row.idx += idx_offset;
    Some(row)
}

impl Run<'_> {
    /// Create the root database, or open the resumed one and continue its idx.
    pub(super) fn open_root_db(&mut self) -> Result<(), Fatal> {
        let dir = &self.conv_dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| Fatal::internal(format!("cannot create {}: {e}", dir.display())))?;
        let path = &self.root_path;
        if self.target != Target::Existing {
            if let Some(keep) = self.knobs.keep_conversations {
                super::conversation::prune(dir, keep, path);
            }
        }
        match self.target {
            Target::New => {
                self.conn = Some(create_db(path)?);
                return Ok(());
            }
            Target::Missing => {
                let conn = create_db(path)?;
                let rows = self.conversation_rows();
                if !rows.writes.is_empty() {
                    apply_commit(&conn, usize::MAX, &rows, &self.opts)
                        .map_err(|e| Fatal::internal(e.to_string()))?;
                }
                self.conn = Some(conn);
                self.continue_idx(None);
                return Ok(());
            }
            Target::Existing => {}
        }
        let conn = Connection::open(path)
            .map_err(|e| Fatal::internal(format!("cannot open {}: {e}", path.display())))?;
        set_wal(&conn, path)?;
        let max: Option<i64> = conn
            .query_row("SELECT MAX(idx) FROM steps", [], |r| r.get(0))
            .map_err(|e| Fatal::internal(format!("{}: {e}", path.display())))?;
        self.conn = Some(conn);
        self.continue_idx(max);
        Ok(())
    }

    /// Number this run's steps from after `max` (the last idx the
    /// conversation has; `None`: from 0, as in a new conversation).
    fn continue_idx(&mut self, max: Option<i64>) {
        let root_rec = &self.rec.header.root_conversation;
        // This turn's first step: a later stdin turn continues after the
        // earlier ones, and a replayed turn after its own first replay.
        let first_recorded = self
            .rec
            .effective_commits(&self.opts)
            .map(|(_, c)| c)
            .filter(|c| !c.pre && &c.db == root_rec)
            .flat_map(|c| step_writes(c, 0))
            .map(|w| w.0)
            .min();
        if let Some(first) = first_recorded {
            self.opts.idx_offset = max.map_or(0, |m| m + 1) - first;
        }
    }

    /// What a new conversation has of the recording's `pre` commits: the
    /// conversation's own rows (tables not keyed by step: trajectory_meta,
    /// trajectory_metadata_blob), as one commit. The earlier turns' steps
    /// are not among them.
    fn conversation_rows(&self) -> Commit {
        let root = &self.rec.header.root_conversation;
        let writes = self
            .rec
            .commits
            .iter()
            .filter(|c| c.pre && &c.db == root)
            .flat_map(|c| &c.writes)
            .filter(|w| !schema::IDX_TABLES.contains(&w.table.as_str()))
            .cloned()
            .collect();
        Commit {
            t_ms: 0,
            db: root.clone(),
            pre: true,
            gate: None,
            mcp_call: None,
            turn: 0,
            writes,
        }
    }

    /// Read the conversation's earlier turns (what its database holds
    /// before this run's first step) into the emitter, once.
    pub(super) fn read_earlier(&mut self) -> Result<(), Fatal> {
        if self.earlier_read {
            return Ok(());
        }
        let Some(conn) = self.conn.as_ref() else {
            return Ok(());
        };
        let path = &self.root_path;
        let rows = agy_format::database::read_all(conn, path)
            .map_err(|e| Fatal::internal(format!("{}: {e}", path.display())))?;
        let steps: Vec<steps::Step> = rows.iter().map(steps::decode).collect();
        self.emitter.set_earlier(Earlier::from_steps(&steps));
        self.earlier_read = true;
        Ok(())
    }
}
