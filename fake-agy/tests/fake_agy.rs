//! fake-agy end to end: each test builds a small recording with the library's
//! own types, replays it with a temporary HOME and checks what fake-agy
//! wrote and printed. Nothing here is timing-precise; bounds are generous.

#![forbid(unsafe_code)]

use agy_corpus::recording::{Commit, Gate, Header, Op, Provenance, Recording, SqlValue, Write};
use agy_format::schema;
use agy_format::steps::{
    self, Body, PlannerResponse, RunCommandResult, Step, StepRow, StepStatus, StepType, Subagent,
    ToolCall, UserInput,
};
use agy_format::wire::Encoder;
use assert_cmd::Command;
use rusqlite::Connection;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ROOT: &str = "11111111-2222-4333-8444-555555555555";
const CHILD: &str = "66666666-7777-4888-9999-aaaaaaaaaaaa";

/// Every knob fake-agy reads; tests start from none of them set.
const KNOBS: &[&str] = &[
    "FAKE_AGY_RECORDING",
    "FAKE_AGY_RECORDINGS_DIR",
    "FAKE_AGY_SPEED",
    "AGY_CONVERSATIONS_DIR",
    "FAKE_AGY_MODELS_FORMAT",
    "FAKE_AGY_MODELS_SIGNED_OUT",
    "FAKE_AGY_DB_DELAY_MS",
    "FAKE_AGY_NO_DB",
    "FAKE_AGY_CRASH_AT_COMMIT",
    "FAKE_AGY_CRASH_MODE",
    "FAKE_AGY_GRANDCHILD",
    "FAKE_AGY_GRANDCHILD_PIDFILE",
    "FAKE_AGY_COMMIT_LOG",
    "FAKE_AGY_HANG",
    "FAKE_AGY_NO_SLASH_FLAG",
    "FAKE_AGY_USAGE",
    "FAKE_AGY_STDIN_LOG",
    "FAKE_AGY_BOOT_MS",
    "FAKE_AGY_IGNORE_HOOKS",
    "FAKE_AGY_TOOL_LOG",
    "FAKE_AGY_HOOK_LOG",
    "FAKE_AGY_SYNCHRONOUS",
    "FAKE_AGY_KEEP_CONVERSATIONS",
    "FAKE_AGY_APPLY_EDITS",
];

// ---------------------------------------------------------------------------
// Building recordings.
// ---------------------------------------------------------------------------

fn int(i: i64) -> SqlValue {
    SqlValue::Integer(i)
}

fn text(s: &str) -> SqlValue {
    SqlValue::Text(s.to_string())
}

fn step_write(step: &Step) -> Write {
    let row = step.to_row();
    let mut values = BTreeMap::new();
    values.insert("step_type".to_string(), int(row.step_type));
    values.insert("status".to_string(), int(row.status));
    values.insert(
        "step_payload".to_string(),
        SqlValue::Blob(row.payload.unwrap_or_default()),
    );
    if let Some(m) = row.metadata {
        values.insert("metadata".to_string(), SqlValue::Blob(m));
    }
    Write {
        table: "steps".into(),
        op: Op::Upsert,
        key: BTreeMap::from([("idx".to_string(), int(row.idx))]),
        values,
        stream_error: None,
    }
}

fn user_input(idx: i64, prompt: &str) -> Write {
    step_write(
        &Step::new(idx, StepType::UserInput, StepStatus::Done).with_body(Body::UserInput(
            UserInput {
                text: prompt.into(),
                workspace_uri: Some("file:///tmp/ws".into()),
            },
        )),
    )
}

fn checkpoint(idx: i64, title: &str) -> Write {
    step_write(
        &Step::new(idx, StepType::Checkpoint, StepStatus::Done).with_body(Body::Checkpoint {
            title: title.into(),
        }),
    )
}

fn planner(idx: i64, answer: &str, status: StepStatus) -> Write {
    step_write(
        &Step::new(idx, StepType::PlannerResponse, status).with_body(Body::Planner(
            PlannerResponse {
                text: answer.into(),
                ..Default::default()
            },
        )),
    )
}

/// trajectory_meta and trajectory_metadata_blob, both naming `conv`.
fn meta_writes(conv: &str) -> Vec<Write> {
    let mut blob = Encoder::new();
    blob.string(6, conv).string(7, "file:///tmp/ws");
    vec![
        Write {
            table: "trajectory_meta".into(),
            op: Op::Upsert,
            key: BTreeMap::from([("trajectory_id".to_string(), text(&format!("traj-{conv}")))]),
            values: BTreeMap::from([
                ("cascade_id".to_string(), text(conv)),
                ("trajectory_type".to_string(), int(4)),
                ("source".to_string(), int(17)),
            ]),
            stream_error: None,
        },
        Write {
            table: "trajectory_metadata_blob".into(),
            op: Op::Upsert,
            key: BTreeMap::from([("id".to_string(), text("main"))]),
            values: BTreeMap::from([("data".to_string(), SqlValue::Blob(blob.finish()))]),
            stream_error: None,
        },
    ]
}

fn gen_metadata(idx: i64) -> Write {
    let mut e = Encoder::new();
    e.message(1, |m| {
        m.string(19, "gemini-3.6-flash-medium");
    });
    let data = e.finish();
    Write {
        table: "gen_metadata".into(),
        op: Op::Upsert,
        key: BTreeMap::from([("idx".to_string(), int(idx))]),
        values: BTreeMap::from([
            ("size".to_string(), int(data.len() as i64)),
            ("data".to_string(), SqlValue::Blob(data)),
        ]),
        stream_error: None,
    }
}

fn commit(t_ms: u64, db: &str, writes: Vec<Write>) -> Commit {
    Commit {
        t_ms,
        db: db.into(),
        pre: false,
        gate: None,
        mcp_call: None,
        turn: 0,
        writes,
    }
}

fn header(stdout: &str) -> Header {
    Header {
        format: agy_corpus::recording::FORMAT_VERSION,
        agy_version: "1.2.8".into(),
        provenance: Provenance::Synthesized {
            from: "fake-agy tests".into(),
            follows: None,
        },
        description: String::new(),
        prompt: "say hello".into(),
        model: Some("gemini-3.6-flash-medium".into()),
        workspace: Some("/tmp/ws".into()),
        root_conversation: ROOT.into(),
        stdout: stdout.into(),
        stderr: "warning: this is a recorded warning\n".into(),
        exit_code: 0,
        models_output: "gemini-3.6-flash-medium\nclaude-sonnet-4-6\n".into(),
        version_output: "1.2.8\n".into(),
        schema: Vec::new(),
        outcome: None,
    }
}

/// One answer growing in place over five commits; `span_ms` is the last
/// commit's offset.
fn hello(span_ms: u64) -> Recording {
    let at = |k: u64| span_ms * k / 6;
    let mut first = meta_writes(ROOT);
    first.push(user_input(0, "say hello"));
    first.push(checkpoint(1, "Greeting"));
    Recording {
        header: header("Hello, world!\n"),
        commits: vec![
            commit(0, ROOT, first),
            commit(at(1), ROOT, vec![planner(2, "", StepStatus::Generating)]),
            commit(at(2), ROOT, vec![planner(2, "Hel", StepStatus::Generating)]),
            commit(
                at(3),
                ROOT,
                vec![planner(2, "Hello", StepStatus::Generating)],
            ),
            commit(
                at(4),
                ROOT,
                vec![planner(2, "Hello, wor", StepStatus::Generating)],
            ),
            commit(
                at(5),
                ROOT,
                vec![planner(2, "Hello, world!", StepStatus::Done)],
            ),
            commit(at(6), ROOT, vec![gen_metadata(0)]),
        ],
    }
}

// ---------------------------------------------------------------------------
// Running fake-agy.
// ---------------------------------------------------------------------------

struct Fixture {
    dir: tempfile::TempDir,
    rec: Recording,
    rec_path: PathBuf,
}

impl Fixture {
    fn new(rec: Recording) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        let rec_path = dir.path().join("rec.jsonl");
        rec.save(&rec_path).expect("save recording");
        Fixture { dir, rec, rec_path }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn conv_dir(&self) -> PathBuf {
        self.home().join(".gemini/antigravity-cli/conversations")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A std command with a clean environment of knobs, speed 20.
    fn std_cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("fake-agy"));
        for k in KNOBS {
            c.env_remove(k);
        }
        c.env("HOME", self.home())
            .env("FAKE_AGY_RECORDING", &self.rec_path)
            .env("FAKE_AGY_SPEED", "20")
            .stdin(Stdio::null());
        c
    }

    fn cmd(&self) -> Command {
        Command::from_std(self.std_cmd())
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.cmd().args(args).output().expect("run fake-agy")
    }

    /// Conversation databases written, sorted by path.
    fn dbs(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(self.conv_dir()) else {
            return Vec::new();
        };
        let mut v: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().map(|x| x == "db").unwrap_or(false))
            .collect();
        v.sort();
        v
    }

    fn only_db(&self) -> PathBuf {
        let dbs = self.dbs();
        assert_eq!(dbs.len(), 1, "expected one database, found {dbs:?}");
        dbs[0].clone()
    }
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn is_uuid_v4(s: &str) -> bool {
    uuid::Uuid::parse_str(s)
        .map(|u| u.get_version_num() == 4 && u.hyphenated().to_string() == s)
        .unwrap_or(false)
}

/// Every table's rows, in key order, with `fresh` ids mapped back to the
/// recorded ones (same-length replacement in text and blobs).
type Dump = BTreeMap<String, Vec<Vec<SqlValue>>>;

fn dump(conn: &Connection, back: &[(String, String)]) -> Dump {
    let mut out = BTreeMap::new();
    for (table, keys) in schema::TABLES {
        let order: Vec<String> = keys.iter().map(|k| schema::quote_ident(k)).collect();
        let sql = format!(
            "SELECT * FROM {} ORDER BY {}",
            schema::quote_ident(table),
            order.join(",")
        );
        let mut stmt = conn.prepare(&sql).expect("prepare");
        let n = stmt.column_count();
        let rows: Vec<Vec<SqlValue>> = stmt
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| map_back(SqlValue::from_ref(r.get_ref(i).unwrap()), back))
                    .collect())
            })
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        out.insert(table.to_string(), rows);
    }
    out
}

fn map_back(v: SqlValue, back: &[(String, String)]) -> SqlValue {
    match v {
        SqlValue::Text(mut t) => {
            for (fresh, orig) in back {
                t = t.replace(fresh.as_str(), orig);
            }
            SqlValue::Text(t)
        }
        SqlValue::Blob(mut b) => {
            for (fresh, orig) in back {
                let (f, o) = (fresh.as_bytes(), orig.as_bytes());
                assert_eq!(f.len(), o.len());
                let mut i = 0;
                while i + f.len() <= b.len() {
                    if &b[i..i + f.len()] == f {
                        b[i..i + f.len()].copy_from_slice(o);
                        i += f.len();
                    } else {
                        i += 1;
                    }
                }
            }
            SqlValue::Blob(b)
        }
        other => other,
    }
}

fn open(path: &Path) -> Connection {
    Connection::open(path).expect("open db")
}

fn steps_of(path: &Path) -> Vec<StepRow> {
    let conn = open(path);
    agy_format::database::read_all(&conn, path).expect("read steps")
}

fn text_of(row: &StepRow) -> String {
    match steps::decode(row).body {
        Some(Body::Planner(p)) => p.text,
        other => panic!("step {} is not a planner response: {other:?}", row.idx),
    }
}

fn truncated(rec: &Recording, n: usize) -> Recording {
    Recording {
        header: rec.header.clone(),
        commits: rec.commits[..n].to_vec(),
    }
}

fn read_log(path: &Path) -> Vec<(usize, u128, String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 4, "commit log line {l:?}");
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
                f[3].to_string(),
            )
        })
        .collect()
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn wait_timeout(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

// ---------------------------------------------------------------------------
// Schema, content and output.
// ---------------------------------------------------------------------------

#[test]
fn schema_is_exact_and_wal_and_output_is_the_recordings() {
    let fx = Fixture::new(hello(600));
    let out = fx.run(&["-p", "say hello"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!\n");
    assert_eq!(stderr(&out), "warning: this is a recorded warning\n");

    let db = fx.only_db();
    assert!(is_uuid_v4(&stem(&db)), "{db:?}");
    let conn = open(&db);
    let sql = schema::master_sql(&conn).unwrap();
    let expected: Vec<String> = schema::DDL.iter().map(|s| s.to_string()).collect();
    assert_eq!(sql, expected);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn final_database_equals_the_recordings() {
    let fx = Fixture::new(hello(600));
    let out = fx.run(&["-p", "say hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let db = fx.only_db();
    let fresh = stem(&db);
    assert_ne!(fresh, ROOT, "the root id must be fresh");
    let got = dump(&open(&db), &[(fresh.clone(), ROOT.to_string())]);
    let want = dump(&fx.rec.final_database(ROOT).unwrap(), &[]);
    assert_eq!(got, want);
    // The blob that names the conversation names the new one.
    let blob: Vec<u8> = open(&db)
        .query_row("SELECT data FROM trajectory_metadata_blob", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(String::from_utf8_lossy(&blob).contains(&fresh));
    assert_eq!(text_of(&steps_of(&db)[2]), "Hello, world!");
}

/// A second turn: `pre` holds turn one (idx 0..2), the new steps start at
/// recorded idx 5.
fn second_turn() -> Recording {
    let mut pre_writes = meta_writes(ROOT);
    pre_writes.push(user_input(0, "PRE prompt"));
    pre_writes.push(checkpoint(1, "PRE"));
    pre_writes.push(planner(2, "PRE answer", StepStatus::Done));
    let mut pre = commit(0, ROOT, pre_writes);
    pre.pre = true;
    Recording {
        header: header("Second answer\n"),
        commits: vec![
            pre,
            commit(50, ROOT, vec![user_input(5, "and again")]),
            commit(
                100,
                ROOT,
                vec![planner(6, "Second", StepStatus::Generating)],
            ),
            commit(
                150,
                ROOT,
                vec![planner(6, "Second answer", StepStatus::Done)],
            ),
        ],
    }
}

#[test]
fn resume_appends_and_idx_continues() {
    let first = Fixture::new(hello(300));
    assert!(first.run(&["-p", "say hello"]).status.success());
    let db = first.only_db();
    let id = stem(&db);
    let before = steps_of(&db);
    assert_eq!(before.len(), 3);

    // Same HOME, the second-turn recording.
    let turn2 = second_turn();
    let rec2 = first.path("turn2.jsonl");
    turn2.save(&rec2).unwrap();
    let out = first
        .cmd()
        .env("FAKE_AGY_RECORDING", &rec2)
        .args(["-p", "and again", "--conversation", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Second answer\n");
    assert_eq!(first.dbs(), vec![db.clone()], "no new database on resume");

    let after = steps_of(&db);
    assert_eq!(after.len(), 5);
    assert_eq!(&after[..3], &before[..], "old rows untouched, pre skipped");
    assert_eq!(after[3].idx, 3);
    assert_eq!(after[3].step_type, 14);
    assert_eq!(after[4].idx, 4);
    assert_eq!(text_of(&after[4]), "Second answer");
}

#[test]
fn without_conversation_pre_commits_are_applied() {
    let fx = Fixture::new(second_turn());
    let out = fx.run(&["-p", "and again"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let db = fx.only_db();
    let got = dump(&open(&db), &[(stem(&db), ROOT.to_string())]);
    assert_eq!(got, dump(&fx.rec.final_database(ROOT).unwrap(), &[]));
    let rows = steps_of(&db);
    assert_eq!(
        rows.iter().map(|r| r.idx).collect::<Vec<_>>(),
        vec![0, 1, 2, 5, 6]
    );
}

/// The lines fake-agy printed, as JSON.
fn json_lines(o: &std::process::Output) -> Vec<serde_json::Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// `--conversation` with an id agy does not have is no error (agy 1.1.9,
/// 1.2.7, 1.3.1): a warning, then the turn in a new conversation, without
/// the recording's earlier turns, its steps numbered from 0.
#[test]
fn resume_of_a_missing_conversation_starts_a_new_one() {
    let fx = Fixture::new(second_turn());
    let missing = "00000000-0000-4000-8000-000000000000";
    let out = fx.run(&[
        "-p",
        "and again",
        "--conversation",
        missing,
        "--output-format",
        "stream-json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "warning: conversation \"{missing}\" not found\nwarning: this is a recorded warning\n"
        )
    );
    let lines = json_lines(&out);
    let id = lines[0]["conversation_id"].as_str().expect("init id");
    assert!(is_uuid_v4(id) && id != missing, "{id}");
    let db = fx.only_db();
    assert_eq!(stem(&db), id, "the new conversation, not {missing}");
    // The pre commits' steps are not applied; the turn starts at 0.
    let rows = steps_of(&db);
    assert_eq!(
        rows.iter()
            .map(|r| (r.idx, r.step_type))
            .collect::<Vec<_>>(),
        vec![(0, 14), (1, 15)]
    );
    let updates: Vec<i64> = lines
        .iter()
        .filter_map(|l| l["step_update"]["step_index"].as_i64())
        .collect();
    assert_eq!(updates, vec![0, 1]);
    // The conversation's own rows are there, naming the new id.
    let cascade: String = open(&db)
        .query_row("SELECT cascade_id FROM trajectory_meta", [], |r| r.get(0))
        .expect("trajectory_meta");
    assert_eq!(cascade, id);
    let result = &lines[lines.len() - 1]["result"];
    assert_eq!(result["conversation_id"], id);
    assert_eq!(result["num_turns"], 1);
    assert_eq!(result["response"], "Second answer");
}

/// Tool usage in metadata 9 of a planner step.
fn planner_with_usage(idx: i64, answer: &str, input: u64, output: u64) -> Write {
    let mut step = Step::new(idx, StepType::PlannerResponse, StepStatus::Done).with_body(
        Body::Planner(PlannerResponse {
            text: answer.into(),
            ..Default::default()
        }),
    );
    let meta = step.metadata.get_or_insert_with(Default::default);
    meta.created_at = Some((1_000 + idx as u64, 0));
    meta.usage = Some(steps::Usage {
        input_tokens: input,
        output_tokens: output,
        ..Default::default()
    });
    step_write(&step)
}

/// A user turn at `idx` with a timestamp `idx` seconds in.
fn timed_user_input(idx: i64, prompt: &str) -> Write {
    let mut step = Step::new(idx, StepType::UserInput, StepStatus::Done).with_body(
        Body::UserInput(UserInput {
            text: prompt.into(),
            workspace_uri: None,
        }),
    );
    step.metadata
        .get_or_insert_with(Default::default)
        .created_at = Some((1_000 + idx as u64, 0));
    step_write(&step)
}

/// One turn: the prompt and an answer with usage, at `t_ms`.
fn one_turn(idx: i64, input: u64) -> Recording {
    let mut first = meta_writes(ROOT);
    first.push(timed_user_input(idx, "count"));
    let mut h = header("counted\n");
    h.stderr = String::new();
    Recording {
        header: h,
        commits: vec![
            commit(0, ROOT, first),
            commit(
                500,
                ROOT,
                vec![planner_with_usage(idx + 2, "counted", input, 10)],
            ),
        ],
    }
}

/// A resumed conversation's result counts every turn, read from what the
/// database holds, so resuming again and again accumulates.
#[test]
fn a_resumed_result_counts_the_whole_conversation() {
    let fx = Fixture::new(one_turn(0, 100));
    let result = |o: &std::process::Output| json_lines(o).pop().expect("result")["result"].clone();
    let first = fx.run(&["-p", "count", "--output-format", "stream-json"]);
    let r1 = result(&first);
    assert_eq!(r1["num_turns"], 1);
    assert_eq!(r1["usage"]["input_tokens"], 100);
    assert_eq!(r1["duration_seconds"], 0.5);
    let id = stem(&fx.only_db());
    for (turn, want_input) in [(2, 200), (3, 300)] {
        let out = fx.run(&[
            "-p",
            "count",
            "--conversation",
            &id,
            "--output-format",
            "stream-json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let r = result(&out);
        assert_eq!(r["conversation_id"], id.as_str());
        assert_eq!(r["num_turns"], turn);
        assert_eq!(r["usage"]["input_tokens"], want_input);
        assert_eq!(r["usage"]["total_tokens"], want_input + 10 * turn);
        // Each earlier turn: 2 s from its prompt to its answer (their
        // timestamps), plus this run's 0.5 s.
        assert_eq!(r["duration_seconds"], 2.0 * (turn - 1) as f64 + 0.5);
        // Per-call usage stays per call.
        let call = json_lines(&out)
            .into_iter()
            .find_map(|l| l["step_update"].get("usage").cloned())
            .expect("a call's usage");
        assert_eq!(call["input_tokens"], 100);
    }
}

#[test]
fn a_killed_recording_prints_no_result_and_exits_with_its_code_or_sigkill() {
    let mut rec = one_turn(0, 100);
    rec.commits.pop();
    rec.header.exit_code = 1;
    rec.header.stdout = String::new();
    rec.header.outcome = Some(agy_corpus::recording::Outcome {
        killed: true,
        ..Default::default()
    });
    let fx = Fixture::new(rec);
    let out = fx.run(&["-p", "count", "--output-format", "stream-json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "");
    let events: Vec<String> = json_lines(&out)
        .iter()
        .map(|l| l["event"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(events, vec!["init", "step_update"]);
    let text = fx.run(&["-p", "count"]);
    assert_eq!(
        (text.status.code(), stdout(&text)),
        (Some(1), String::new())
    );
    let killed = fx
        .cmd()
        .env("FAKE_AGY_CRASH_MODE", "sigkill")
        .args(["-p", "count", "--output-format", "stream-json"])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9));
    assert_eq!(json_lines(&killed).len(), 2, "init and the prompt's step");
}

/// A prompt that starts with `/` is agy's slash command unless
/// `--disable-slash-commands`; a leading blank keeps it text.
#[test]
fn slash_commands_run_unless_disabled() {
    let fx = Fixture::new(hello(100));
    let model = fx.run(&["-p", "/model", "--output-format", "stream-json"]);
    assert_eq!(model.status.code(), Some(0), "{}", stderr(&model));
    assert!(fx.dbs().is_empty(), "a slash command writes no database");
    let lines = json_lines(&model);
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        serde_json::json!({"event": "command_result", "command": {"name": "model", "data": {
            "id": "gemini-3.6-flash-medium", "label": "Gemini 3.6 Flash (Medium)",
            "effort": "medium", "is_default": false}}})
    );
    assert_eq!(lines[1]["result"]["conversation_id"], "");
    assert_eq!(lines[1]["result"]["num_turns"], 0);
    assert_eq!(
        lines[1]["result"]["response"],
        "gemini-3.6-flash-medium\tGemini 3.6 Flash (Medium)\n"
    );
    for (prompt, message) in [
        (
            "/clear",
            "error: slash command \"/clear\" is not supported in print mode\n",
        ),
        (
            "/frobnicate now",
            "error: unknown slash command \"/frobnicate\"\n",
        ),
    ] {
        let out = fx.run(&["-p", prompt, "--output-format", "stream-json"]);
        assert_eq!(out.status.code(), Some(2), "{prompt}");
        assert_eq!(stderr(&out), message);
        assert_eq!(stdout(&out), "");
    }
    assert!(fx.dbs().is_empty());
    // Disabled, or behind a blank: an ordinary prompt, replayed.
    for args in [
        &["-p", "/model", "--disable-slash-commands"][..],
        &["-p", " /model"][..],
    ] {
        let out = fx.run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(stdout(&out), "Hello, world!\n", "{args:?}");
    }
    assert_eq!(fx.dbs().len(), 2);
}

/// An agy before 1.2.14 (`FAKE_AGY_NO_SLASH_FLAG=1`) neither lists nor
/// takes `--disable-slash-commands`.
#[test]
fn an_older_agy_lacks_the_slash_flag() {
    let fx = Fixture::new(hello(100));
    let help = fx.run(&["--help"]);
    assert!(stdout(&help).contains("--disable-slash-commands"));
    let old = |args: &[&str]| {
        fx.cmd()
            .env("FAKE_AGY_NO_SLASH_FLAG", "1")
            .args(args)
            .output()
            .unwrap()
    };
    let help = old(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(!stdout(&help).contains("--disable-slash-commands"));
    let out = old(&["-p", "/model", "--disable-slash-commands"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("Error: unknown flag: --disable-slash-commands\n\nUsage:"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("--disable-slash-commands  "));
    assert!(fx.dbs().is_empty());
}

#[test]
fn continue_flag_resumes_the_latest_conversation() {
    let fx = Fixture::new(hello(100));
    assert!(fx.run(&["-p", "say hello"]).status.success());
    let db = fx.only_db();
    let turn2 = fx.path("turn2.jsonl");
    second_turn().save(&turn2).unwrap();
    let out = fx
        .cmd()
        .env("FAKE_AGY_RECORDING", &turn2)
        .args(["-c", "-p", "again"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fx.dbs(), vec![db.clone()]);
    assert_eq!(steps_of(&db).len(), 5);
}

#[test]
fn conversations_dir_override() {
    let fx = Fixture::new(hello(100));
    let dir = fx.path("convs");
    let out = fx
        .cmd()
        .env("AGY_CONVERSATIONS_DIR", &dir)
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(fx.dbs().is_empty(), "nothing under HOME");
    let n = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().map(|x| x == "db").unwrap_or(false))
        .count();
    assert_eq!(n, 1);
}

#[test]
fn stream_json_prints_init_step_updates_and_result() {
    let fx = Fixture::new(hello(300));
    let out = fx.run(&["-p", "say hello", "--output-format", "stream-json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let init = &lines[0];
    assert_eq!(init["event"], "init");
    let id = init["conversation_id"].as_str().unwrap();
    assert!(is_uuid_v4(id));
    assert!(fx.conv_dir().join(format!("{id}.db")).is_file());
    assert_eq!(init["init"]["model"], "gemini-3.6-flash-medium");
    assert_eq!(init["init"]["permission_mode"], "request-review");
    assert!(init["init"]["tools"].as_array().unwrap().len() >= 50);

    // agy 1.2.x: the answer comes whole on its DONE update; the growing
    // (GENERATING) commits print nothing.
    let updates: Vec<(i64, &str, &str, Option<&str>)> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| {
            assert_eq!(l["event"], "step_update");
            let u = &l["step_update"];
            assert_eq!(u["conversation_id"], id);
            (
                u["step_index"].as_i64().unwrap(),
                u["step_type"].as_str().unwrap(),
                u["state"].as_str().unwrap(),
                u["text_delta"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        updates,
        vec![
            (0, "user_input", "DONE", None),
            (1, "checkpoint", "DONE", None),
            (2, "agent_response", "DONE", Some("Hello, world!")),
        ]
    );
    let result = &lines.last().unwrap()["result"];
    assert_eq!(lines.last().unwrap()["event"], "result");
    assert_eq!(result["status"], "SUCCESS");
    assert_eq!(result["response"], "Hello, world!");
    assert_eq!(result["conversation_id"], id);
    assert_eq!(result["num_turns"], 1);
}

#[test]
fn skip_permissions_is_announced_as_always_proceed() {
    let fx = Fixture::new(hello(100));
    let out = fx.run(&[
        "-p",
        "x",
        "--output-format",
        "stream-json",
        "--dangerously-skip-permissions",
        "--model",
        "claude-sonnet-4-6",
    ]);
    let first: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(first["init"]["permission_mode"], "always-proceed");
    assert_eq!(first["init"]["model"], "claude-sonnet-4-6");
}

#[test]
fn json_output_is_one_result_object() {
    let mut rec = hello(100);
    rec.header.exit_code = 1;
    let fx = Fixture::new(rec);
    let out = fx.run(&["-p", "x", "--output-format=json"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert!(v.get("event").is_none(), "json mode prints the bare result");
    assert_eq!(v["status"], "ERROR");
    assert_eq!(v["response"], "Hello, world!");
    assert_eq!(v["conversation_id"].as_str().unwrap(), stem(&fx.only_db()));
}

#[test]
fn the_recorded_outcome_shapes_the_result() {
    let mut rec = hello(100);
    rec.header.exit_code = 3;
    rec.header.stderr = "error: out of quota\n".into();
    let usage = agy_format::stream_json::Usage {
        input_tokens: 7,
        output_tokens: 2,
        thinking_tokens: 1,
        cache_read_tokens: 5,
        total_tokens: 9,
    };
    rec.header.outcome = Some(agy_corpus::recording::Outcome {
        status: "ERROR".into(),
        error: Some("out of quota".into()),
        usage: Some(usage),
        denied_actions: vec![agy_format::stream_json::DeniedAction {
            action: "file".into(),
            display_name: "WriteToFile".into(),
        }],
        ..Default::default()
    });
    let fx = Fixture::new(rec);
    let out = fx.run(&["-p", "x", "--output-format", "stream-json"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr(&out), "error: out of quota\n");
    let last: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    let r = &last["result"];
    assert_eq!(r["status"], "ERROR");
    assert_eq!(r["error"], "out of quota");
    assert_eq!(r["usage"]["cache_read_tokens"], 5);
    assert_eq!(r["denied_actions"][0]["display_name"], "WriteToFile");
    assert!(fx.only_db().is_file(), "the turn ran");
}

#[test]
fn a_failure_before_the_conversation_creates_nothing() {
    let mut rec = hello(100);
    rec.commits.clear();
    rec.header.exit_code = 1;
    rec.header.stdout = String::new();
    rec.header.stderr = "error: invalid model selection\n".into();
    rec.header.outcome = Some(agy_corpus::recording::Outcome {
        status: "ERROR".into(),
        error: Some("invalid model selection".into()),
        before_conversation: true,
        ..Default::default()
    });
    let fx = Fixture::new(rec);
    let out = fx.run(&["-p", "x", "--output-format", "stream-json"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["event"], "result");
    assert_eq!(v["result"]["conversation_id"], "");
    assert_eq!(v["result"]["num_turns"], 0);
    assert!(fx.dbs().is_empty());
}

#[test]
fn never_reads_stdin() {
    let fx = Fixture::new(hello(100));
    let mut child = fx
        .std_cmd()
        .args(["-p", "x"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _keep_open = child.stdin.take();
    let status = wait_timeout(&mut child, Duration::from_secs(20));
    if status.is_none() {
        let _ = child.kill();
    }
    assert!(status.expect("fake-agy waited on stdin").success());
}

// ---------------------------------------------------------------------------
// Timing: order and spread, print timeout, permission gate.
// ---------------------------------------------------------------------------

#[test]
fn commit_log_has_every_commit_in_order_spread_over_time() {
    let fx = Fixture::new(hello(1200));
    let log = fx.path("commits.log");
    let out = fx
        .cmd()
        .env("FAKE_AGY_COMMIT_LOG", &log)
        .env("FAKE_AGY_SPEED", "4")
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stem(&fx.only_db());
    let lines = read_log(&log);
    assert_eq!(lines.len(), fx.rec.commits.len());
    let numbers: Vec<usize> = lines.iter().map(|l| l.0).collect();
    assert_eq!(numbers, (1..=fx.rec.commits.len()).collect::<Vec<_>>());
    assert!(lines.iter().all(|l| l.2 == id));
    let idx: Vec<&str> = lines.iter().map(|l| l.3.as_str()).collect();
    assert_eq!(idx, vec!["0,1", "2", "2", "2", "2", "2", "-"]);
    for w in lines.windows(2) {
        assert!(w[0].1 <= w[1].1, "timestamps go backwards: {lines:?}");
    }
    // 1200 ms at speed 4 = 300 ms; demand half of it.
    let spread = lines.last().unwrap().1 - lines[0].1;
    assert!(spread >= 150_000_000, "spread only {spread} ns");
}

#[test]
fn speed_scales_the_replay() {
    // 4 s recorded at speed 40 = 100 ms: must not take anywhere near 4 s.
    let fx = Fixture::new(hello(4000));
    let t = Instant::now();
    let out = fx
        .cmd()
        .env("FAKE_AGY_SPEED", "40")
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

/// Answer reaches "Hello" at 300 ms, and finishes only at 30 s.
fn slow_hello() -> Recording {
    let mut rec = hello(600);
    rec.commits.truncate(4);
    rec.commits.push(commit(
        30_000,
        ROOT,
        vec![planner(2, "Hello, world!", StepStatus::Done)],
    ));
    rec
}

#[test]
fn print_timeout_returns_partial_output() {
    let fx = Fixture::new(slow_hello());
    let t = Instant::now();
    let out = fx
        .cmd()
        .env("FAKE_AGY_SPEED", "1")
        .args(["-p", "x", "--print-timeout", "1s"])
        .output()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(15));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stderr(&out),
        "[agy] print timeout after 1s with turn in progress; returning partial output\n"
    );
    assert_eq!(stdout(&out), "Hello\n");
    let rows = steps_of(&fx.only_db());
    assert_eq!(text_of(&rows[2]), "Hello", "the last commit never happened");
}

#[test]
fn print_timeout_is_formatted_like_go() {
    let fx = Fixture::new(slow_hello());
    let out = fx
        .cmd()
        .env("FAKE_AGY_SPEED", "1")
        .args([
            "-p",
            "x",
            "--print-timeout=1500ms",
            "--output-format",
            "stream-json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).starts_with("[agy] print timeout after 1.5s with turn in progress"));
    let last: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "result");
    assert_eq!(last["result"]["status"], "SUCCESS");
    assert_eq!(last["result"]["response"], "Hello");
}

/// A run_command that needs permission at commit 3 (idx 3 WAITING), in an
/// agy `version`.
fn gated_in(version: &str) -> Recording {
    let mut rec = gated();
    rec.header.agy_version = version.into();
    rec.header.version_output = format!("{version}\n");
    rec
}

/// A run_command that needs permission at commit 3 (idx 3 WAITING), in an
/// agy before 1.1.7 (which stalls there in print mode).
fn gated() -> Recording {
    let call = ToolCall {
        id: "call-1".into(),
        name: "run_command".into(),
        arguments: r#"{"CommandLine":"ls"}"#.into(),
    };
    let mut first = meta_writes(ROOT);
    first.push(user_input(0, "list files"));
    first.push(checkpoint(1, "Listing"));
    let mut gate = commit(
        200,
        ROOT,
        vec![step_write(
            &Step::new(3, StepType::RunCommand, StepStatus::Waiting).with_tool_call(call.clone()),
        )],
    );
    gate.gate = Some(Gate::Permission);
    let mut header = header("Done.\n");
    header.agy_version = "1.1.4".into();
    header.version_output = "1.1.4\n".into();
    Recording {
        header,
        commits: vec![
            commit(0, ROOT, first),
            commit(
                100,
                ROOT,
                vec![planner(2, "Let me run it", StepStatus::Done)],
            ),
            gate,
            commit(
                300,
                ROOT,
                vec![step_write(
                    &Step::new(3, StepType::RunCommand, StepStatus::Done)
                        .with_tool_call(call)
                        .with_body(Body::RunCommand(RunCommandResult {
                            cwd: Some("/tmp/ws".into()),
                            exit_code: Some(0),
                            output: "a\nb\n".into(),
                            command: Some("ls".into()),
                        })),
                )],
            ),
            commit(400, ROOT, vec![planner(4, "Done.", StepStatus::Done)]),
        ],
    }
}

#[test]
fn permission_gate_stalls_until_the_print_timeout() {
    let fx = Fixture::new(gated());
    let t = Instant::now();
    let out = fx.run(&["-p", "x", "--print-timeout", "1s"]);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stderr(&out),
        "[agy] print timeout after 1s with turn in progress; returning partial output\n"
    );
    assert_eq!(stdout(&out), "Let me run it\n");
    let rows = steps_of(&fx.only_db());
    assert_eq!(rows.len(), 4, "stalled at the gate");
    assert_eq!(rows[3].status, 9, "the gate commit was applied");
}

#[test]
fn permission_gate_is_skipped_with_the_flag() {
    let fx = Fixture::new(gated());
    let out = fx.run(&[
        "-p",
        "x",
        "--print-timeout",
        "1s",
        "--dangerously-skip-permissions",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "Done.\n");
    let db = fx.only_db();
    let got = dump(&open(&db), &[(stem(&db), ROOT.to_string())]);
    assert_eq!(got, dump(&fx.rec.final_database(ROOT).unwrap(), &[]));
    assert_eq!(steps_of(&db)[3].status, 3);
}

#[test]
fn a_later_agy_auto_denies_at_the_gate_instead_of_stalling() {
    for (version, status, stderr_start) in [
        (
            "1.1.7",
            "CANCELED",
            "jetski: no output produced — a tool required the \"command\"",
        ),
        ("1.2.17", "SUCCESS", ""),
    ] {
        let fx = Fixture::new(gated_in(version));
        let t = Instant::now();
        let out = fx.run(&["-p", "x", "--output-format", "stream-json"]);
        // The default print timeout is 5 minutes: ending well before it
        // means no stall.
        assert!(t.elapsed() < Duration::from_secs(60), "{version}");
        assert_eq!(out.status.code(), Some(0), "{version}");
        assert!(
            stderr(&out).starts_with(stderr_start),
            "{version}: {}",
            stderr(&out)
        );
        let last: serde_json::Value =
            serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
        assert_eq!(last["result"]["status"], status, "{version}");
        let rows = steps_of(&fx.only_db());
        assert_eq!(rows.len(), 4, "{version}: the permitted path never ran");
        if status == "SUCCESS" {
            assert_eq!(
                last["result"]["denied_actions"],
                serde_json::json!([{"action": "command", "display_name": "RunCommand"}])
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Subagents.
// ---------------------------------------------------------------------------

fn with_subagent() -> Recording {
    let mut first = meta_writes(ROOT);
    first.push(user_input(0, "ask a helper"));
    first.push(checkpoint(1, "Delegating"));
    let invoke = |status| {
        step_write(
            &Step::new(2, StepType::InvokeSubagent, status).with_body(Body::Subagent(Subagent {
                child_conversation_id: CHILD.into(),
                role: Some("helper".into()),
                ..Default::default()
            })),
        )
    };
    let mut child_first = meta_writes(CHILD);
    child_first.push(user_input(0, "say hi"));
    let mut commits = vec![
        commit(0, ROOT, first),
        commit(100, ROOT, vec![invoke(StepStatus::Running)]),
        commit(150, CHILD, child_first),
    ];
    let words = ["hi", "hi from", "hi from the", "hi from the helper"];
    for (k, w) in words.iter().enumerate() {
        let status = if k + 1 == words.len() {
            StepStatus::Done
        } else {
            StepStatus::Generating
        };
        commits.push(commit(
            300 + 300 * k as u64,
            CHILD,
            vec![planner(1, w, status)],
        ));
        // Root activity interleaved with the child's.
        if k == 1 {
            commits.push(commit(700, ROOT, vec![gen_metadata(0)]));
        }
    }
    commits.push(commit(1400, ROOT, vec![invoke(StepStatus::Done)]));
    commits.push(commit(
        1500,
        ROOT,
        vec![planner(3, "The helper said hi", StepStatus::Done)],
    ));
    Recording {
        header: header("The helper said hi\n"),
        commits,
    }
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(1)?.parse().ok()
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
                .filter(|p| parent_of(*p) == Some(pid))
                .collect()
        })
        .unwrap_or_default()
}

fn open_dbs(pid: u32) -> BTreeSet<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|p| p.extension().map(|x| x == "db").unwrap_or(false))
                .map(|p| stem(&p))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn subagent_commits_go_to_a_second_database_written_by_a_child_process() {
    let fx = Fixture::new(with_subagent());
    let log = fx.path("commits.log");
    let mut child = fx
        .std_cmd()
        .env("FAKE_AGY_SPEED", "1")
        .env("FAKE_AGY_COMMIT_LOG", &log)
        .args(["-p", "x", "--output-format", "stream-json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut parent_dbs = BTreeSet::new();
    let mut child_dbs = BTreeSet::new();
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        parent_dbs.extend(open_dbs(pid));
        for c in children_of(pid) {
            child_dbs.extend(open_dbs(c));
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let first: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    let root = first["conversation_id"].as_str().unwrap().to_string();

    let dbs = fx.dbs();
    assert_eq!(dbs.len(), 2, "{dbs:?}");
    let sub = dbs.iter().map(|p| stem(p)).find(|s| *s != root).unwrap();
    assert!(is_uuid_v4(&sub) && sub != CHILD);

    assert_eq!(
        parent_dbs,
        BTreeSet::from([root.clone()]),
        "parent holds only the root db"
    );
    // (A child briefly shares the parent's descriptors between fork and
    // exec, so only require that a child held the subagent's database.)
    assert!(
        child_dbs.contains(&sub),
        "no child process held the subagent db: {child_dbs:?}"
    );

    let back = [
        (root.clone(), ROOT.to_string()),
        (sub.clone(), CHILD.to_string()),
    ];
    let root_db = fx.conv_dir().join(format!("{root}.db"));
    let sub_db = fx.conv_dir().join(format!("{sub}.db"));
    assert_eq!(
        dump(&open(&root_db), &back),
        dump(&fx.rec.final_database(ROOT).unwrap(), &[])
    );
    assert_eq!(
        dump(&open(&sub_db), &back),
        dump(&fx.rec.final_database(CHILD).unwrap(), &[])
    );
    let sub_schema = schema::master_sql(&open(&sub_db)).unwrap();
    assert_eq!(sub_schema.len(), schema::DDL.len());
    // The root's invoke_subagent step names the new child id.
    match steps::decode(&steps_of(&root_db)[2]).body {
        Some(Body::Subagent(s)) => assert_eq!(s.child_conversation_id, sub),
        other => panic!("{other:?}"),
    }
    // Commits in recorded order, each naming its database.
    let lines = read_log(&log);
    let dbs_in_order: Vec<String> = lines.iter().map(|l| l.2.clone()).collect();
    let want: Vec<String> = fx
        .rec
        .commits
        .iter()
        .map(|c| {
            if c.db == ROOT {
                root.clone()
            } else {
                sub.clone()
            }
        })
        .collect();
    assert_eq!(dbs_in_order, want);
    assert_eq!(text_of(&steps_of(&sub_db)[1]), "hi from the helper");
    assert!(children_of(pid).is_empty());
}

// ---------------------------------------------------------------------------
// Fault knobs.
// ---------------------------------------------------------------------------

fn first_commit_delay(fx: &Fixture, delay_ms: Option<u64>) -> Duration {
    let log = fx.path(&format!("delay-{delay_ms:?}.log"));
    let mut c = fx.cmd();
    c.env("FAKE_AGY_COMMIT_LOG", &log).args(["-p", "x"]);
    if let Some(d) = delay_ms {
        c.env("FAKE_AGY_DB_DELAY_MS", d.to_string());
    }
    let spawned = now_ns();
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let first = read_log(&log)[0].1;
    Duration::from_nanos((first - spawned) as u64)
}

/// `FAKE_AGY_SYNCHRONOUS` takes SQLite's modes (any case) and refuses
/// anything else as a configuration error, naming the choices.
#[test]
fn synchronous_takes_sqlites_modes_and_refuses_others() {
    let fx = Fixture::new(hello(100));
    for mode in ["FULL", "normal", "OFF", "extra"] {
        let out = fx
            .cmd()
            .env("FAKE_AGY_SYNCHRONOUS", mode)
            .args(["-p", "x"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
    }
    let out = fx
        .cmd()
        .env("FAKE_AGY_SYNCHRONOUS", "sometimes")
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("expected FULL, NORMAL, OFF or EXTRA"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn db_delay_creates_the_database_later() {
    let fx = Fixture::new(hello(100));
    let delayed = first_commit_delay(&fx, Some(1000));
    let prompt = first_commit_delay(&fx, None);
    assert!(delayed >= Duration::from_millis(1000), "{delayed:?}");
    assert!(prompt < delayed, "{prompt:?} vs {delayed:?}");
}

#[test]
fn db_delay_is_observable_while_running() {
    let fx = Fixture::new(hello(100));
    let log = fx.path("log");
    let mut child = fx
        .std_cmd()
        .env("FAKE_AGY_DB_DELAY_MS", "1500")
        .env("FAKE_AGY_COMMIT_LOG", &log)
        .args(["-p", "x"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The commit log is opened (created) just before the delay, and the
    // delay is the one sleep between it and the database: with the log
    // there and fake-agy asleep it is in the delay, where without one the
    // database would already be made.
    assert!(
        eventually(Duration::from_secs(20), || log.exists()
            && state_of(child.id()) == Some('S')),
        "fake-agy never reached its delay"
    );
    assert!(
        fx.dbs().is_empty(),
        "database exists before the delay ended"
    );
    assert!(wait_timeout(&mut child, Duration::from_secs(20))
        .unwrap()
        .success());
    assert_eq!(fx.dbs().len(), 1);
}

#[test]
fn no_db_never_creates_a_database() {
    let fx = Fixture::new(hello(600));
    let log = fx.path("log");
    let out = fx
        .cmd()
        .env("FAKE_AGY_NO_DB", "1")
        .env("FAKE_AGY_COMMIT_LOG", &log)
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "Hello, world!\n");
    assert!(fx.dbs().is_empty());
    assert!(read_log(&log).is_empty());
}

#[test]
fn crash_at_commit_exits_with_the_default_code() {
    let fx = Fixture::new(hello(600));
    let out = fx
        .cmd()
        .env("FAKE_AGY_CRASH_AT_COMMIT", "3")
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("simulated crash after commit 3"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
    let db = fx.only_db();
    let got = dump(&open(&db), &[(stem(&db), ROOT.to_string())]);
    assert_eq!(
        got,
        dump(&truncated(&fx.rec, 3).final_database(ROOT).unwrap(), &[])
    );
    assert_eq!(text_of(&steps_of(&db)[2]), "Hel");
}

#[test]
fn crash_at_commit_with_a_chosen_exit_code() {
    let fx = Fixture::new(hello(600));
    let out = fx
        .cmd()
        .env("FAKE_AGY_CRASH_AT_COMMIT", "1")
        .env("FAKE_AGY_CRASH_MODE", "exit:42")
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(42));
    let rows = steps_of(&fx.only_db());
    assert_eq!(rows.len(), 2, "only the first commit");
}

#[test]
fn crash_by_sigkill() {
    use std::os::unix::process::ExitStatusExt;
    let fx = Fixture::new(hello(600));
    let out = fx
        .cmd()
        .env("FAKE_AGY_CRASH_AT_COMMIT", "2")
        .env("FAKE_AGY_CRASH_MODE", "sigkill")
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(9), "{:?}", out.status);
    let db = fx.only_db();
    let got = dump(&open(&db), &[(stem(&db), ROOT.to_string())]);
    assert_eq!(
        got,
        dump(&truncated(&fx.rec, 2).final_database(ROOT).unwrap(), &[])
    );
}

#[test]
fn crash_in_a_subagent_commit_leaves_both_databases_consistent() {
    let fx = Fixture::new(with_subagent());
    // Commit 3 is the child's first.
    let out = fx
        .cmd()
        .env("FAKE_AGY_SPEED", "50")
        .env("FAKE_AGY_CRASH_AT_COMMIT", "3")
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let dbs = fx.dbs();
    assert_eq!(dbs.len(), 2);
    let total: usize = dbs.iter().map(|d| steps_of(d).len()).sum();
    assert_eq!(total, 3 + 1, "root idx 0..2 and the child's idx 0");
}

/// A process's state letter from `/proc/PID/stat` (`S`: asleep).
fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether `pid`'s main thread is blocked in a sleep (`std::thread::sleep`:
/// `nanosleep` or `clock_nanosleep`), by `/proc/PID/syscall`.
fn in_a_sleep_call(pid: u32) -> bool {
    let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let nr = call.split_whitespace().next().and_then(|n| n.parse().ok());
    [nix::libc::SYS_nanosleep, nix::libc::SYS_clock_nanosleep]
        .iter()
        .any(|s| Some(*s) == nr)
}

/// Poll `holds` until it is true or `limit` passes; whether it became true.
fn eventually(limit: Duration, mut holds: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while !holds() {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn alive(pid: i32) -> bool {
    let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err();
    if gone {
        return false;
    }
    // A zombie waiting for its reaper is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

#[test]
fn grandchild_survives_until_its_process_group_is_killed() {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::{getpgid, Pid};
    use std::os::unix::process::CommandExt;

    let fx = Fixture::new(hello(100));
    let pidfile = fx.path("grandchild.pid");
    let mut cmd = fx.std_cmd();
    cmd.env("FAKE_AGY_GRANDCHILD", "1")
        .env("FAKE_AGY_GRANDCHILD_PIDFILE", &pidfile)
        .args(["-p", "x"])
        .process_group(0);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let leader = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!\n");

    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid), "grandchild {pid} died with fake-agy");
    let pgid = getpgid(Some(Pid::from_raw(pid))).unwrap();
    assert_eq!(
        pgid.as_raw(),
        leader,
        "grandchild is in fake-agy's process group"
    );

    killpg(pgid, Signal::SIGKILL).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(pid),
        "grandchild survived its process group being killed"
    );
}

#[test]
fn hang_keeps_running_after_the_last_commit() {
    let fx = Fixture::new(hello(100));
    let log = fx.path("log");
    let mut child = fx
        .std_cmd()
        .env("FAKE_AGY_HANG", "1")
        .env("FAKE_AGY_COMMIT_LOG", &log)
        .args(["-p", "x"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // After its last commit fake-agy makes no sleep call but FAKE_AGY_HANG's
    // (it waits for its writers, prints and exits): in a sleep with every
    // commit made, it hangs where it would otherwise have exited.
    let ended_its_run =
        || read_log(&log).len() == fx.rec.commits.len() && in_a_sleep_call(child.id());
    let asleep = eventually(Duration::from_secs(20), ended_its_run);
    let still = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(asleep, "fake-agy never slept after its last commit");
    assert!(still, "fake-agy exited despite FAKE_AGY_HANG");
    assert_eq!(read_log(&log).len(), fx.rec.commits.len());
}

// ---------------------------------------------------------------------------
// Command line.
// ---------------------------------------------------------------------------

#[test]
fn usage_errors_exit_2() {
    let fx = Fixture::new(hello(100));
    for args in [
        vec!["--bogus"],
        vec!["-p", "x", "--no-such-flag"],
        vec!["-p"],
        vec![],
        vec!["-p", "x", "stray"],
        vec!["-p", "x", "--output-format", "yaml"],
        vec!["-p", "x", "--print-timeout", "soon"],
    ] {
        let out = fx.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stdout(&out).is_empty(), "{args:?}");
        assert!(
            stderr(&out).contains("Usage:"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(fx.dbs().is_empty());
    let out = fx.run(&["--bogus"]);
    assert!(stderr(&out).contains("unknown flag: --bogus"));
}

#[test]
fn every_documented_flag_is_accepted() {
    let fx = Fixture::new(hello(100));
    let out = fx.run(&[
        "--print",
        "x",
        "--model",
        "Claude Sonnet 4.6",
        "--effort",
        "low",
        "--mode",
        "plan",
        "--add-dir",
        "/a",
        "--add-dir",
        "/b",
        "--print-timeout",
        "5m0s",
        "--sandbox",
        "--output-format",
        "text",
        "--input-format",
        "text",
        "--agent",
        "a",
        "--log-file",
        "/dev/null",
        "--project",
        "p",
        "--new-project",
        "--json-schema",
        "{}",
        "--disable-slash-commands",
        "--dangerously-skip-permissions",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!\n");
}

#[test]
fn missing_recording_is_a_clear_error() {
    let fx = Fixture::new(hello(100));
    let out = fx
        .cmd()
        .env("FAKE_AGY_RECORDING", "no-such-recording")
        .env("FAKE_AGY_RECORDINGS_DIR", fx.dir.path())
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no recording named \"no-such-recording\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn recordings_are_found_by_name() {
    let fx = Fixture::new(hello(100));
    let out = fx
        .cmd()
        .env("FAKE_AGY_RECORDING", "rec")
        .env("FAKE_AGY_RECORDINGS_DIR", fx.dir.path())
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "1.2.8\n");
}

#[test]
fn version_and_models_print_the_recordings() {
    let fx = Fixture::new(hello(100));
    let out = fx.run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "1.2.8\n");
    let out = fx.run(&["models"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "gemini-3.6-flash-medium\nclaude-sonnet-4-6\n");
    assert!(fx.dbs().is_empty());
}

#[test]
fn models_in_each_format_and_signed_out() {
    let fx = Fixture::new(hello(100));
    let models = |format: &str| {
        let out = fx
            .cmd()
            .env("FAKE_AGY_MODELS_FORMAT", format)
            .arg("models")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        (stdout(&out), stderr(&out))
    };
    // Format 1, as agy 1.0.10: labels only, nothing on stderr.
    let (one, err) = models("1");
    assert_eq!(err, "");
    assert_eq!(one.lines().count(), 8, "{one}");
    assert_eq!(one.lines().next(), Some("Gemini 3.5 Flash (Low)"));
    assert!(one.lines().any(|l| l == "Claude Sonnet 4.6 (Thinking)"));
    assert!(one
        .lines()
        .all(|l| !l.contains('\t') && !l.starts_with("gemini-")));
    // Format 2: bare slugs.
    let (two, err) = models("2");
    assert_eq!(err, "");
    for slug in [
        "gemini-3.7-flash-medium",
        "gemini-3.1-pro-high",
        "claude-sonnet-4-6",
        "claude-opus-4-6-thinking",
        "gpt-oss-120b-medium",
    ] {
        assert!(two.lines().any(|l| l == slug), "{slug} in {two}");
    }
    assert!(two.lines().all(|l| !l.contains(' ')));
    // Format 3: the progress line on stderr, `slug<TAB>label` on stdout.
    let (three, err) = models("3");
    assert_eq!(err, "Fetching available models...\n");
    let lines: Vec<&str> = three.lines().collect();
    assert_eq!(lines[0], "gemini-3.7-flash-high\tGemini 3.7 Flash (High)");
    assert!(
        lines.contains(&"claude-sonnet-4-6\tClaude Sonnet 4.6 (Thinking)"),
        "{three}"
    );
    assert!(lines.iter().all(|l| l.split('\t').count() == 2));
    assert_eq!(lines.len(), two.lines().count());
    // The recording's models_output as it is, but a progress line in it
    // goes to stderr.
    let out = fx.cmd().arg("models").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "gemini-3.6-flash-medium\nclaude-sonnet-4-6\n");
    assert_eq!(stderr(&out), "");
    let mut rec = hello(100);
    rec.header.models_output =
        "Fetching available models...\ngemini-3.7-flash-high\tGemini 3.7 Flash (High)\n".into();
    let with_progress = Fixture::new(rec);
    let out = with_progress.cmd().arg("models").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "Fetching available models...\n");
    assert_eq!(
        stdout(&out),
        "gemini-3.7-flash-high\tGemini 3.7 Flash (High)\n"
    );

    // Signed out, as agy 1.1.20: exit 1, agy's sentence on stderr, no stdout.
    let out = fx
        .cmd()
        .env("FAKE_AGY_MODELS_SIGNED_OUT", "1")
        .arg("models")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "Error: Please sign in to view available models. Launch the CLI without arguments \
         to sign in.\n"
    );
    assert!(stdout(&out).is_empty());
}

#[test]
fn other_subcommands_are_accepted() {
    let fx = Fixture::new(hello(100));
    for sub in ["update", "changelog", "install", "plugins", "agents"] {
        let out = fx.run(&[sub]);
        assert_eq!(out.status.code(), Some(0), "{sub}");
    }
    for help in [
        vec!["--help"],
        vec!["help"],
        vec!["-h"],
        vec!["models", "--help"],
    ] {
        let out = fx.run(&help);
        assert_eq!(out.status.code(), Some(0), "{help:?}");
        assert!(stdout(&out).contains("Usage:"));
    }
}

#[test]
fn every_knob_is_documented_in_help_and_readme() {
    let fx = Fixture::new(hello(100));
    let help = stdout(&fx.run(&["--help"]));
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("fake-agy/README.md");
    for knob in KNOBS {
        assert!(help.contains(knob), "{knob} missing from --help");
        assert!(readme.contains(knob), "{knob} missing from README.md");
    }
}

// ---------------------------------------------------------------------------
// `--input-format stream-json`: the turn on stdin.
// ---------------------------------------------------------------------------

const STDIN_ARGS: &[&str] = &[
    "--output-format",
    "stream-json",
    "--input-format",
    "stream-json",
    "-p",
    "",
];

impl Fixture {
    /// fake-agy with the turn(s) `input` on its stdin, which then ends.
    fn run_stdin(&self, input: &str) -> std::process::Output {
        use std::io::Write;
        let mut child = self
            .std_cmd()
            .args(STDIN_ARGS)
            .env("FAKE_AGY_STDIN_LOG", self.path("stdin.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        // fake-agy may refuse before reading it all: a broken pipe is fine.
        let _ = stdin.write_all(input.as_bytes());
        drop(stdin);
        child.wait_with_output().expect("wait")
    }

    fn stdin_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("stdin.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON string"))
            .collect()
    }
}

/// The `event` of each stdout line, and the result's status and error.
fn events_and_result(out: &std::process::Output) -> (Vec<String>, serde_json::Value) {
    let lines: Vec<serde_json::Value> = stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let events = lines
        .iter()
        .map(|l| l["event"].as_str().unwrap_or("").to_string())
        .collect();
    let result = lines
        .iter()
        .rev()
        .find(|l| l["event"] == "result")
        .map(|l| l["result"].clone())
        .unwrap_or(serde_json::Value::Null);
    (events, result)
}

#[test]
fn a_stdin_turn_is_replayed_and_logged_and_the_end_of_input_ends_it() {
    let fx = Fixture::new(hello(50));
    let blocks = r#"{"event":"user","message":{"role":"user","content":[{"type":"text","text":"say "},{"type":"text","text":"hi"}]}}"#;
    let out = fx.run_stdin(&format!("{blocks}\n"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (events, result) = events_and_result(&out);
    assert_eq!(events.first().map(String::as_str), Some("init"));
    assert_eq!(events.last().map(String::as_str), Some("result"));
    assert_eq!(result["status"], "SUCCESS", "{result}");
    assert_eq!(fx.stdin_log(), ["say hi"]);
}

#[test]
fn bad_stdin_lines_get_agys_own_refusals() {
    let fx = Fixture::new(hello(50));
    let cases = [
        (
            r#"{"message":{"role":"user","content":"x"}}"#,
            "stream input message is missing the \"event\" field",
        ),
        ("not json", "failed to decode stream input: "),
        (
            r#"{"event":"user","message":{"role":"user","content":[{"type":"image","source":{}}]}}"#,
            "stream input content block type \"image\" is not supported (only \"text\")",
        ),
    ];
    for (line, words) in cases {
        let out = fx.run_stdin(&format!("{line}\n"));
        assert_eq!(out.status.code(), Some(1), "{line}: {}", stderr(&out));
        let (events, result) = events_and_result(&out);
        assert_eq!(events, ["init", "result"], "{line}");
        assert_eq!(result["status"], "ERROR");
        assert_eq!(result["num_turns"], 0);
        let error = result["error"].as_str().unwrap_or("");
        assert!(error.starts_with(words), "{line}: {error}");
        assert!(stderr(&out).contains(&format!("error: {words}")), "{line}");
        assert!(fx.dbs().is_empty(), "no turn ran for {line}");
    }
    assert!(fx.stdin_log().is_empty());
}

/// `FAKE_AGY_KEEP_CONVERSATIONS`: agy keeps so many conversations and
/// drops the oldest when a run creates one; resuming a dropped one gets
/// agy's warning and a new conversation.
#[test]
fn the_oldest_conversations_go_beyond_the_number_kept() {
    let fx = Fixture::new(hello(50));
    assert!(fx.run(&["-p", "one"]).status.success());
    let first = fx.dbs();
    assert_eq!(first.len(), 1);
    let id = first[0]
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("an id")
        .to_string();
    let kept = fx
        .cmd()
        .env("FAKE_AGY_KEEP_CONVERSATIONS", "1")
        .args(["-p", "two"])
        .output()
        .expect("run");
    assert!(kept.status.success());
    let dbs = fx.dbs();
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    assert_ne!(dbs, first, "the older one went");
    for suffix in ["-wal", "-shm"] {
        let mut file = first[0].clone().into_os_string();
        file.push(suffix);
        assert!(!Path::new(&file).exists(), "{file:?}");
    }
    let again = fx.run(&["-p", "three", "--conversation", &id]);
    assert!(
        stderr(&again).contains(&format!("warning: conversation \"{id}\" not found")),
        "{}",
        stderr(&again)
    );
}

/// agy 1.3.3 refuses malformed stream input with exit 2 (docs/agy-format.md,
/// "Exit codes (1.3.3)"); the words and the lines stay those of 1.2.x.
#[test]
fn a_1_3_3_agy_refuses_a_bad_stdin_line_with_exit_2() {
    let mut rec = hello(50);
    rec.header.agy_version = "1.3.3".into();
    rec.header.version_output = "1.3.3\n".into();
    let fx = Fixture::new(rec);
    let out = fx.run_stdin("{\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let (events, result) = events_and_result(&out);
    assert_eq!(events, ["init", "result"]);
    assert_eq!(
        result["error"],
        "stream input message is missing the \"event\" field"
    );
}

/// A stdin line with the user's `text`, as the bridge writes it.
fn user_line(text: &str) -> String {
    format!(
        "{}\n",
        serde_json::json!({"event": "user", "message": {"role": "user", "content": text}})
    )
}

/// The `result` objects of `lines`, in order.
fn results(lines: &[serde_json::Value]) -> Vec<serde_json::Value> {
    lines
        .iter()
        .filter(|l| l["event"] == "result")
        .map(|l| l["result"].clone())
        .collect()
}

/// The user inputs in `db`, as (idx, text).
fn user_inputs(db: &Path) -> Vec<(i64, String)> {
    steps_of(db)
        .iter()
        .filter_map(|row| match steps::decode(row).body {
            Some(Body::UserInput(u)) => Some((row.idx, u.text)),
            _ => None,
        })
        .collect()
}

fn bundled(name: &str) -> Recording {
    let path = agy_corpus::recording::bundled_dir().join(format!("{name}.jsonl"));
    Recording::load(&path).expect("bundled recording")
}

#[test]
fn two_stdin_lines_are_two_turns_of_one_process_and_one_conversation() {
    let fx = Fixture::new(bundled("stdin-two-turns"));
    let out = fx.run_stdin(&format!("{}{}", user_line("one"), user_line("two")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = json_lines(&out);
    let inits: Vec<_> = lines.iter().filter(|l| l["event"] == "init").collect();
    assert_eq!(inits.len(), 1, "init once per process");
    assert_eq!(lines[0]["event"], "init");
    let id = inits[0]["conversation_id"]
        .as_str()
        .expect("id")
        .to_string();
    let results = results(&lines);
    assert_eq!(results.len(), 2, "a result per turn");
    for r in &results {
        assert_eq!(r["status"], "SUCCESS", "{r}");
        assert_eq!(r["conversation_id"], id.as_str());
    }
    assert!(results[0]["response"]
        .as_str()
        .unwrap_or("")
        .starts_with("The workspace"));
    assert!(results[1]["response"]
        .as_str()
        .unwrap_or("")
        .starts_with("Add a doc comment"));
    // agy's usage is the conversation's: the second result counts both turns.
    let input = |r: &serde_json::Value| r["usage"]["input_tokens"].as_u64().unwrap_or(0);
    assert!(input(&results[0]) > 0, "{}", results[0]);
    assert_eq!(input(&results[1]), 2 * input(&results[0]));
    assert_eq!(results[1]["num_turns"], 2, "{}", results[1]);
    // The second turn's steps come after the first result.
    let first_result = lines
        .iter()
        .position(|l| l["event"] == "result")
        .expect("result");
    assert!(lines[first_result + 1..]
        .iter()
        .any(|l| l["event"] == "step_update"));
    let db = fx.only_db();
    assert_eq!(stem(&db), id);
    let idx: Vec<i64> = steps_of(&db).iter().map(|r| r.idx).collect();
    assert_eq!(idx, (0..6).collect::<Vec<_>>(), "step indexes continue");
    let inputs: Vec<i64> = user_inputs(&db).iter().map(|(i, _)| *i).collect();
    assert_eq!(inputs, [0, 3]);
    assert_eq!(fx.stdin_log(), ["one", "two"]);
}

#[test]
fn more_lines_than_turns_replay_the_last_turn_with_fresh_indexes() {
    let fx = Fixture::new(hello(50));
    let input: String = ["one", "two", "three"].map(user_line).concat();
    let out = fx.run_stdin(&input);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = results(&json_lines(&out));
    assert_eq!(results.len(), 3);
    for r in &results {
        assert_eq!(r["status"], "SUCCESS", "{r}");
        assert_eq!(r["response"], "Hello, world!");
    }
    let db = fx.only_db();
    let inputs: Vec<i64> = user_inputs(&db).iter().map(|(i, _)| *i).collect();
    assert_eq!(inputs, [0, 3, 6], "each replay numbered after the last");
    assert_eq!(steps_of(&db).len(), 9);
}

#[test]
fn boot_delay_comes_before_init_and_init_before_any_line() {
    use std::io::{BufRead, Write};
    let fx = Fixture::new(hello(50));
    let started = Instant::now();
    let mut child = fx
        .std_cmd()
        .args(STDIN_ARGS)
        .env("FAKE_AGY_BOOT_MS", "300")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    // Nothing written yet: init must come on its own, after the start-up.
    stdout.read_line(&mut first).expect("init line");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let init: serde_json::Value = serde_json::from_str(&first).expect("JSON");
    assert_eq!(init["event"], "init", "{first}");
    stdin.write_all(user_line("hi").as_bytes()).expect("write");
    drop(stdin);
    let rest: Vec<String> = stdout.lines().map(|l| l.expect("line")).collect();
    assert!(
        rest.last().is_some_and(|l| l.contains("\"result\"")),
        "{rest:?}"
    );
    assert_eq!(child.wait().expect("wait").code(), Some(0));
}

#[test]
fn no_stdin_turn_at_all_is_init_and_a_quiet_exit() {
    let fx = Fixture::new(hello(50));
    let out = fx.run_stdin("");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (events, _) = events_and_result(&out);
    assert_eq!(events, ["init"], "agy prints init before it reads a line");
    assert!(fx.dbs().is_empty(), "no turn, no database");
}
