//! `agy-bridge conformance`: a fixed set of scenarios run against an agy
//! (the one on PATH, `AGY_BIN`, or fake-agy in CI), each fact of
//! docs/agy-format.md they touch checked on what the bridge itself reads:
//! the runner's binding (init line), its stream-json result and usage, the
//! conversation database's steps, and agy's own commands (`--version`,
//! `models`, `-p /hooks`, `-p /usage`).
//!
//! HOME-safety: every scenario runs in a throwaway workspace (cwd and
//! `--add-dir` under one private temporary directory, removed at the end);
//! the caller gives the bridge a throwaway state directory. agy itself
//! needs the user's HOME (its sign-in), so the conversations it creates are
//! where agy keeps them; the report says so.
//!
//! Each scenario also sets `FAKE_AGY_RECORDING` to the recording that plays
//! it, so fake-agy replays it; a real agy ignores the variable.
//!
//! It is why [`crate::maintain`] sits above pi: it reads `agy models` with
//! [`crate::pi::models`]' parser (the only parser of that listing) and
//! serves agy the bridge's own MCP server (`crate::pi::mcp::ToolBridge`).

mod commands;
mod report;
mod scenarios;

pub use report::exit_code;
pub use scenarios::{cheapest_listed, list_models};

use crate::maintain::record;
use crate::runner::failure::Failure;
use crate::runner::{self, RunConfig, RunEvent, RunResult, TurnRequest};
use crate::state::tmp::PrivateDir;
use agy_corpus::recording::{Header, Provenance, Recording};
use agy_corpus::redact;
use agy_format::ids::ConversationId;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long one of agy's own commands (`--version`, `models`, `/hooks`,
/// `/usage`) may take.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// What a scenario does and the facts it checks.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name (`--only NAME`).
    pub name: &'static str,
    /// The model turns it spends.
    pub turns: u32,
    /// The recording fake-agy plays for it (`FAKE_AGY_RECORDING`).
    pub recording: &'static str,
    /// What it does, in a few words.
    pub about: &'static str,
    /// The facts it checks: (id, docs/agy-format.md section).
    pub facts: &'static [(&'static str, &'static str)],
    /// Not built yet: its facts are reported as not checked.
    pub not_yet: bool,
}

const fn scenario(
    name: &'static str,
    turns: u32,
    recording: &'static str,
    about: &'static str,
    facts: &'static [(&'static str, &'static str)],
) -> Scenario {
    Scenario {
        name,
        turns,
        recording,
        about,
        facts,
        not_yet: false,
    }
}

/// Every scenario, in the order they run.
pub const SCENARIOS: &[Scenario] = &[
    scenario(
        "version",
        0,
        "hello",
        "`agy --version`",
        &[("cli.version", "Versions and `--help`")],
    ),
    scenario(
        "models",
        0,
        "hello",
        "`agy models`",
        &[("models.listing", "agy models")],
    ),
    scenario(
        "usage",
        0,
        "hello",
        "`agy -p /usage --output-format json`",
        &[("usage.buckets", "Quota: `/usage`")],
    ),
    scenario(
        "one-word",
        1,
        "outcomes/pong-1.2.17",
        "a one-word answer",
        &[
            ("init.conversation_id", "init"),
            ("init.permission_mode", "init"),
            ("result.success", "result"),
            ("db.text_field_path", "Step bodies"),
        ],
    ),
    scenario(
        "tools",
        1,
        "outcomes/tools-1.2.17",
        "a turn with view_file and run_command",
        &[
            ("tools.view_file", "Step bodies"),
            ("tools.run_command", "Step bodies"),
        ],
    ),
    scenario(
        "denied",
        1,
        "outcomes/denied-1.2.17",
        "a command without --dangerously-skip-permissions",
        &[
            ("denied.result_denied_actions", "Denials by tool"),
            ("denied.permission_mode", "init"),
        ],
    ),
    scenario(
        "effort",
        0,
        "outcomes/streaming-1.3.1",
        "`--effort xhigh`, which no model takes: refused before any turn",
        &[("effort.xhigh_refused", "Efforts (1.3.1)")],
    ),
    scenario(
        "resume",
        2,
        "resume",
        "a turn, then the same conversation resumed",
        &[
            ("resume.same_conversation", "Resume"),
            ("result.usage.cumulative", "result"),
        ],
    ),
    scenario(
        "resume-unknown",
        1,
        "outcomes/resume-unknown-id-1.2.7",
        "resuming a conversation agy does not have",
        &[("resume.unknown_id_new_conversation", "Resume")],
    ),
    scenario(
        "stdin",
        2,
        "stdin-two-turns",
        "two turns over stdin (`--input-format stream-json`)",
        &[(
            "stdin.two_turns_one_conversation",
            "Input: `--input-format stream-json`",
        )],
    ),
    scenario(
        "hooks",
        2,
        "outcomes/tools-1.2.17",
        "`/hooks` with an --add-dir hooks.json, then its PreToolUse hook allowing and denying",
        &[
            ("hooks.add_dir_loaded", "Hooks"),
            ("hooks.pre_tool_use_allow", "Hooks"),
            ("hooks.payload_fields", "Hook payloads (1.3.3)"),
            ("hooks.pre_tool_use_deny", "Hooks"),
        ],
    ),
    scenario(
        "write",
        1,
        "outcomes/denied-write-1.2.7",
        "a file written in accept-edits",
        &[("edits.accept_edits_write", "Step bodies")],
    ),
    scenario(
        "slash-flag",
        1,
        "outcomes/pong-1.2.17",
        "a prompt starting with `/`, sent as text (--disable-slash-commands where agy has it)",
        &[("slash.disable_flag", "Slash commands")],
    ),
    scenario(
        "mcp",
        1,
        "mcp/pi-tool",
        "a call to the bridge's own MCP server from --add-dir",
        &[("mcp.bridge_server", "MCP")],
    ),
    scenario(
        "subagent",
        1,
        "subagent",
        "a subagent, if the model starts one",
        &[("subagent.child_conversation", "Step types")],
    ),
];

/// The scenarios `only` picks (all when empty), or the unknown names.
pub fn select(only: &[String]) -> Result<Vec<Scenario>, String> {
    let unknown: Vec<&str> = only
        .iter()
        .map(String::as_str)
        .filter(|n| !SCENARIOS.iter().any(|s| s.name == *n))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        return Err(format!(
            "unknown scenario(s) {}; the scenarios are {}",
            unknown.join(", "),
            names.join(", ")
        ));
    }
    Ok(SCENARIOS
        .iter()
        .filter(|s| only.is_empty() || only.iter().any(|n| n == s.name))
        .copied()
        .collect())
}

/// The model turns `scenarios` spend.
pub fn planned_turns(scenarios: &[Scenario]) -> u32 {
    scenarios.iter().map(|s| s.turns).sum()
}

/// One fact, as checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checked {
    /// The fact's id.
    pub fact: String,
    /// The docs/agy-format.md section that states it.
    pub section: String,
    /// `None`: not checked (the evidence says why).
    pub ok: Option<bool>,
    /// What was seen: the line, field or exit code, shortened.
    pub evidence: String,
    /// The scenario that checked it.
    pub scenario: String,
}

/// What a run of the suite found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The agy binary checked.
    pub agy_bin: String,
    /// What it says its version is.
    pub agy_version: String,
    /// The operating system and architecture the suite ran on.
    pub platform: String,
    /// The model the turns ran on, if one was named.
    pub model: Option<String>,
    /// The model turns the chosen scenarios would spend.
    pub planned_turns: u32,
    /// The model turns spent.
    pub spent_turns: u32,
    /// Every fact of the chosen scenarios, checked or not.
    pub facts: Vec<Checked>,
    /// Why the suite stopped early (a quota error), if it did.
    pub stopped: Option<String>,
    /// What went wrong beside the facts (a file that could not be written).
    pub notes: Vec<String>,
    /// The recordings written, relative to the output directory.
    pub recordings: Vec<String>,
    /// What agy's own commands printed, relative to the output directory.
    pub commands: Vec<String>,
    /// What the drift report against the schema baseline found.
    pub drift: Option<String>,
}

impl Report {
    /// The facts that did not hold.
    pub fn failed(&self) -> Vec<&Checked> {
        self.facts.iter().filter(|c| c.ok == Some(false)).collect()
    }
}

/// What the suite is run with.
#[derive(Debug, Clone)]
pub struct Options {
    /// The runner's configuration (agy binary, conversations directory,
    /// environment): each scenario adds its own on top.
    pub cfg: RunConfig,
    /// agy's --model; `None`: the cheapest `agy models` lists.
    pub model: Option<String>,
    /// The scenarios to run, in order.
    pub scenarios: Vec<Scenario>,
    /// Where recordings go (`DIR/recordings/`); `None`: none are written.
    pub out: Option<PathBuf>,
    /// What `agy models` printed, when the caller asked it already (to
    /// name the model up front); `None`: the suite asks.
    pub models: Option<std::process::Output>,
}

/// A fact a scenario found: id, held, evidence.
pub(crate) type Found = (&'static str, bool, String);

/// The run in progress: what every scenario shares.
pub(crate) struct Suite {
    pub cfg: RunConfig,
    pub model: Option<String>,
    pub root: PrivateDir,
    pub spent: u32,
    pub stopped: Option<String>,
    /// What went wrong on the way (a scenario that could not be set up).
    pub notes: Vec<String>,
    pub out: Option<PathBuf>,
    pub recordings: Vec<String>,
    /// agy's own commands as they ran (`DIR/commands/`; what `--version`
    /// and `models` printed goes in every recording's header).
    pub commands: Vec<commands::Ran>,
    pub cancel: CancellationToken,
}

/// A finished turn and the events the runner sent on the way.
pub(crate) struct Turn {
    pub result: RunResult,
    pub events: Vec<RunEvent>,
}

impl Suite {
    /// A fresh directory for one scenario (`cwd`, `add`) under the root.
    pub(crate) fn workspace(&self, name: &str) -> std::io::Result<(PathBuf, PathBuf)> {
        let cwd = self.root.path().join(name).join("workspace");
        let add = self.root.path().join(name).join("added");
        std::fs::create_dir_all(&cwd)?;
        std::fs::create_dir_all(&add)?;
        Ok((cwd, add))
    }

    /// The runner's configuration for a scenario.
    pub(crate) fn config(&self, sc: &Scenario) -> RunConfig {
        self.config_for(sc.recording)
    }

    /// The runner's configuration with fake-agy playing `recording`.
    pub(crate) fn config_for(&self, recording: &str) -> RunConfig {
        let mut cfg = self.cfg.clone();
        cfg.env.retain(|(k, _)| k != "FAKE_AGY_RECORDING");
        cfg.env
            .push(("FAKE_AGY_RECORDING".into(), recording.into()));
        cfg
    }

    /// A request in `cwd` with the suite's model.
    pub(crate) fn request(&self, prompt: &str, cwd: &Path) -> TurnRequest {
        TurnRequest {
            prompt: prompt.to_string(),
            cwd: Some(cwd.to_path_buf()),
            model: self.model.clone(),
            ..TurnRequest::default()
        }
    }

    /// A capturer for a run of `req` when the suite writes recordings, and
    /// `cfg` with the poll interval a capture needs.
    fn capture(&self, cfg: &RunConfig, req: &TurnRequest) -> (RunConfig, Option<record::Capturer>) {
        let mut run_cfg = cfg.clone();
        let capturer = self.out.as_ref().map(|_| {
            run_cfg.poll_interval = run_cfg.poll_interval.min(record::CAPTURE_INTERVAL);
            let _ = std::fs::create_dir_all(&cfg.conversations_dir);
            match &req.conversation {
                Some(id) => record::Capturer::resume(&cfg.conversations_dir, id),
                None => record::Capturer::new(&cfg.conversations_dir),
            }
        });
        (run_cfg, capturer)
    }

    /// Run one turn (unless the suite stopped), recorded as `label` when
    /// the suite writes recordings; a quota failure stops the suite.
    /// `None`: it did not run.
    pub(crate) async fn turn(
        &mut self,
        cfg: &RunConfig,
        req: &TurnRequest,
        label: &str,
    ) -> Option<Turn> {
        if self.stopped.is_some() {
            return None;
        }
        let (run_cfg, mut capturer) = self.capture(cfg, req);
        if let Some(c) = capturer.as_mut() {
            c.start();
        }
        let (tx, rx) = runner::event_channel();
        let observer = capturer.as_mut().map(|c| c as &mut dyn runner::Observer);
        let (result, events) = tokio::join!(
            runner::run_observed(&run_cfg, req, self.cancel.clone(), tx, observer),
            collect(rx)
        );
        self.spent += 1;
        self.note_quota(&result);
        if let Some(c) = &capturer {
            self.save_recording(label, req, &result, c);
        }
        Some(Turn { result, events })
    }

    /// Two turns on one agy over its stdin (a warm agy, as pi's sessions
    /// run them), recorded as `label` (one recording, a `turn` per line):
    /// the results, `None` when the suite had stopped.
    pub(crate) async fn warm_turns(
        &mut self,
        cfg: &RunConfig,
        first: &TurnRequest,
        second_prompt: &str,
        label: &str,
    ) -> Result<Option<Vec<RunResult>>, String> {
        if self.stopped.is_some() {
            return Ok(None);
        }
        let (cfg, mut capturer) = self.capture(cfg, first);
        let key = runner::WarmKey::of(&cfg, first, "");
        let prelude = runner::Prelude::blocking(&cfg);
        let mut warm = runner::start_warm(&cfg, first, prelude, key).await?;
        let mut results = Vec::new();
        let mut req = first.clone();
        for prompt in [first.prompt.as_str(), second_prompt] {
            req.prompt = prompt.to_string();
            if let Some(c) = capturer.as_mut() {
                if results.is_empty() {
                    c.start();
                } else {
                    c.next_turn();
                }
            }
            let (tx, rx) = runner::event_channel();
            let observer = capturer.as_mut().map(|c| c as &mut dyn runner::Observer);
            let (ran, _) = tokio::join!(
                runner::run_warm_observed(&cfg, &req, warm, self.cancel.clone(), tx, observer),
                collect(rx)
            );
            let (result, next) = match ran {
                runner::WarmRun::Ran(result, next) => (result, next),
                runner::WarmRun::Gone(why) => return Err(why),
            };
            self.spent += 1;
            self.note_quota(&result);
            req.conversation = result
                .conversation_id
                .as_deref()
                .and_then(|id| ConversationId::parse(id).ok());
            req.after_idx = result.last_idx;
            results.push(result);
            match next {
                Some(w) if self.stopped.is_none() && results.len() < 2 => warm = w,
                Some(w) => {
                    w.stop(cfg.kill_grace).await;
                    break;
                }
                None => break,
            }
        }
        if let (Some(c), Some(result)) = (&capturer, results.first()) {
            self.save_recording(label, first, result, c);
        }
        Ok(Some(results))
    }

    /// Stop the suite when `result` failed on agy's quota.
    pub(crate) fn note_quota(&mut self, result: &RunResult) {
        if let Some(f @ Failure::QuotaExceeded { .. }) = &result.failure {
            self.stopped = Some(format!(
                "stopped on a quota error after {} turn(s): {f}",
                self.spent
            ));
        }
    }

    /// Write the turn's redacted recording to `DIR/recordings/LABEL.jsonl`.
    fn save_recording(
        &mut self,
        label: &str,
        req: &TurnRequest,
        result: &RunResult,
        capturer: &record::Capturer,
    ) {
        let (Some(out), Some(root)) = (
            self.out.clone(),
            result
                .conversation_id
                .clone()
                .or_else(|| capturer.root().map(str::to_string)),
        ) else {
            return;
        };
        let recording = recorded(self, req, result, capturer, root);
        let mut workspaces = vec![self.root.path().display().to_string()];
        workspaces.extend(req.cwd.iter().map(|p| p.display().to_string()));
        let redacted =
            redact::redact_recording(&recording, &redact::RedactOptions::from_env(workspaces));
        let rel = format!("recordings/{label}.jsonl");
        let saved = std::fs::create_dir_all(out.join("recordings"))
            .map_err(|e| e.to_string())
            .and_then(|_| redacted.save(&out.join(&rel)).map_err(|e| e.to_string()));
        match saved {
            Ok(()) => self.recordings.push(rel),
            Err(e) => self.notes.push(format!("cannot write {rel}: {e}")),
        }
    }
}

/// A turn as a recording fake-agy replays: its commits, agy's answer as
/// its text-mode stdout, its stderr and exit code.
fn recorded(
    suite: &Suite,
    req: &TurnRequest,
    result: &RunResult,
    capturer: &record::Capturer,
    root: String,
) -> Recording {
    let agy_version = record::version_of(suite.printed("version"));
    let stdout = match &result.agy_result {
        Some(r) if !r.response.is_empty() => format!("{}\n", r.response.trim_end()),
        _ => result.stdout.clone(),
    };
    // A warm agy's turn has no exit code of its own: agy goes on to the
    // next line, and exits 0 when its input closes after a good turn.
    let warm_ok = result.agy_result.as_ref().is_some_and(|a| a.is_success());
    let exit_code = result
        .exit_code
        .or_else(|| result.signal.map(|s| 128 + s))
        .unwrap_or(if warm_ok { 0 } else { -1 });
    Recording {
        header: Header {
            format: agy_corpus::recording::FORMAT_VERSION,
            agy_version: agy_version.clone(),
            provenance: Provenance::Captured {
                agy_version,
                redacted: false,
            },
            description: "agy-bridge conformance".into(),
            prompt: req.prompt.clone(),
            model: req.model.clone(),
            workspace: req.cwd.as_ref().map(|p| p.display().to_string()),
            root_conversation: root,
            stdout,
            stderr: result.stderr_tail.clone(),
            exit_code,
            models_output: suite.printed("models").to_string(),
            version_output: suite.printed("version").to_string(),
            schema: capturer.schema(),
            outcome: None,
        },
        commits: capturer.commits(),
    }
}

/// Every event until the runner drops its sender.
pub(crate) async fn collect(mut rx: tokio::sync::mpsc::Receiver<RunEvent>) -> Vec<RunEvent> {
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    events
}

/// Run the suite. Never fails: what could not run is a fact not checked,
/// or (agy missing) an `Err` with the reason, for exit 2.
pub async fn run(opts: Options, cancel: CancellationToken) -> Result<Report, String> {
    let root = PrivateDir::create(&crate::state::tmp::temp_dir(), "conformance")
        .map_err(|e| format!("cannot create a temporary workspace: {e}"))?;
    let mut suite = Suite {
        cfg: opts.cfg.clone(),
        model: opts.model.clone(),
        root,
        spent: 0,
        stopped: None,
        notes: Vec::new(),
        out: opts.out.clone(),
        recordings: Vec::new(),
        commands: Vec::new(),
        cancel,
    };
    let version = suite.version().await?;
    suite.list_models(opts.models).await;
    if suite.model.is_none() {
        suite.model = scenarios::cheapest_listed(suite.printed("models"));
    }
    let model = suite.model.clone();
    let mut facts = Vec::new();
    for sc in &opts.scenarios {
        let found = if sc.not_yet {
            Vec::new()
        } else {
            scenarios::run_one(&mut suite, sc, &version).await
        };
        let why = if sc.not_yet {
            "not yet: this build does not run this scenario".to_string()
        } else if let Some(stop) = &suite.stopped {
            format!("not checked: {stop}")
        } else {
            "not checked: an earlier step of this scenario failed or did not run (see the notes)"
                .to_string()
        };
        facts.extend(checked(sc, found, &why));
    }
    let drift = match &opts.out {
        Some(out) if !suite.recordings.is_empty() => write_drift(out, &suite.recordings),
        _ => None,
    };
    let mut saved_commands = Vec::new();
    if let Some(out) = &opts.out {
        let opts = redact::RedactOptions::from_env(vec![suite.root.path().display().to_string()]);
        match commands::write(out, &suite.commands, &mut redact::Redactor::new(&opts)) {
            Ok(files) => saved_commands = files,
            Err(e) => suite.notes.push(format!("cannot write commands/: {e}")),
        }
    }
    Ok(Report {
        agy_bin: opts.cfg.agy_bin.display().to_string(),
        agy_version: version.text.clone(),
        platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        model,
        planned_turns: planned_turns(&opts.scenarios),
        spent_turns: suite.spent,
        facts,
        stopped: suite.stopped.clone(),
        notes: std::iter::once(format!(
            "agy ran with the user's HOME (its sign-in): the conversations it created are in {}",
            opts.cfg.conversations_dir.display()
        ))
        .chain(suite.notes.iter().cloned())
        .collect(),
        recordings: suite.recordings.clone(),
        commands: saved_commands,
        drift,
    })
}

/// `DIR/drift.txt`: the recordings' fingerprint against the schema
/// baseline (`agy-bridge drift`'s report); one line saying what it found.
fn write_drift(out: &Path, recordings: &[String]) -> Option<String> {
    use agy_corpus::drift;
    let paths: Vec<PathBuf> = recordings.iter().map(|r| out.join(r)).collect();
    let looked_at: Vec<String> = recordings.to_vec();
    let found = drift::fingerprint_paths(&paths)
        .map_err(|e| e.to_string())
        .and_then(|current| {
            let (baseline, path) = drift::default_baseline().map_err(|e| e.to_string())?;
            Ok((current, baseline, path))
        });
    let (current, baseline, path) = match found {
        Ok(found) => found,
        Err(e) => return Some(format!("no drift report: {e}")),
    };
    let report = drift::compare(&baseline, &current);
    let text = report.to_text(&current, &path, &looked_at);
    if let Err(e) = std::fs::write(out.join("drift.txt"), text) {
        return Some(format!("cannot write drift.txt: {e}"));
    }
    Some(format!(
        "drift.txt: {} against {}",
        if report.is_breaking() {
            "BREAKING changes"
        } else {
            "no breaking change"
        },
        path.display()
    ))
}

/// The scenario's facts in its order: each found one, else not checked.
fn checked(sc: &Scenario, found: Vec<Found>, why: &str) -> Vec<Checked> {
    sc.facts
        .iter()
        .map(|(id, section)| {
            let hit = found.iter().find(|(f, _, _)| f == id);
            Checked {
                fact: id.to_string(),
                section: section.to_string(),
                ok: hit.map(|(_, ok, _)| *ok),
                evidence: hit
                    .map(|(_, _, e)| e.clone())
                    .unwrap_or_else(|| why.to_string()),
                scenario: sc.name.to_string(),
            }
        })
        .collect()
}
