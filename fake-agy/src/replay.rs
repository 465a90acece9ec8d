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

use crate::cli::{self, OutputFormat, PrintArgs};
use agy_bridge::recording::{self, apply_commit, ApplyOptions, Commit, Op, Recording};
use agy_bridge::{events, poller, schema, steps};
use rusqlite::Connection;
use std::collections::{BTreeSet, HashMap};
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
    crash_mode: CrashMode,
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
            None | Some("exit") => CrashMode::Exit(3),
            Some("sigkill") | Some("SIGKILL") => CrashMode::SigKill,
            Some(other) => match other.strip_prefix("exit:").map(|c| c.trim().parse::<i32>()) {
                Some(Ok(code)) => CrashMode::Exit(code),
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

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
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

/// Text of the planner responses among `idxs`, as the bridge would decode it.
fn partial_text(conn: &Connection, path: &Path, idxs: &BTreeSet<i64>) -> String {
    let rows = poller::read_all(conn, path).unwrap_or_default();
    let decoded: Vec<steps::Step> = rows
        .iter()
        .filter(|r| idxs.contains(&r.idx))
        .map(steps::decode)
        .collect();
    events::Transcript::from_events(events::decode_all(&decoded)).text()
}

fn result_line(result: &str, conversation_id: &str, is_error: bool) -> String {
    format!(
        "{{\"type\":\"result\",\"result\":{},\"conversation_id\":{},\"is_error\":{is_error}}}",
        json_str(result),
        json_str(conversation_id)
    )
}

/// State of a run in progress.
struct Run<'a> {
    args: &'a PrintArgs,
    rec: &'a Recording,
    root_id: String,
    root_path: PathBuf,
    conn: Option<Connection>,
    writers: HashMap<String, Writer>,
    /// Root step idx written by this run (not `pre`), for partial output.
    run_idx: BTreeSet<i64>,
}

impl Run<'_> {
    fn close_writers(&mut self) {
        for w in self.writers.values_mut() {
            w.wait();
        }
    }

    /// agy's print timeout: exit 0 with the partial answer.
    fn print_timeout(mut self) -> i32 {
        self.close_writers();
        let partial = match &self.conn {
            Some(conn) => partial_text(conn, &self.root_path, &self.run_idx),
            None => String::new(),
        };
        err_raw(&format!(
            "print timeout after {} with turn in progress; returning partial output\n",
            cli::go_duration_string(self.args.print_timeout)
        ));
        match self.args.output_format {
            OutputFormat::Text => {
                if !partial.is_empty() {
                    out_line(&partial);
                }
            }
            OutputFormat::Json | OutputFormat::StreamJson => {
                out_line(&result_line(&partial, &self.root_id, false))
            }
        }
        0
    }

    /// The run finished: print what the recording says.
    fn finish(mut self) -> i32 {
        self.close_writers();
        let h = &self.rec.header;
        match self.args.output_format {
            OutputFormat::Text => out_raw(&h.stdout),
            OutputFormat::Json | OutputFormat::StreamJson => out_line(&result_line(
                self.rec.stdout_text(),
                &self.root_id,
                h.exit_code != 0,
            )),
        }
        err_raw(&h.stderr);
        h.exit_code
    }
}

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

/// A print-mode run (`fake-agy -p ...`); returns the exit code.
pub fn run_print(args: &PrintArgs, start: Instant) -> Result<i32, Fatal> {
    let knobs = Knobs::from_env()?;
    let (rec, rec_path) = load_recording()?;
    if knobs.grandchild {
        spawn_grandchild(knobs.grandchild_pidfile.as_deref())?;
    }
    let deadline = start + args.print_timeout;
    let conv_dir = conversations_dir()?;

    let resume = match &args.conversation {
        Some(id) => Some(id.clone()),
        None if args.continue_latest => latest_conversation(&conv_dir),
        None => None,
    };
    if let Some(id) = &resume {
        let path = conv_dir.join(format!("{id}.db"));
        if !path.is_file() {
            return Err(Fatal::new(
                1,
                format!("conversation {id} not found (no {})", path.display()),
            ));
        }
    }
    let fresh = || uuid::Uuid::new_v4().to_string();
    let root_rec = rec.header.root_conversation.clone();
    let root_id = resume.clone().unwrap_or_else(fresh);
    let mut id_map = vec![(root_rec.clone(), root_id.clone())];
    for c in rec.conversations().into_iter().filter(|c| *c != root_rec) {
        id_map.push((c, fresh()));
    }
    let mut opts = ApplyOptions {
        skip_permissions: args.skip_permissions,
        skip_pre: resume.is_some(),
        idx_offset: 0,
        id_map,
    };
    let root_path = conv_dir.join(format!("{root_id}.db"));
    let mut run = Run {
        args,
        rec: &rec,
        root_id: root_id.clone(),
        root_path: root_path.clone(),
        conn: None,
        writers: HashMap::new(),
        run_idx: BTreeSet::new(),
    };

    if knobs.no_db {
        let t0 = Instant::now();
        let mut end = t0;
        let mut gated = false;
        for (_, c) in rec.effective_commits(&opts) {
            end = end.max(t0 + knobs.scaled(c.t_ms));
            gated |= c.gate.is_some();
        }
        if gated || end > deadline {
            sleep_until(deadline);
            return Ok(run.print_timeout());
        }
        sleep_until(end);
        return Ok(run.finish());
    }

    if let Some(delay) = knobs.db_delay {
        std::thread::sleep(delay);
    }
    let t0 = Instant::now();
    std::fs::create_dir_all(&conv_dir)
        .map_err(|e| Fatal::internal(format!("cannot create {}: {e}", conv_dir.display())))?;
    let conn = if resume.is_some() {
        let conn = Connection::open(&root_path)
            .map_err(|e| Fatal::internal(format!("cannot open {}: {e}", root_path.display())))?;
        set_wal(&conn, &root_path)?;
        let max: Option<i64> = conn
            .query_row("SELECT MAX(idx) FROM steps", [], |r| r.get(0))
            .map_err(|e| Fatal::internal(format!("{}: {e}", root_path.display())))?;
        let first_recorded = rec
            .commits
            .iter()
            .filter(|c| !c.pre && c.db == root_rec)
            .flat_map(|c| step_writes(c, 0))
            .map(|w| w.0)
            .min();
        if let Some(first) = first_recorded {
            opts.idx_offset = max.map_or(0, |m| m + 1) - first;
        }
        conn
    } else {
        create_db(&root_path)?
    };
    run.conn = Some(conn);
    if args.output_format == OutputFormat::StreamJson {
        out_line(&format!(
            "{{\"type\":\"init\",\"conversation_id\":{}}}",
            json_str(&root_id)
        ));
    }

    let mut log: Option<File> = match &knobs.commit_log {
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
    let fresh_id = |recorded: &str| -> String {
        opts.id_map
            .iter()
            .find(|(from, _)| from == recorded)
            .map(|(_, to)| to.clone())
            .unwrap_or_else(|| recorded.to_string())
    };
    let commits: Vec<(usize, &Commit)> = rec.effective_commits(&opts).collect();
    let mut last_for_db: HashMap<&str, usize> = HashMap::new();
    for (pos, (_, c)) in commits.iter().enumerate() {
        last_for_db.insert(c.db.as_str(), pos);
    }

    for (pos, (index, commit)) in commits.iter().enumerate() {
        let n = pos + 1;
        let target = if commit.pre {
            t0
        } else {
            t0 + knobs.scaled(commit.t_ms)
        };
        if target > deadline {
            sleep_until(deadline);
            return Ok(run.print_timeout());
        }
        sleep_until(target);

        let is_root = commit.db == root_rec;
        let (ns, written): (u128, Vec<(i64, i64, i64)>) = if is_root {
            let conn = run
                .conn
                .as_ref()
                .ok_or_else(|| Fatal::internal("no database"))?;
            apply_commit(conn, *index, commit, &opts)
                .map_err(|e| Fatal::internal(e.to_string()))?;
            (now_ns(), step_writes(commit, opts.idx_offset))
        } else {
            if !run.writers.contains_key(&commit.db) {
                let id = fresh_id(&commit.db);
                let path = conv_dir.join(format!("{id}.db"));
                let w = Writer::spawn(&rec_path, &path, &id, &opts.id_map)?;
                run.writers.insert(commit.db.clone(), w);
            }
            let w = run
                .writers
                .get_mut(&commit.db)
                .ok_or_else(|| Fatal::internal("writer vanished"))?;
            let (ns, idx) = w.apply(*index)?;
            (ns, idx.into_iter().map(|i| (i, 0, 0)).collect())
        };

        if let Some(f) = log.as_mut() {
            let idx: Vec<i64> = written.iter().map(|w| w.0).collect();
            let _ = writeln!(f, "{n} {ns} {} {}", fresh_id(&commit.db), idx_list(&idx))
                .and_then(|_| f.flush());
        }
        if is_root && !commit.pre {
            for (idx, step_type, status) in &written {
                run.run_idx.insert(*idx);
                if args.output_format == OutputFormat::StreamJson {
                    out_line(&format!(
                        "{{\"type\":\"step_update\",\"idx\":{idx},\"step_type\":{step_type},\"status\":{status}}}"
                    ));
                }
            }
        }
        if !is_root && last_for_db.get(commit.db.as_str()) == Some(&pos) {
            if let Some(w) = run.writers.get_mut(&commit.db) {
                w.close();
            }
        }
        if knobs.crash_at == Some(n) {
            crash(knobs.crash_mode, n);
        }
        if commit.gate.is_some() {
            // agy waits for a permission nobody can give in print mode.
            sleep_until(deadline);
            return Ok(run.print_timeout());
        }
    }

    run.close_writers();
    if knobs.hang {
        sleep_forever();
    }
    Ok(run.finish())
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
