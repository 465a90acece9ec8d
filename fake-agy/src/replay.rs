//! Replaying a recording as agy would run it: the conversation database, the
//! commit schedule, the subagent writer processes, the output and the faults.
//!
//! One scheduler (the main process) walks the recording's commits in order and
//! sleeps until each one's scaled offset. Commits to the root conversation are
//! applied on the main process's own connection; commits to any other
//! conversation (a subagent) are handed, one at a time, to a child fake-agy
//! process that owns that conversation's database, and the scheduler waits
//! for its acknowledgement. So commits land in exactly the recorded order
//! across databases, and the commit log and the crash knob count them the
//! same way whichever process wrote them.
//!
//! Which conversation a run writes is decided here too, as agy decides it:
//! a new one, an existing one resumed (its earlier turns count in the
//! result), or, for a `--conversation` id agy does not have, a new one after
//! a warning.

use crate::cli::{self, OutputFormat, PrintArgs};
use crate::ending::{self, Context, Ending, PermissionPolicy};
use crate::stream::{self, Earlier, Emitter, TextMode};
use agy_corpus::recording::{
    self, apply_commit, ApplyOptions, Commit, Gate, Op, Recording, Write as RowWrite,
};
use agy_format::hooks::Decision;
use agy_format::steps::{self, StepRow};
use agy_format::stream_json::{DeniedAction, Line};
use agy_format::{schema, wire};
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A failure that ends the run: `message` goes to stderr, `code` is the
/// exit status.
#[derive(Debug)]
pub struct Fatal {
    pub code: i32,
    pub message: String,
}

impl Fatal {
    fn new(code: i32, message: impl Into<String>) -> Fatal {
        Fatal {
            code,
            message: message.into(),
        }
    }

    /// An internal error (database, filesystem): exit 1, as agy does when a
    /// turn fails.
    fn internal(message: impl Into<String>) -> Fatal {
        Fatal::new(1, message)
    }
}

/// Exit code for configuration errors (no such recording, bad knob value).
pub const CONFIG_EXIT: i32 = 2;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_flag(name: &str) -> bool {
    env(name)
        .map(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "no"))
        .unwrap_or(false)
}

fn env_parse<T: std::str::FromStr>(name: &str) -> Result<Option<T>, Fatal> {
    match env(name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            Fatal::new(
                CONFIG_EXIT,
                format!("{name}={v:?} is not a valid value (see fake-agy --help)"),
            )
        }),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CrashMode {
    Exit(i32),
    SigKill,
}

/// The environment knobs of a print run (see `fake-agy --help`).
#[derive(Debug)]
struct Knobs {
    speed: f64,
    db_delay: Option<Duration>,
    no_db: bool,
    crash_at: Option<usize>,
    /// `FAKE_AGY_CRASH_MODE`, when set.
    crash_mode: Option<CrashMode>,
    grandchild: bool,
    grandchild_pidfile: Option<PathBuf>,
    commit_log: Option<PathBuf>,
    hang: bool,
}

impl Knobs {
    fn from_env() -> Result<Knobs, Fatal> {
        let speed = env_parse::<f64>("FAKE_AGY_SPEED")?.unwrap_or(1.0);
        if !(speed.is_finite() && speed > 0.0) {
            return Err(Fatal::new(
                CONFIG_EXIT,
                format!("FAKE_AGY_SPEED must be a positive number, not {speed}"),
            ));
        }
        let crash_mode = match env("FAKE_AGY_CRASH_MODE").as_deref().map(str::trim) {
            None => None,
            Some("exit") => Some(CrashMode::Exit(3)),
            Some("sigkill") | Some("SIGKILL") => Some(CrashMode::SigKill),
            Some(other) => match other.strip_prefix("exit:").map(|c| c.trim().parse::<i32>()) {
                Some(Ok(code)) => Some(CrashMode::Exit(code)),
                _ => {
                    return Err(Fatal::new(
                        CONFIG_EXIT,
                        format!("FAKE_AGY_CRASH_MODE={other:?}: expected exit:CODE or sigkill"),
                    ))
                }
            },
        };
        Ok(Knobs {
            speed,
            db_delay: env_parse::<u64>("FAKE_AGY_DB_DELAY_MS")?.map(Duration::from_millis),
            no_db: env_flag("FAKE_AGY_NO_DB"),
            crash_at: env_parse::<usize>("FAKE_AGY_CRASH_AT_COMMIT")?,
            crash_mode,
            grandchild: env_flag("FAKE_AGY_GRANDCHILD"),
            grandchild_pidfile: env("FAKE_AGY_GRANDCHILD_PIDFILE").map(PathBuf::from),
            commit_log: env("FAKE_AGY_COMMIT_LOG").map(PathBuf::from),
            hang: env_flag("FAKE_AGY_HANG"),
        })
    }

    fn scaled(&self, t_ms: u64) -> Duration {
        Duration::from_secs_f64(t_ms as f64 / 1000.0 / self.speed)
    }

    /// How `FAKE_AGY_CRASH_AT_COMMIT` crashes (default: exit 3).
    fn crash_mode(&self) -> CrashMode {
        self.crash_mode.unwrap_or(CrashMode::Exit(3))
    }
}

/// Load the recording `FAKE_AGY_RECORDING` names (default `hello`).
pub fn load_recording() -> Result<(Recording, PathBuf), Fatal> {
    let name = env("FAKE_AGY_RECORDING").unwrap_or_else(|| "hello".to_string());
    let dir = env("FAKE_AGY_RECORDINGS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(recording::bundled_dir);
    let path = recording::resolve(&name, &dir).map_err(|e| {
        Fatal::new(
            CONFIG_EXIT,
            format!(
                "{e}; set FAKE_AGY_RECORDING to a recording file or to a name in \
                 FAKE_AGY_RECORDINGS_DIR (default {})",
                recording::bundled_dir().display()
            ),
        )
    })?;
    let rec = Recording::load(&path).map_err(|e| Fatal::new(CONFIG_EXIT, e.to_string()))?;
    let path = path.canonicalize().unwrap_or(path);
    Ok((rec, path))
}

/// Where conversation databases go: `AGY_CONVERSATIONS_DIR`, else agy's own
/// `$HOME/.gemini/antigravity-cli/conversations`.
pub fn conversations_dir() -> Result<PathBuf, Fatal> {
    if let Some(dir) = env("AGY_CONVERSATIONS_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = env("HOME").ok_or_else(|| {
        Fatal::internal("HOME is not set (or set AGY_CONVERSATIONS_DIR)".to_string())
    })?;
    Ok(Path::new(&home).join(".gemini/antigravity-cli/conversations"))
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Write one line to stdout and flush it at once (stdout stays the answer
/// channel; a closed stdout is not our problem).
fn out_line(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

fn out_raw(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}

fn err_raw(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(text.as_bytes());
    let _ = e.flush();
}

/// Create a conversation database as agy does: WAL, then the full schema.
fn create_db(path: &Path) -> Result<Connection, Fatal> {
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
    Ok(())
}

/// The `steps` rows a commit upserts: (idx after offset, step_type, status).
fn step_writes(commit: &Commit, idx_offset: i64) -> Vec<(i64, i64, i64)> {
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

fn idx_list(written: &[i64]) -> String {
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

/// A child fake-agy process that owns one subagent database.
struct Writer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    db_id: String,
}

impl Writer {
    fn spawn(
        recording: &Path,
        db_path: &Path,
        db_id: &str,
        id_map: &[(String, String)],
    ) -> Result<Writer, Fatal> {
        let exe = std::env::current_exe()
            .map_err(|e| Fatal::internal(format!("cannot find my own executable: {e}")))?;
        let map = serde_json::to_string(id_map).unwrap_or_else(|_| "[]".into());
        let mut child = Command::new(exe)
            .arg(cli::SUBAGENT_WRITER)
            .arg(recording)
            .arg(db_path)
            .arg(map)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Fatal::internal(format!("cannot start the subagent writer: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .map(BufReader::new)
            .ok_or_else(|| Fatal::internal("subagent writer has no stdout"))?;
        Ok(Writer {
            child,
            stdin,
            stdout,
            db_id: db_id.to_string(),
        })
    }

    /// Have the child apply commit `index`; returns its commit time and the
    /// step idx it wrote.
    fn apply(&mut self, index: usize) -> Result<(u128, Vec<i64>), Fatal> {
        let lost =
            |what: String| Fatal::internal(format!("subagent writer for {}: {what}", self.db_id));
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| lost("already closed".into()))?;
        writeln!(stdin, "{index}")
            .and_then(|_| stdin.flush())
            .map_err(|e| lost(format!("cannot send commit {index}: {e}")))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| lost(format!("cannot read its answer: {e}")))?;
        let mut parts = line.split_whitespace();
        match parts.next() {
            Some("ok") => {
                let ns = parts
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(now_ns);
                let idx = parts
                    .next()
                    .filter(|s| *s != "-")
                    .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
                    .unwrap_or_default();
                Ok((ns, idx))
            }
            Some("err") => Err(lost(line.trim_start_matches("err").trim().to_string())),
            _ => Err(lost(format!("exited or answered {line:?}"))),
        }
    }

    /// Close its command pipe: it has no more commits and exits.
    fn close(&mut self) {
        self.stdin.take();
    }

    fn wait(&mut self) {
        self.close();
        let _ = self.child.wait();
    }
}

/// The internal entry point of a subagent writer process: args are the
/// recording path, the database path and the id map (JSON pairs). It reads
/// commit indices from the pipe its parent holds (never the user's stdin)
/// and answers `ok <unix-ns> <idx,...|->` after each commit.
pub fn run_subagent_writer(args: &[String]) -> Result<i32, Fatal> {
    let [rec_path, db_path, map] = args else {
        return Err(Fatal::new(
            CONFIG_EXIT,
            "internal subagent writer: bad arguments",
        ));
    };
    let rec = Recording::load(Path::new(rec_path)).map_err(|e| Fatal::internal(e.to_string()))?;
    let id_map: Vec<(String, String)> =
        serde_json::from_str(map).map_err(|e| Fatal::internal(format!("bad id map: {e}")))?;
    let opts = ApplyOptions {
        id_map,
        ..ApplyOptions::default()
    };
    let db_path = Path::new(db_path);
    let conn = create_db(db_path)?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Fatal::internal(e.to_string()))?;
        let reply = match line.trim().parse::<usize>() {
            Ok(i) if i < rec.commits.len() => {
                match apply_commit(&conn, i, &rec.commits[i], &opts) {
                    Ok(()) => {
                        let ns = now_ns();
                        let idx: Vec<i64> = step_writes(&rec.commits[i], 0)
                            .into_iter()
                            .map(|w| w.0)
                            .collect();
                        format!("ok {ns} {}", idx_list(&idx))
                    }
                    Err(e) => format!("err {e}"),
                }
            }
            _ => format!("err no commit {line:?}"),
        };
        let failed = reply.starts_with("err");
        writeln!(out, "{reply}")
            .and_then(|_| out.flush())
            .map_err(|e| Fatal::internal(e.to_string()))?;
        if failed {
            return Ok(1);
        }
    }
    drop(conn);
    Ok(0)
}

/// Leave a `sleep 600` in our process group that outlives us: `sh` starts it
/// in the background and exits, so it is reparented but keeps our pgid.
fn spawn_grandchild(pidfile: Option<&Path>) -> Result<(), Fatal> {
    let out = Command::new("sh")
        .arg("-c")
        .arg("sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Fatal::internal(format!("FAKE_AGY_GRANDCHILD: cannot run sh: {e}")))?;
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if let Some(p) = pidfile {
        std::fs::write(p, format!("{pid}\n")).map_err(|e| {
            Fatal::internal(format!("FAKE_AGY_GRANDCHILD_PIDFILE {}: {e}", p.display()))
        })?;
    }
    Ok(())
}

/// The most recently written conversation, for `-c/--continue`.
fn latest_conversation(dir: &Path) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".db")?.to_string();
            let mtime = e.metadata().ok()?.modified().ok()?;
            Some((mtime, id))
        })
        .max()
        .map(|(_, id)| id)
}

/// The `steps` row a write upserts, as a reader would see it.
fn step_row(w: &RowWrite, idx_offset: i64) -> Option<StepRow> {
    if w.table != "steps" || w.op != Op::Upsert {
        return None;
    }
    // The key must name a step; the row is the library's reading of it.
    w.key.get("idx")?.as_i64()?;
    let mut row = agy_corpus::db::step_row(&w.key, &w.values);
    row.idx += idx_offset;
    Some(row)
}

/// The permission kind a `permissions` column asks for
/// (`{2: {1: {1 kind, 2 value}}}`), e.g. `command`.
fn permission_kind(blob: &[u8]) -> Option<String> {
    let len_field = |buf: &[u8], n: u32| -> Option<Vec<u8>> {
        wire::fields(buf)
            .map_while(Result::ok)
            .find_map(|f| match f.value {
                wire::Value::Len(b) if f.number == n => Some(b.to_vec()),
                _ => None,
            })
    };
    let request = len_field(blob, 2)?;
    let item = len_field(&request, 1)?;
    let kind = len_field(&item, 1)?;
    Some(String::from_utf8_lossy(&kind).into_owned())
}

/// agy's display name of a tool: `run_command` -> `RunCommand`.
fn display_name(tool: &str) -> String {
    tool.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// The actions a permission-gated commit asks for, as agy lists them
/// when it denies them.
fn denied_actions(commit: &Commit) -> Vec<DeniedAction> {
    commit
        .writes
        .iter()
        .filter_map(|w| step_row(w, 0))
        .filter_map(|row| {
            let kind = row.permissions.as_deref().and_then(permission_kind);
            let step = steps::decode(&row);
            let tool = stream::tool_name(&step);
            (kind.is_some() || step.tool_call().is_some()).then(|| DeniedAction {
                action: kind.unwrap_or_else(|| "command".into()),
                display_name: display_name(&tool),
            })
        })
        .collect()
}

/// Which conversation a run writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A new conversation: no `--conversation`, or `-c` with none to
    /// continue.
    New,
    /// An existing conversation, resumed: its earlier turns are in its
    /// database, so the recording's `pre` commits are skipped.
    Existing,
    /// `--conversation` named a conversation agy does not have: agy warns
    /// and runs the turn in a new conversation, without the earlier turns
    /// (docs/agy-format.md, "Resume"), so `pre` commits are skipped too.
    Missing,
}

/// The conversation a stdin session's turns write, decided once at its
/// start (its `init` names it before any turn runs).
#[derive(Debug, Clone)]
pub struct Conversation {
    pub target: Target,
    pub id: String,
}

impl Conversation {
    /// Decide it as agy does for the command line (`--conversation`, `-c`,
    /// else a new one).
    pub fn for_args(args: &PrintArgs) -> Result<Conversation, Fatal> {
        let (target, id) = resolve_conversation(args, &conversations_dir()?);
        Ok(Conversation {
            target,
            id: id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        })
    }

    /// The same conversation for the session's next turn: it exists now.
    pub fn next_turn(&self) -> Conversation {
        Conversation {
            target: Target::Existing,
            id: self.id.clone(),
        }
    }
}

/// Which turn a run replays and where.
#[derive(Debug, Clone, Default)]
pub struct TurnPlan {
    /// The recording's turn to replay (`-p` replays the first).
    pub turn: u32,
    /// The stdin session's conversation, whose `init` it printed; `None`:
    /// decide it from the command line and print `init` here.
    pub conversation: Option<Conversation>,
}

/// The conversation a run writes and its id (`None`: a fresh one).
fn resolve_conversation(args: &PrintArgs, conv_dir: &Path) -> (Target, Option<String>) {
    let resume = match &args.conversation {
        Some(id) => Some(id.clone()),
        None if args.continue_latest => latest_conversation(conv_dir),
        None => None,
    };
    // `FAKE_AGY_FORGET_CONVERSATIONS=1`: agy's own record of every earlier
    // conversation is gone (expired, another machine), whatever files the
    // directory still holds.
    let forgot = env_flag("FAKE_AGY_FORGET_CONVERSATIONS");
    match resume {
        Some(id) if !forgot && conv_dir.join(format!("{id}.db")).is_file() => {
            (Target::Existing, Some(id))
        }
        Some(id) => {
            // agy 1.1.9, 1.2.7 and 1.3.1 say exactly this, and go on.
            err_raw(&format!("warning: conversation \"{id}\" not found\n"));
            (Target::Missing, None)
        }
        None => (Target::New, None),
    }
}

/// State of a run in progress.
struct Run<'a> {
    args: &'a PrintArgs,
    rec: &'a Recording,
    rec_path: &'a Path,
    knobs: &'a Knobs,
    conv_dir: PathBuf,
    root_id: String,
    root_path: PathBuf,
    target: Target,
    /// Whether the earlier turns have been read into the emitter.
    earlier_read: bool,
    opts: ApplyOptions,
    conn: Option<Connection>,
    writers: HashMap<String, Writer>,
    emitter: Emitter,
    policy: PermissionPolicy,
    commit_log: Option<File>,
    /// MCP calls waiting for their server's answer.
    mcp: crate::mcp::InFlight,
    /// The hooks loaded from the `--add-dir` dirs.
    hooks: crate::hooks::Hooks,
    /// Recorded idx of the root tool steps already written (and gated).
    tools_seen: HashSet<i64>,
    /// The highest recorded idx of a root step this run wrote.
    max_idx: i64,
}

/// A root tool step the replay is about to run: where its PreToolUse hooks
/// are consulted.
struct NewTool {
    /// The step as first written (recorded idx).
    step: steps::Step,
    name: String,
    args: serde_json::Value,
    /// Its first write already holds its result (hooks run before it).
    finished: bool,
}

impl<'a> Run<'a> {
    /// Decide the conversation ids (a resumed one or fresh UUIDs).
    fn new(
        args: &'a PrintArgs,
        rec: &'a Recording,
        rec_path: &'a Path,
        knobs: &'a Knobs,
        plan: &TurnPlan,
    ) -> Result<Run<'a>, Fatal> {
        let conv_dir = conversations_dir()?;
        let (target, resume) = match &plan.conversation {
            Some(c) => (c.target, Some(c.id.clone())),
            None => resolve_conversation(args, &conv_dir),
        };
        let fresh = || uuid::Uuid::new_v4().to_string();
        let root_rec = rec.header.root_conversation.clone();
        let root_id = resume.clone().unwrap_or_else(fresh);
        let mut id_map = vec![(root_rec.clone(), root_id.clone())];
        for c in rec.conversations().into_iter().filter(|c| *c != root_rec) {
            id_map.push((c, fresh()));
        }
        let version = agy_bridge::run::agy_version::parse_version(&rec.header.agy_version)
            .unwrap_or(NEWEST_KNOWN);
        let commit_log = match &knobs.commit_log {
            Some(p) => Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| {
                        Fatal::internal(format!("FAKE_AGY_COMMIT_LOG {}: {e}", p.display()))
                    })?,
            ),
            None => None,
        };
        Ok(Run {
            args,
            rec,
            rec_path,
            knobs,
            root_path: conv_dir.join(format!("{root_id}.db")),
            conv_dir,
            emitter: Emitter::new(&root_id, TextMode::for_version(version)),
            root_id,
            target,
            earlier_read: false,
            opts: ApplyOptions {
                skip_permissions: args.skip_permissions,
                skip_pre: target != Target::New,
                idx_offset: 0,
                id_map,
                turn: Some(plan.turn),
            },
            conn: None,
            writers: HashMap::new(),
            policy: PermissionPolicy::for_version(version),
            commit_log,
            mcp: crate::mcp::InFlight::default(),
            hooks: crate::hooks::Hooks::load(&args.add_dirs),
            tools_seen: HashSet::new(),
            max_idx: -1,
        })
    }

    fn close_writers(&mut self) {
        for w in self.writers.values_mut() {
            w.wait();
        }
    }

    fn fresh_id(&self, recorded: &str) -> String {
        self.opts
            .id_map
            .iter()
            .find(|(from, _)| from == recorded)
            .map(|(_, to)| to.clone())
            .unwrap_or_else(|| recorded.to_string())
    }

    /// Create the root database, or open the resumed one and continue its idx.
    fn open_root_db(&mut self) -> Result<(), Fatal> {
        let dir = &self.conv_dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| Fatal::internal(format!("cannot create {}: {e}", dir.display())))?;
        let path = &self.root_path;
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
    fn read_earlier(&mut self) -> Result<(), Fatal> {
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

    /// The `init` line, once the conversation exists.
    fn print_init(&self) {
        print_init(self.args, self.rec, &self.root_id);
    }

    /// `FAKE_AGY_NO_DB`: no database; wait as long as the run would take.
    fn wait_without_db(&self, deadline: Instant) -> Ending {
        let t0 = Instant::now();
        let mut end = t0;
        let mut gated = false;
        for (_, c) in self.rec.effective_commits(&self.opts) {
            end = end.max(t0 + self.knobs.scaled(c.t_ms));
            gated |= c.gate.is_some();
        }
        if gated || end > deadline {
            sleep_until(deadline);
            return Ending::PrintTimeout;
        }
        sleep_until(end);
        Ending::Finished
    }

    /// Apply one commit (the root's here, a subagent's in its writer):
    /// its commit time and the step rows it wrote.
    fn apply(&mut self, index: usize, commit: &Commit) -> Result<(u128, Vec<i64>), Fatal> {
        if commit.db == self.rec.header.root_conversation {
            let conn = self
                .conn
                .as_ref()
                .ok_or_else(|| Fatal::internal("no database"))?;
            let moved =
                crate::fault::is("text-field-moved").then(|| crate::fault::move_text_field(commit));
            apply_commit(conn, index, moved.as_ref().unwrap_or(commit), &self.opts)
                .map_err(|e| Fatal::internal(e.to_string()))?;
            for (recorded, _, _) in step_writes(commit, 0) {
                self.max_idx = self.max_idx.max(recorded);
            }
            let idx = step_writes(commit, self.opts.idx_offset);
            return Ok((now_ns(), idx.into_iter().map(|w| w.0).collect()));
        }
        if !self.writers.contains_key(&commit.db) {
            let id = self.fresh_id(&commit.db);
            let path = self.conv_dir.join(format!("{id}.db"));
            let w = Writer::spawn(self.rec_path, &path, &id, &self.opts.id_map)?;
            self.writers.insert(commit.db.clone(), w);
        }
        let w = self
            .writers
            .get_mut(&commit.db)
            .ok_or_else(|| Fatal::internal("writer vanished"))?;
        w.apply(index)
    }

    /// Report a root commit of this run as agy's `step_update`s.
    fn emit(&mut self, commit: &Commit) {
        for w in &commit.writes {
            let Some(row) = step_row(w, self.opts.idx_offset) else {
                continue;
            };
            let step = steps::decode(&row);
            let stream_error = w.stream_error.as_deref();
            if let Some(update) = self.emitter.observe(&step, commit.t_ms, stream_error) {
                if self.args.output_format == OutputFormat::StreamJson {
                    out_line(&Line::StepUpdate(update).to_json());
                }
            }
        }
        self.emitter.commit_done(commit.t_ms);
    }

    /// Write steps fake-agy makes itself (root database, recorded idx): the
    /// type-38 steps of the recording's MCP calls as agy would, a denied
    /// tool and the answer after it; one commit each, with their step
    /// updates.
    fn write_steps(&mut self, t_ms: u64, steps: Vec<steps::Step>) -> Result<(), Fatal> {
        for step in steps {
            let commit = Commit {
                t_ms,
                db: self.rec.header.root_conversation.clone(),
                pre: false,
                gate: None,
                mcp_call: None,
                turn: 0,
                writes: vec![agy_corpus::db::step_write(&step)],
            };
            self.apply(usize::MAX, &commit)?;
            self.emit(&commit);
        }
        Ok(())
    }

    /// Wait for the MCP calls in flight and write their finished steps;
    /// returns how long the wait took (it shifts the rest of the schedule).
    fn finish_mcp(&mut self, t_ms: u64) -> Result<Duration, Fatal> {
        if self.mcp.is_empty() {
            return Ok(Duration::ZERO);
        }
        let waited = Instant::now();
        let done = self.mcp.finish();
        self.write_steps(t_ms, done)?;
        Ok(waited.elapsed())
    }

    /// The root tool steps `commit` writes for the first time.
    fn new_tools(&mut self, commit: &Commit) -> Vec<NewTool> {
        let mut found = Vec::new();
        for w in &commit.writes {
            let Some(row) = step_row(w, 0) else {
                continue;
            };
            let step = steps::decode(&row);
            if stream::step_kind(&step) != "tool" || !self.tools_seen.insert(step.idx) {
                continue;
            }
            let args = step
                .tool_call()
                .and_then(|c| serde_json::from_str(&c.arguments).ok())
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            found.push(NewTool {
                name: stream::tool_name(&step),
                args,
                finished: step.is_finished(),
                step,
            });
        }
        found
    }

    /// Consult the hooks for `tools`; whether one was denied (its denial
    /// is written and the turn is over).
    fn gate_tools<'t>(
        &mut self,
        commit: &Commit,
        tools: impl Iterator<Item = &'t NewTool>,
    ) -> Result<bool, Fatal> {
        for tool in tools {
            if self.gate(commit.t_ms, tool, commit.gate.is_some())? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One tool's gate. Without `--dangerously-skip-permissions` the hooks
    /// are not consulted (real agy's hook allow does not lift print mode's
    /// auto-deny): the recording's gates decide, and a tool in a gated
    /// commit never runs. With it, every matching PreToolUse hook must
    /// allow. Whether the tool was denied.
    fn gate(&mut self, t_ms: u64, tool: &NewTool, gated: bool) -> Result<bool, Fatal> {
        let db_idx = tool.step.idx + self.opts.idx_offset;
        if !self.args.skip_permissions {
            if !gated {
                crate::hooks::log_tool_ran(&tool.name, &tool.args, db_idx);
            }
            return Ok(false);
        }
        let model = self
            .args
            .model
            .clone()
            .or_else(|| self.rec.header.model.clone());
        let payload = crate::hooks::payload(
            &self.root_id,
            model.as_deref().unwrap_or(""),
            db_idx,
            &tool.name,
            tool.args.clone(),
        );
        match self.hooks.pre_tool_use(&payload) {
            Decision::Allow => {
                crate::hooks::log_tool_ran(&tool.name, &tool.args, db_idx);
                Ok(false)
            }
            Decision::Deny { reason } => {
                self.deny(t_ms, tool, &reason)?;
                Ok(true)
            }
        }
    }

    /// Write a denied tool as agy does (the step in ERROR with
    /// `tool call denied by pre-tool hook: <reason>`), then the model's
    /// answer stating the denial, which ends the turn.
    fn deny(&mut self, t_ms: u64, tool: &NewTool, reason: &str) -> Result<(), Fatal> {
        // Calls already in flight finish first.
        self.finish_mcp(t_ms)?;
        let error = Decision::step_error(reason);
        let mut written = Vec::new();
        let mut failed = tool.step.clone();
        if tool.finished {
            // Not written yet: it appears (ACTIVE) first, without a result.
            failed.body = None;
            let mut running = failed.clone();
            running.status = steps::StepStatus::Running;
            written.push(running);
        }
        failed.status = steps::StepStatus::Error;
        failed.errors = vec![steps::ErrorDetails {
            message: error.clone(),
            detail: None,
            stack: None,
        }];
        written.push(failed);
        let idx = self.max_idx.max(tool.step.idx) + 1;
        let text = format!("The {} call was denied: {error}", tool.name);
        written.push(
            steps::Step::new(
                idx,
                steps::StepType::PlannerResponse,
                steps::StepStatus::Done,
            )
            .with_body(steps::Body::Planner(steps::PlannerResponse {
                text,
                ..steps::PlannerResponse::default()
            })),
        );
        self.write_steps(t_ms, written)
    }

    /// An MCP call begins: its RUNNING step, its gate (agy's hooks see it as
    /// `call_mcp_tool {ServerName, ToolName, Arguments}`), then the call.
    /// Whether it was denied.
    fn start_mcp_call(&mut self, t_ms: u64, call: &recording::McpCall) -> Result<bool, Fatal> {
        let step = crate::mcp::step(call, None);
        self.write_steps(t_ms, vec![step.clone()])?;
        self.tools_seen.insert(call.idx);
        let tool = NewTool {
            step,
            name: "call_mcp_tool".into(),
            args: serde_json::json!({
                "ServerName": call.server,
                "ToolName": call.tool,
                "Arguments": call.arguments,
            }),
            finished: false,
        };
        if self.gate(t_ms, &tool, false)? {
            return Ok(true);
        }
        self.mcp.start(call, &self.args.add_dirs);
        Ok(false)
    }

    /// Walk the commits on their schedule until the run ends.
    fn replay(&mut self, mut t0: Instant, deadline: Instant) -> Result<Ending, Fatal> {
        let rec = self.rec;
        let opts = self.opts.clone();
        let commits: Vec<(usize, &Commit)> = rec.effective_commits(&opts).collect();
        let mut last_for_db: HashMap<&str, usize> = HashMap::new();
        for (pos, (_, c)) in commits.iter().enumerate() {
            last_for_db.insert(c.db.as_str(), pos);
        }
        let mut denied: Option<Vec<DeniedAction>> = None;
        for (pos, (index, commit)) in commits.iter().enumerate() {
            match (&denied, commit.gate) {
                // The denied path ends with its last `denied` commit.
                (Some(actions), g) if g != Some(Gate::Denied) => {
                    return Ok(Ending::Denied(actions.clone()))
                }
                (None, Some(Gate::Denied)) => continue,
                _ => {}
            }
            let n = pos + 1;
            // Calls in flight end before any later commit but another call.
            if commit.mcp_call.is_none() {
                t0 += self.finish_mcp(commit.t_ms)?;
            }
            let target = if commit.pre {
                t0
            } else {
                t0 + self.knobs.scaled(commit.t_ms)
            };
            if target > deadline {
                sleep_until(deadline);
                return Ok(Ending::PrintTimeout);
            }
            sleep_until(target);
            let is_root = commit.db == rec.header.root_conversation;
            if is_root && !commit.pre {
                // The state before this run's first step: earlier turns.
                self.read_earlier()?;
            }
            if let Some(call) = &commit.mcp_call {
                if self.start_mcp_call(commit.t_ms, call)? {
                    return Ok(Ending::HookDenied);
                }
            }
            let tools = match is_root && !commit.pre {
                true => self.new_tools(commit),
                false => Vec::new(),
            };
            // A tool whose first write holds its result is gated before it.
            if self.gate_tools(commit, tools.iter().filter(|t| t.finished))? {
                return Ok(Ending::HookDenied);
            }
            let (ns, written) = self.apply(*index, commit)?;
            let id = self.fresh_id(&commit.db);
            if let Some(f) = self.commit_log.as_mut() {
                let _ = writeln!(f, "{n} {ns} {id} {}", idx_list(&written)).and_then(|_| f.flush());
            }
            if is_root && !commit.pre {
                self.emit(commit);
            }
            if !is_root && last_for_db.get(commit.db.as_str()) == Some(&pos) {
                if let Some(w) = self.writers.get_mut(&commit.db) {
                    w.close();
                }
            }
            if self.knobs.crash_at == Some(n) {
                crash(self.knobs.crash_mode(), n);
            }
            // Hooks run once the tool step is written, before its result.
            if self.gate_tools(commit, tools.iter().filter(|t| !t.finished))? {
                return Ok(Ending::HookDenied);
            }
            if commit.gate == Some(Gate::Permission) {
                if self.policy == PermissionPolicy::Stall {
                    // agy waits for a permission nobody can give in print mode.
                    sleep_until(deadline);
                    return Ok(Ending::PrintTimeout);
                }
                denied = Some(denied_actions(commit));
            }
        }
        let last = commits.last().map_or(0, |(_, c)| c.t_ms);
        self.finish_mcp(last)?;
        Ok(denied.map_or(Ending::Finished, Ending::Denied))
    }

    /// Print how the run ended and return the exit code.
    fn end(mut self, ending: Ending) -> i32 {
        self.close_writers();
        let killed = self.rec.header.outcome.as_ref().is_some_and(|o| o.killed);
        let ending = match ending {
            Ending::Finished if killed => {
                if self.knobs.crash_mode == Some(CrashMode::SigKill) {
                    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
                    sleep_forever();
                }
                Ending::Killed
            }
            other => other,
        };
        if self.knobs.hang && matches!(ending, Ending::Finished) {
            sleep_forever();
        }
        // A run that ended before its first step still counts the
        // conversation's earlier turns; a failed read leaves them out.
        let _ = self.read_earlier();
        let ctx = Context {
            rec: self.rec,
            conversation_id: &self.root_id,
            print_timeout: self.args.print_timeout,
            policy: self.policy,
            emitter: &self.emitter,
        };
        let mut conclusion = ending::conclude(ending, &ctx);
        if let (Some(CrashMode::Exit(code)), None) = (self.knobs.crash_mode, &conclusion.result) {
            conclusion.exit_code = code;
        }
        ending::print(conclusion, self.args.output_format)
    }
}

/// agy's `init` line for conversation `id` (stream-json only): the model
/// the command line names, else the recording's.
pub fn print_init(args: &PrintArgs, rec: &Recording, id: &str) {
    if args.output_format != OutputFormat::StreamJson {
        return;
    }
    let model = args.model.clone().or_else(|| rec.header.model.clone());
    let line = Line::Init {
        conversation_id: id.to_string(),
        init: stream::init(model, args.agent.clone(), args.skip_permissions),
    }
    .to_json();
    if crate::fault::is("init-without-id") {
        out_line(&crate::fault::without_conversation_id(&line));
    } else {
        out_line(&line);
    }
}

/// The version assumed for a recording whose `agy_version` does not parse.
const NEWEST_KNOWN: (u32, u32, u32) = (1, 2, 17);

fn crash(mode: CrashMode, n: usize) -> ! {
    match mode {
        CrashMode::Exit(code) => {
            err_raw(&format!(
                "fake-agy: simulated crash after commit {n} (FAKE_AGY_CRASH_AT_COMMIT={n}), exit {code}\n"
            ));
            std::process::exit(code)
        }
        CrashMode::SigKill => {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            sleep_forever()
        }
    }
}

/// agy failed before creating a conversation: only the result, stderr and
/// the exit code.
fn before_conversation(args: &PrintArgs, rec: &Recording) -> i32 {
    let emitter = Emitter::new("", TextMode::AtDone);
    let ctx = Context {
        rec,
        conversation_id: "",
        print_timeout: args.print_timeout,
        policy: PermissionPolicy::Deny,
        emitter: &emitter,
    };
    ending::print(
        ending::conclude(Ending::BeforeConversation, &ctx),
        args.output_format,
    )
}

/// A print-mode run (`fake-agy -p ...`); returns the exit code.
pub fn run_print(args: &PrintArgs, start: Instant) -> Result<i32, Fatal> {
    run_turn(args, start, &TurnPlan::default())
}

/// One turn as `plan` says, its clock and `--print-timeout` from `start`;
/// returns the exit code.
pub fn run_turn(args: &PrintArgs, start: Instant, plan: &TurnPlan) -> Result<i32, Fatal> {
    let knobs = Knobs::from_env()?;
    let (rec, rec_path) = load_recording()?;
    if knobs.grandchild {
        spawn_grandchild(knobs.grandchild_pidfile.as_deref())?;
    }
    if !args.disable_slash_commands {
        if let Some(name) = crate::slash::command_of(&args.prompt) {
            return Ok(crate::slash::run(name, args, &rec));
        }
    }
    if rec
        .header
        .outcome
        .as_ref()
        .is_some_and(|o| o.before_conversation)
    {
        return Ok(before_conversation(args, &rec));
    }
    let deadline = start + args.print_timeout;
    let mut run = Run::new(args, &rec, &rec_path, &knobs, plan)?;
    if knobs.no_db {
        let ending = run.wait_without_db(deadline);
        return Ok(run.end(ending));
    }
    if let Some(delay) = knobs.db_delay {
        std::thread::sleep(delay);
    }
    let t0 = Instant::now();
    run.open_root_db()?;
    if plan.conversation.is_none() {
        run.print_init();
    }
    let ending = run.replay(t0, deadline)?;
    Ok(run.end(ending))
}

/// `FAKE_AGY_BOOT_MS`: agy's start-up before `init` (and before it reads
/// stdin). 0 unless set, because most tests want a fast start; benches set
/// it to [`recording::REALISTIC_BOOT_MS`] to measure what a user
/// waits for.
pub fn boot() -> Result<(), Fatal> {
    if let Some(ms) = env_parse::<u64>("FAKE_AGY_BOOT_MS")? {
        std::thread::sleep(Duration::from_millis(ms));
    }
    Ok(())
}

/// `fake-agy --version`.
pub fn version() -> Result<i32, Fatal> {
    let (rec, _) = load_recording()?;
    out_raw(&rec.header.version_output);
    Ok(0)
}

/// `fake-agy models`.
pub fn models() -> Result<i32, Fatal> {
    if env_flag("FAKE_AGY_MODELS_SIGNED_OUT") {
        err_raw(&format!("{}\n", crate::models::SIGNED_OUT));
        return Ok(1);
    }
    if let Some(format) = env_parse::<u32>("FAKE_AGY_MODELS_FORMAT")? {
        let printed = crate::models::render(format).ok_or_else(|| {
            Fatal::new(
                CONFIG_EXIT,
                format!("FAKE_AGY_MODELS_FORMAT={format}: expected 1, 2 or 3"),
            )
        })?;
        print_models(&printed);
        return Ok(0);
    }
    let (rec, _) = load_recording()?;
    print_models(&crate::models::split_recorded(&rec.header.models_output));
    Ok(0)
}

/// The progress line first, on stderr, as real agy prints it.
fn print_models(printed: &crate::models::Printed) {
    err_raw(&printed.stderr);
    out_raw(&printed.stdout);
}
