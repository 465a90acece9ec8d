//! Replaying a recording as agy would run it: the commit schedule, the
//! output, and how a run ends. The rest is in submodules: which
//! conversation a run writes ([`conversation`]), the conversation databases
//! ([`database`]), the subagent writer processes ([`writer`]), the hooks and
//! permission gates ([`gate`]) and the environment knobs and faults
//! ([`knobs`]).
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
//! Which conversation a run writes is decided as agy decides it
//! ([`conversation`]): a new one, an existing one resumed (its earlier turns
//! count in the result), or, for a `--conversation` id agy does not have, a
//! new one after a warning.

pub mod conversation;
mod database;
mod gate;
mod given_prompt;
pub mod knobs;
pub mod late;
pub mod writer;

use self::conversation::{conversations_dir, resolve_conversation, Target, TurnPlan};
use self::database::{idx_list, step_row, step_writes};
use self::gate::denied_actions;
use self::knobs::{crash, env_flag, env_parse, load_recording, spawn_grandchild, CrashMode, Knobs};
use self::writer::Writer;
use crate::cli::{OutputFormat, PrintArgs};
use crate::ending::{self, Context, Ending, PermissionPolicy};
use crate::stream::{self, Emitter, TextMode};
use agy_corpus::recording::{apply_commit, ApplyOptions, Commit, Gate, Recording};
use agy_format::steps;
use agy_format::stream_json::{DeniedAction, Line};
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
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
    /// `FAKE_AGY_GIVEN_PROMPT`: the user-input step takes the prompt given.
    given_prompt: Option<given_prompt::GivenPrompt>,
    /// `FAKE_AGY_APPLY_EDITS`: where the recording's file edits may be
    /// written ([`crate::edits`]).
    edits: Option<crate::edits::Workspace>,
    /// File-writing root tools let through, by recorded idx, with their
    /// name and arguments: written when their DONE state is.
    edits_due: HashMap<i64, (String, serde_json::Value)>,
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
        let version = agy_bridge::runner::version::parse_version(&rec.header.agy_version)
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
            given_prompt: knobs.given_prompt.then(Default::default),
            edits: knobs
                .apply_edits
                .then(|| crate::edits::Workspace::here(&args.add_dirs)),
            edits_due: HashMap::new(),
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

    /// A root commit of this run with the prompt given in its user-input
    /// step (`FAKE_AGY_GIVEN_PROMPT`); `None`: as recorded.
    fn with_given_prompt(&mut self, is_root: bool, commit: &Commit) -> Option<Commit> {
        let given = self
            .given_prompt
            .as_mut()
            .filter(|_| is_root && !commit.pre)?;
        given.rewrite(commit, &self.args.prompt)
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
        crate::mcp::hold_after_calls();
        Ok(waited.elapsed())
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
            let given = self.with_given_prompt(is_root, commit);
            let commit: &Commit = given.as_ref().unwrap_or(commit);
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
            if is_root && !commit.pre {
                // agy writes a file before it records that the tool ended.
                self.write_edits(commit);
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
        if let Some(delay) = self.knobs.late_commit {
            if let Err(e) = late::leave(&self.root_path, delay) {
                err_raw(&format!(
                    "fake-agy: FAKE_AGY_LATE_COMMIT_MS: {}\n",
                    e.message
                ));
            }
        }
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

/// agy refused the model and effort before creating a conversation: an
/// `ERROR` result (`conversation_id` ""), `error: ...` on stderr, exit 1
/// (docs/agy-format.md, "Outcomes": the model/effort conflict of 1.2.17).
fn refuse_selection(args: &PrintArgs, error: &str) -> i32 {
    let result = agy_format::stream_json::TurnResult {
        status: "ERROR".into(),
        error: Some(error.to_string()),
        usage: Some(Default::default()),
        ..Default::default()
    };
    let conclusion = ending::Conclusion {
        result: Some(result),
        stdout_text: String::new(),
        stderr: format!("error: {error}\n"),
        exit_code: 1,
    };
    ending::print(conclusion, args.output_format)
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
    if let Some(error) = crate::effort::refusal(args, &rec) {
        return Ok(refuse_selection(args, &error));
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
/// it to [`agy_corpus::recording::REALISTIC_BOOT_MS`] to measure what a user
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
