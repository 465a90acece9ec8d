//! The scenarios: what each asks agy, and the facts read from what came
//! back. Prompts are ones a real agy answers the way the recording fake-agy
//! plays for the scenario does (a one-word answer, a file read and a
//! command, a denied command ...).

use super::commands::Ran;
use super::{Found, Scenario, Suite, Turn, COMMAND_TIMEOUT};
use crate::follow::discovery::BindMethod;
use crate::follow::events::Event;
use crate::runner::{self, RunConfig, RunEvent, RunResult};
use agy_format::hooks::{self, Decision, Hook, HookEvent};
use agy_format::ids::ConversationId;
use agy_format::quota::Quota;
use agy_format::steps::{self, Body, StepType};
use agy_format::stream_json::Line;
use agy_format::text::{one_line, shorten};
use std::path::Path;
use std::process::Output;
use tokio_util::sync::CancellationToken;

/// How much of a value evidence shows.
const EVIDENCE_CHARS: usize = 160;

fn short(s: &str) -> String {
    shorten(&one_line(s), EVIDENCE_CHARS)
}

/// `agy --version`, as the report keeps it.
#[derive(Debug, Clone)]
pub(crate) struct Version {
    pub text: String,
    pub output: String,
    pub exit: Option<i32>,
}

/// Run one of agy's own commands (no model turn) in `cwd`, stdin closed,
/// as a short program (under the guardian, ended when `cancel` fires).
async fn agy_command(
    cfg: &RunConfig,
    args: &[&str],
    cwd: Option<&Path>,
    cancel: &CancellationToken,
) -> Result<Output, String> {
    use crate::process::short::{self, NoOutput, Program};
    let mut program = Program::new(&cfg.agy_bin, args, COMMAND_TIMEOUT).env(&cfg.env);
    if let Some(dir) = cwd {
        program = program.cwd(dir);
    }
    let bin = cfg.agy_bin.display();
    short::run(&program, cancel).await.map_err(|e| match e {
        NoOutput::NotInstalled => format!("{bin} is not installed"),
        NoOutput::SpawnFailed(m) => format!("cannot start {bin}: {m}"),
        NoOutput::TimedOut { secs } => {
            format!("`{bin} {}` gave no answer within {secs} s", args.join(" "))
        }
        NoOutput::Canceled => format!("`{bin} {}` was stopped", args.join(" ")),
    })
}

impl Suite {
    /// Run one of agy's own commands, kept for `DIR/commands/` as `name`.
    async fn command(
        &mut self,
        name: &str,
        cfg: &RunConfig,
        args: &[&str],
        cwd: Option<&Path>,
    ) -> Result<Output, String> {
        let out = agy_command(cfg, args, cwd, &self.cancel).await?;
        self.commands.push(Ran::new(name, args, &out));
        Ok(out)
    }

    /// `agy --version` (kept as the recordings' `version_output`); an agy
    /// that cannot be started is an error (exit 2).
    pub(crate) async fn version(&mut self) -> Result<Version, String> {
        let cfg = self.cfg.clone();
        let out = self.command("version", &cfg, &["--version"], None).await?;
        let output = String::from_utf8_lossy(&out.stdout).into_owned();
        Ok(Version {
            text: crate::maintain::record::version_of(&output),
            output,
            exit: out.status.code(),
        })
    }

    /// `agy models` (kept as the recordings' `models_output`), once per
    /// suite: what the caller already asked (`listed`), else asked now.
    /// The `models` scenario reads what it printed.
    pub(crate) async fn list_models(&mut self, listed: Option<Output>) {
        if let Some(out) = listed {
            self.commands.push(Ran::new("models", &["models"], &out));
            return;
        }
        let cfg = self.cfg.clone();
        if let Err(e) = self.command("models", &cfg, &["models"], None).await {
            self.notes.push(format!("models: {}", one_line(&e)));
        }
    }

    /// What agy's own command `name` printed (empty when it did not run).
    pub(crate) fn printed(&self, name: &str) -> &str {
        self.commands
            .iter()
            .find(|c| c.name == name)
            .map_or("", |c| c.stdout.as_str())
    }
}

/// `agy models`, as the suite runs it (its stdout feeds
/// [`cheapest_listed`]; give it to the suite in [`super::Options::models`]
/// so it is not asked twice). Stopped when `cancel` fires.
pub async fn list_models(cfg: &RunConfig, cancel: &CancellationToken) -> Result<Output, String> {
    agy_command(cfg, &["models"], None, cancel).await
}

/// The cheapest model in what `agy models` printed: a lite, else a flash
/// model, at the lowest effort; `None` (agy's default) when it lists none.
pub fn cheapest_listed(listing: &str) -> Option<String> {
    let listed = crate::pi::models::parse_models_output(listing);
    listed.iter().map(|m| m.slug()).min_by_key(|slug| {
        let family = if slug.contains("lite") {
            0
        } else if slug.contains("flash") {
            1
        } else {
            2
        };
        let effort = if slug.ends_with("-low") {
            0
        } else if slug.ends_with("-medium") {
            1
        } else {
            2
        };
        (family, effort)
    })
}

/// Run one scenario; what it could not check is left out (the caller
/// reports it as not checked).
pub(crate) async fn run_one(s: &mut Suite, sc: &Scenario, version: &Version) -> Vec<Found> {
    let found = match sc.name {
        "version" => Ok(vec![version_fact(version)]),
        "models" => models(s),
        "usage" => usage(s, sc).await,
        "one-word" => one_word(s, sc).await,
        "tools" => tools(s, sc).await,
        "denied" => denied(s, sc).await,
        "effort" => effort(s, sc).await,
        "resume" => resume(s, sc).await,
        "resume-unknown" => resume_unknown(s, sc).await,
        "stdin" => stdin(s, sc).await,
        "hooks" => hook_decisions(s, sc).await,
        "slash-flag" => slash_flag(s, sc).await,
        "write" => write(s, sc).await,
        "mcp" => mcp(s, sc).await,
        "subagent" => subagent(s, sc).await,
        other => Err(format!("no scenario {other}")),
    };
    match found {
        Ok(found) => found,
        Err(e) => {
            s.notes.push(format!("{}: {}", sc.name, one_line(&e)));
            Vec::new()
        }
    }
}

fn io_error(e: std::io::Error) -> String {
    e.to_string()
}

fn version_fact(v: &Version) -> Found {
    let parsed = crate::runner::version::parse_version(&v.output);
    let evidence = format!(
        "exit {}, stdout {:?}",
        v.exit.map_or("none".into(), |c| c.to_string()),
        short(&v.output)
    );
    (
        "cli.version",
        v.exit == Some(0) && parsed.is_some(),
        evidence,
    )
}

fn models(s: &Suite) -> Result<Vec<Found>, String> {
    let Some(out) = s.commands.iter().find(|c| c.name == "models") else {
        return Err("`agy models` did not run (see the notes)".into());
    };
    let listed = crate::pi::models::parse_models_output(&out.stdout);
    let slugs: Vec<String> = listed.iter().map(|m| m.slug()).collect();
    let evidence = format!(
        "exit {}, {} model(s): {}",
        out.exit_code.unwrap_or(-1),
        slugs.len(),
        short(&slugs.join(", "))
    );
    Ok(vec![(
        "models.listing",
        out.exit_code == Some(0) && !slugs.is_empty(),
        evidence,
    )])
}

async fn usage(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let cfg = s.config(sc);
    let out = s
        .command(
            "usage",
            &cfg,
            &["-p", "/usage", "--output-format", "json"],
            None,
        )
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (ok, evidence) = match Quota::parse(&stdout) {
        Ok(q) if !q.buckets.is_empty() => (
            out.status.success(),
            format!(
                "exit {}, {} bucket(s); lowest: {}",
                out.status.code().unwrap_or(-1),
                q.buckets.len(),
                q.lowest()
                    .map(|b| b.words(crate::runner::quota::now_secs()))
                    .unwrap_or_default()
            ),
        ),
        Ok(_) => (false, format!("no bucket in {:?}", short(&stdout))),
        Err(e) => (false, format!("{e}: {:?}", short(&stdout))),
    };
    Ok(vec![("usage.buckets", ok, evidence)])
}

/// `init.conversation_id`: agy printed an `init` line naming its
/// conversation (the stream-json reader counts those; an init without
/// `conversation_id` is an event it does not know), and the runner bound
/// the turn from it.
fn init_fact(r: &RunResult) -> Found {
    let id = r.conversation_id.clone().unwrap_or_default();
    let stats = &r.stream_stats;
    match &r.bind_method {
        Some(BindMethod::StreamJson) if stats.inits > 0 => (
            "init.conversation_id",
            true,
            format!("{} init line(s); the first named {id}", stats.inits),
        ),
        other => (
            "init.conversation_id",
            false,
            format!(
                "{} init line(s) with a conversation_id among {} stream-json line(s), {} not read (an init without conversation_id is one); bound by {other:?} to {id:?}",
                stats.inits, stats.lines, stats.unknown_events
            ),
        ),
    }
}

/// `init.permission_mode` is the mode agy's command line asks for:
/// `always-proceed` with `--dangerously-skip-permissions`, `request-review`
/// without (`fact`: which scenario's turn it is read from). Not checked
/// when no `init` line could be read (that is `init.conversation_id`'s).
fn permission_mode_fact(fact: &'static str, cfg: &RunConfig, r: &RunResult) -> Option<Found> {
    if r.stream_stats.inits == 0 {
        return None;
    }
    let expected = agy_format::stream_json::permission_mode_for(cfg.skip_permissions);
    let reported = r.permission_mode.as_deref();
    Some((
        fact,
        reported == Some(expected),
        format!(
            "init.permission_mode {reported:?} with{} --dangerously-skip-permissions",
            if cfg.skip_permissions { "" } else { "out" }
        ),
    ))
}

/// The result line, exit code and failure in a few words.
fn result_words(r: &RunResult) -> String {
    let status = r
        .agy_result
        .as_ref()
        .map_or("no result line".to_string(), |a| {
            format!("status {}, response {:?}", a.status, short(&a.response))
        });
    let failure = r
        .failure
        .as_ref()
        .map(|f| format!(", failure: {}", short(&f.to_string())))
        .unwrap_or_default();
    format!(
        "exit {}, {status}{failure}",
        r.exit_code.map_or("none".into(), |c| c.to_string())
    )
}

/// A turn on a warm agy: agy goes on running, so there is no exit code.
fn warm_succeeded(r: &RunResult) -> bool {
    r.failure.is_none() && r.agy_result.as_ref().is_some_and(|a| a.is_success())
}

fn succeeded(r: &RunResult) -> bool {
    r.exit_code == Some(0) && r.agy_result.as_ref().is_some_and(|a| a.is_success())
}

/// `db.text_field_path`: the answer's text is where the decoder reads it
/// (payload 20.1 of a planner response step).
fn text_field_fact(cfg: &RunConfig, r: &RunResult) -> Found {
    const ID: &str = "db.text_field_path";
    let Some(id) = &r.conversation_id else {
        return (ID, false, "no conversation was bound".into());
    };
    let path = cfg.conversations_dir.join(format!("{id}.db"));
    let rows = match agy_format::database::open_read_only(&path)
        .and_then(|conn| agy_format::database::read_all(&conn, &path))
    {
        Ok(rows) => rows,
        Err(e) => return (ID, false, format!("cannot read {}: {e}", path.display())),
    };
    let decoded: Vec<steps::Step> = rows.iter().map(steps::decode).collect();
    let planners = decoded
        .iter()
        .filter(|s| s.step_type == StepType::PlannerResponse);
    for step in planners.clone() {
        if let Some(Body::Planner(p)) = &step.body {
            if !p.text.trim().is_empty() {
                return (
                    ID,
                    true,
                    format!("step {}: 20.1 = {:?}", step.idx, short(&p.text)),
                );
            }
        }
    }
    let unknown: Vec<String> = planners
        .flat_map(|s| s.unknown_fields.iter().map(|f| f.path.clone()))
        .collect();
    (
        ID,
        false,
        format!(
            "no planner response step holds text at 20.1; unknown fields there: [{}]",
            unknown.join(", ")
        ),
    )
}

async fn one_word(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let cfg = s.config(sc);
    let req = s.request("Answer with the single word READY.", &cwd);
    let Some(t) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    let mut found = vec![
        init_fact(&t.result),
        (
            "result.success",
            succeeded(&t.result),
            result_words(&t.result),
        ),
        text_field_fact(&cfg, &t.result),
    ];
    found.extend(permission_mode_fact(
        "init.permission_mode",
        &cfg,
        &t.result,
    ));
    Ok(found)
}

/// The results of tool `name` in a turn's events: (ok, summary).
fn tool_results<'a>(
    events: &'a [RunEvent],
    name: &'a str,
) -> impl Iterator<Item = (bool, &'a str)> {
    events.iter().filter_map(move |e| match e {
        RunEvent::Agy(Event::ToolResult {
            name: n,
            ok,
            summary,
            ..
        }) if n == name => Some((*ok, summary.as_str())),
        _ => None,
    })
}

/// The tools a turn called, for evidence.
fn tools_called(events: &[RunEvent]) -> String {
    let names: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Agy(Event::ToolCall { name, .. }) => Some(name.as_str()),
            _ => None,
        })
        .collect();
    format!("tools called: [{}]", names.join(", "))
}

/// A fact that tool `name` ran and succeeded in the turn.
fn tool_ran(fact: &'static str, t: &Turn, name: &str) -> Found {
    match tool_results(&t.events, name).find(|(ok, _)| *ok) {
        Some((_, summary)) => (fact, true, format!("{name} ok: {}", short(summary))),
        None => (
            fact,
            false,
            format!("no successful {name} result; {}", tools_called(&t.events)),
        ),
    }
}

const TOOLS_PROMPT: &str = "Read the file VERSION in this directory with view_file, then run \
`python3 -c 'print(6*9)'` with run_command, and reply NAME=<the name in VERSION> and SUM=<result>.";

async fn tools(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    std::fs::write(cwd.join("VERSION"), "name=conformance\n").map_err(io_error)?;
    let cfg = s.config(sc);
    let req = s.request(TOOLS_PROMPT, &cwd);
    let Some(t) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    Ok(vec![
        tool_ran("tools.view_file", &t, "view_file"),
        tool_ran("tools.run_command", &t, "run_command"),
    ])
}

async fn denied(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let mut cfg = s.config(sc);
    cfg.skip_permissions = false;
    let req = s.request(
        "Run the shell command `ls -la /srv` with run_command and show its output.",
        &cwd,
    );
    let Some(t) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    let denied = t
        .result
        .agy_result
        .as_ref()
        .map(|a| a.denied_actions.clone())
        .unwrap_or_default();
    let listed: Vec<String> = denied
        .iter()
        .map(|d| format!("{}/{}", d.action, d.display_name))
        .collect();
    let ok = t.result.exit_code == Some(0) && denied.iter().any(|d| d.action == "command");
    let evidence = format!(
        "denied_actions [{}]; {}",
        listed.join(", "),
        result_words(&t.result)
    );
    let mut found = vec![("denied.result_denied_actions", ok, evidence)];
    found.extend(permission_mode_fact(
        "denied.permission_mode",
        &cfg,
        &t.result,
    ));
    Ok(found)
}

/// `--effort xhigh` (agy 1.3.1 takes the word, but no model has the
/// effort; older agy does not take the word): refused before any
/// conversation, in agy's words naming it. The suite's model without its
/// tier, as a tiered slug would be refused for the tier instead.
async fn effort(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let cfg = s.config(sc);
    let model = s.model.clone().unwrap_or_default();
    let base = crate::pi::models::split_tier(&model).0.to_string();
    let mut args = vec![
        "-p",
        "Answer with the single word READY.",
        "--effort",
        "xhigh",
        "--output-format",
        "stream-json",
    ];
    if !base.is_empty() {
        args.extend(["--model", base.as_str()]);
    }
    let out = s.command("effort", &cfg, &args, Some(&cwd)).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<Line> = stdout.lines().map(Line::parse).collect();
    let began = lines.iter().any(|l| matches!(l, Line::Init { .. }));
    let words = lines
        .iter()
        .find_map(|l| match l {
            Line::Result(r) => r.error.clone(),
            _ => None,
        })
        .or_else(|| {
            stderr
                .lines()
                .find(|l| l.contains("xhigh"))
                .map(str::to_string)
        })
        .unwrap_or_default();
    let refused = !out.status.success() && !began && words.contains("\"xhigh\"");
    let evidence = format!(
        "--model {base:?} --effort xhigh: exit {}, conversation begun: {began}, agy: {:?}",
        out.status.code().unwrap_or(-1),
        short(&words)
    );
    Ok(vec![("effort.xhigh_refused", refused, evidence)])
}

fn total(u: Option<runner::TurnUsage>) -> (Option<u64>, u64) {
    match u {
        Some(u) => (u.conversation.map(|c| c.total_tokens), u.turn.total_tokens),
        None => (None, 0),
    }
}

async fn resume(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let first_cfg = s.config_for("outcomes/pong-1.2.17");
    let req = s.request("Answer with the single word READY.", &cwd);
    let Some(first) = s.turn(&first_cfg, &req, "resume-first").await else {
        return Ok(Vec::new());
    };
    let Some(id) = first.result.conversation_id.clone() else {
        return Err(format!(
            "the first turn was not bound: {}",
            result_words(&first.result)
        ));
    };
    let mut req = s.request("Any suggestions? Answer in one short sentence.", &cwd);
    req.conversation = Some(ConversationId::parse(&id).map_err(|e| e.to_string())?);
    let cfg = s.config(sc);
    let Some(second) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    let r = &second.result;
    let same = r.conversation_id.as_deref() == Some(id.as_str()) && r.lost_conversation.is_none();
    let same_fact = (
        "resume.same_conversation",
        same && succeeded(r),
        format!(
            "asked {id}, got {:?}; {}",
            r.conversation_id.clone().unwrap_or_default(),
            result_words(r)
        ),
    );
    let (before, _) = total(first.result.usage);
    let (whole, turn) = total(r.usage);
    let cumulative = match (whole, before) {
        (Some(w), Some(b)) => w > turn && w >= b,
        _ => false,
    };
    let usage_fact = (
        "result.usage.cumulative",
        cumulative,
        format!(
            "second result.usage.total_tokens {whole:?}; its own calls {turn}; the first turn's result {before:?}"
        ),
    );
    Ok(vec![same_fact, usage_fact])
}

async fn resume_unknown(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let cfg = s.config(sc);
    let asked = uuid::Uuid::new_v4().to_string();
    let mut req = s.request("Reply with exactly: fresh", &cwd);
    req.conversation = Some(ConversationId::parse(&asked).map_err(|e| e.to_string())?);
    let Some(t) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    let r = &t.result;
    let new_id = r.conversation_id.clone().unwrap_or_default();
    let ok = r.lost_conversation.as_deref() == Some(asked.as_str())
        && !new_id.is_empty()
        && new_id != asked
        && r.exit_code == Some(0);
    let evidence = format!(
        "asked {asked}; bound {new_id:?}, lost {:?}; {}",
        r.lost_conversation,
        result_words(r)
    );
    Ok(vec![("resume.unknown_id_new_conversation", ok, evidence)])
}

async fn stdin(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let cfg = s.config(sc);
    let first = s.request("Reply with exactly the word one.", &cwd);
    let Some(results) = s
        .warm_turns(&cfg, &first, "Reply with exactly the word two.", sc.name)
        .await?
    else {
        return Ok(Vec::new());
    };
    let ids: Vec<Option<String>> = results.iter().map(|r| r.conversation_id.clone()).collect();
    let turns: Vec<u64> = results
        .iter()
        .map(|r| r.agy_result.as_ref().map_or(0, |a| a.num_turns))
        .collect();
    let ok = results.len() == 2
        && results.iter().all(warm_succeeded)
        && ids[0].is_some()
        && ids[0] == ids[1];
    let words: Vec<String> = results.iter().map(result_words).collect();
    let evidence = format!(
        "conversations {ids:?}, num_turns {turns:?}; {}",
        words.join(" | ")
    );
    Ok(vec![("stdin.two_turns_one_conversation", ok, evidence)])
}

/// Single-quote `s` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

async fn hook_decisions(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, add) = s.workspace(sc.name).map_err(io_error)?;
    std::fs::write(cwd.join("VERSION"), "name=conformance\n").map_err(io_error)?;
    let decision = add.join("decision.json");
    let payload = add.join("payload.json");
    let command = format!(
        "cat >{}; cat {}",
        sh_quote(&payload.display().to_string()),
        sh_quote(&decision.display().to_string())
    );
    let hook = Hook {
        name: "conformance".into(),
        event: HookEvent::PreToolUse,
        matcher: Some("run_command".into()),
        command: command.clone(),
        timeout_secs: 30,
    };
    let agents = add.join(".agents");
    std::fs::create_dir_all(&agents).map_err(io_error)?;
    let hooks_json = agents.join(hooks::HOOKS_FILE);
    std::fs::write(&hooks_json, hooks::hooks_file(&[hook]).to_string()).map_err(io_error)?;
    let cfg = s.config(sc);
    let add_arg = add.display().to_string();
    let args = [
        "-p",
        "/hooks",
        "--output-format",
        "json",
        "--add-dir",
        add_arg.as_str(),
    ];
    let out = s.command("hooks", &cfg, &args, Some(&cwd)).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let loaded =
        out.status.success() && crate::gate::proof::lists_probe(&stdout, &hooks_json, &command);
    let sources: Vec<String> = hooks::listed_sources(&stdout)
        .into_iter()
        .map(|l| l.source)
        .collect();
    let mut found = vec![(
        "hooks.add_dir_loaded",
        loaded,
        format!(
            "/hooks exit {}, sources listed: [{}]",
            out.status.code().unwrap_or(-1),
            short(&sources.join(", "))
        ),
    )];
    if !loaded {
        return Ok(found);
    }
    let mut req = s.request(TOOLS_PROMPT, &cwd);
    req.add_dirs = vec![add.clone()];
    std::fs::write(&decision, Decision::Allow.to_json()).map_err(io_error)?;
    if let Some(t) = s.turn(&cfg, &req, "hooks-allow").await {
        found.push(tool_ran("hooks.pre_tool_use_allow", &t, "run_command"));
        found.extend(payload_fact(&payload));
    }
    let reason = "conformance hook says no";
    std::fs::write(&decision, Decision::deny(reason).to_json()).map_err(io_error)?;
    if let Some(t) = s.turn(&cfg, &req, "hooks-deny").await {
        let hit = tool_results(&t.events, "run_command").find(|(ok, _)| !ok);
        let ran = tool_results(&t.events, "run_command").any(|(ok, _)| ok);
        found.push(match hit {
            Some((_, summary)) if !ran && summary.contains(reason) => (
                "hooks.pre_tool_use_deny",
                true,
                format!("run_command failed: {}", short(summary)),
            ),
            other => (
                "hooks.pre_tool_use_deny",
                false,
                format!(
                    "run_command ran: {ran}, failure: {:?}; {}",
                    other.map(|(_, s)| short(s)),
                    tools_called(&t.events)
                ),
            ),
        });
    }
    Ok(found)
}

/// `hooks.payload_fields`: the payload agy gave the `PreToolUse` hook has
/// the fields of 1.1.7 to 1.3.3 (docs/agy-format.md, "Hook payloads
/// (1.3.3)"), with their types; `None` when the hook never ran.
fn payload_fact(path: &Path) -> Option<Found> {
    const ID: &str = "hooks.payload_fields";
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return Some((ID, false, format!("not JSON ({e}): {:?}", short(&text)))),
    };
    let typed = |key: &str| match key {
        "workspacePaths" => value[key].is_array(),
        "stepIdx" => value[key].is_u64(),
        "toolCall" => value[key]["name"].is_string() && value[key]["args"].is_object(),
        _ => value[key].is_string(),
    };
    let fields = [
        "workspacePaths",
        "transcriptPath",
        "artifactDirectoryPath",
        "conversationId",
        "modelName",
        "stepIdx",
        "toolCall",
    ];
    let missing: Vec<&str> = fields.iter().copied().filter(|k| !typed(k)).collect();
    let keys: Vec<String> = value
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    Some((
        ID,
        missing.is_empty(),
        format!(
            "keys [{}]; missing or mistyped: [{}]; workspacePaths {}",
            keys.join(", "),
            missing.join(", "),
            short(&value["workspacePaths"].to_string())
        ),
    ))
}

async fn slash_flag(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let cfg = s.config(sc);
    let req = s.request(
        "/model is not a command here: answer with the single word READY.",
        &cwd,
    );
    let Some(t) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    let r = &t.result;
    let command = r.agy_result.as_ref().and_then(|a| a.command.as_ref());
    let turns = r.agy_result.as_ref().map_or(0, |a| a.num_turns);
    let ok = succeeded(r) && command.is_none() && turns >= 1 && r.conversation_id.is_some();
    let evidence = format!(
        "conversation {:?}, num_turns {turns}, slash command run: {:?}; {}",
        r.conversation_id.clone().unwrap_or_default(),
        command.map(|c| c.name.clone()),
        result_words(r)
    );
    Ok(vec![("slash.disable_flag", ok, evidence)])
}

async fn write(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let cfg = s.config(sc);
    let mut req = s.request(
        "Create the file NOTES.md in this directory containing the one line: conformance",
        &cwd,
    );
    req.mode = Some(agy_format::agy_args::Mode::AcceptEdits);
    let Some(t) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    let written = t.events.iter().find_map(|e| match e {
        RunEvent::Agy(Event::ToolResult {
            name,
            ok: true,
            summary,
            ..
        }) if name.contains("write") || name.contains("edit") => {
            Some(format!("{name} ok: {}", short(summary)))
        }
        _ => None,
    });
    let on_disk = std::fs::read_to_string(cwd.join("NOTES.md")).ok();
    let ok = written.is_some() && succeeded(&t.result);
    let evidence = format!(
        "{}; NOTES.md on disk: {:?}; {}",
        written.unwrap_or_else(|| format!("no successful write; {}", tools_called(&t.events))),
        on_disk.map(|t| short(&t)),
        result_words(&t.result)
    );
    Ok(vec![("edits.accept_edits_write", ok, evidence)])
}

/// The tool the bridge's MCP server offers in the `mcp` scenario, and what
/// it answers.
const PROBE_TOOL: &str = "pi_probe";
const PROBE_ANSWER: &str = "conformance-probe-42";

async fn mcp(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    use crate::pi::mcp::{ToolBridge, ToolOutcome};
    use crate::pi::provider::PiTool;
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let tool = PiTool {
        name: PROBE_TOOL.into(),
        description: "Returns a probe value.".into(),
        parameters: serde_json::json!({"type": "object", "properties": {}}),
    };
    let Some(mut bridge) = ToolBridge::start(vec![tool]).await.map_err(io_error)? else {
        return Err("the MCP server offered no tool".into());
    };
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let mut calls = std::mem::replace(&mut bridge.calls, tokio::sync::mpsc::channel(1).1);
    let answering = tokio::spawn(async move {
        while let Some(call) = calls.recv().await {
            if let Ok(mut names) = log.lock() {
                names.push(call.name.clone());
            }
            let text = serde_json::json!({"type": "text", "text": PROBE_ANSWER});
            let _ = call.answer(ToolOutcome::from_pi(&[text], false));
        }
    });
    let cfg = s.config(sc);
    let mut req = s.request(
        "Call the pi_probe tool of the MCP server named pi and reply with the value it returns.",
        &cwd,
    );
    req.add_dirs = vec![bridge.dir.path().to_path_buf()];
    let turn = s.turn(&cfg, &req, sc.name).await;
    answering.abort();
    drop(bridge);
    let Some(t) = turn else {
        return Ok(Vec::new());
    };
    let names = seen.lock().map(|n| n.clone()).unwrap_or_default();
    let called = names.iter().any(|n| n == PROBE_TOOL);
    let evidence = format!(
        "calls the server got: [{}]; {}; {}",
        names.join(", "),
        tools_called(&t.events),
        result_words(&t.result)
    );
    Ok(vec![(
        "mcp.bridge_server",
        called && succeeded(&t.result),
        evidence,
    )])
}

async fn subagent(s: &mut Suite, sc: &Scenario) -> Result<Vec<Found>, String> {
    let (cwd, _) = s.workspace(sc.name).map_err(io_error)?;
    let cfg = s.config(sc);
    let req = s.request(
        "Start a subagent to work out what 6*7 is, then reply with its answer.",
        &cwd,
    );
    let Some(t) = s.turn(&cfg, &req, sc.name).await else {
        return Ok(Vec::new());
    };
    let started: Vec<&str> = t
        .events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Agy(Event::Subagent {
                conversation_id, ..
            }) => Some(conversation_id.as_str()),
            _ => None,
        })
        .collect();
    if started.is_empty() {
        return Err(format!(
            "the model started no subagent (not checked); {}",
            tools_called(&t.events)
        ));
    }
    let ended: Vec<(bool, Option<String>)> = t
        .events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Agy(Event::SubagentEnded { ok, answer, .. }) => Some((*ok, answer.clone())),
            _ => None,
        })
        .collect();
    let ok = ended.iter().any(|(ok, _)| *ok);
    let evidence = format!(
        "subagent conversation(s) [{}]; ended: {:?}",
        started.join(", "),
        ended
            .iter()
            .map(|(ok, a)| format!("ok {ok}, answer {:?}", a.as_deref().map(short)))
            .collect::<Vec<_>>()
    );
    Ok(vec![("subagent.child_conversation", ok, evidence)])
}
