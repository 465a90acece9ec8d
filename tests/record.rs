//! `agy-bridge record` end to end against fake-agy: growth steps at full
//! speed, the corpus round trip (replay -> capture -> replay gives the same
//! databases, with commit offsets within a stated tolerance), `--db`, and
//! `--redact` on payloads with planted private data.
//!
//! Round-trip timing tolerance: every captured commit that writes a step is
//! matched to the original commit that produced the same step payload, and
//! its offset, counted from the first matched commit (so agy's start-up on a
//! busy machine shifts nothing), must be within 500 ms + 50% of the
//! original's offset scaled by the replay speed; the start-up itself only
//! within a generous [`STARTUP_MAX_MS`].

mod common;

use agy_bridge::testing::follow as discovery;
use agy_bridge::view::decode;
use agy_corpus::db::{read_tables, TableRows};
use agy_corpus::recording::{self, Commit, Header, Provenance, Recording, SqlValue, Write};
use agy_corpus::redact::{self, RedactOptions};
use agy_format::schema;
use agy_format::steps::{self, Body, StepRow};
use agy_format::wire::Encoder;
use assert_cmd::Command;
use base64::Engine as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// The round trip's replay speed for the original recordings.
const SPEED: f64 = 4.0;
/// Timing tolerance: fixed part (ms) and share of the scaled offset.
const TOL_MS: f64 = 500.0;
const TOL_SHARE: f64 = 0.5;
/// How late the first captured commit may be, against the scaled original:
/// process start-up on a loaded two-core machine, a bound, not a timing.
const STARTUP_MAX_MS: f64 = 10_000.0;

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("agy-bridge")
}

fn conversations(home: &Path) -> PathBuf {
    home.join(".gemini/antigravity-cli/conversations")
}

/// `agy-bridge record` with fake-agy as agy, replaying `recording`.
fn record_cmd(home: &Path, recording: &Path, speed: f64) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin());
    cmd.env("HOME", home)
        .env("AGY_BIN", common::fake_agy())
        .env("FAKE_AGY_RECORDING", recording)
        .env("FAKE_AGY_SPEED", speed.to_string())
        .env_remove("AGY_CONVERSATIONS_DIR")
        .env_remove("AGY_EXTRA_ARGS")
        .env_remove("AGY_SKIP_PERMISSIONS")
        // Recorded as agy runs with every tool allowed: the comparisons
        // replay the originals with `skip_permissions: true`.
        .env("AGY_PERMISSIONS", "allow")
        .env_remove("AGY_ALLOW")
        .env_remove("AGY_BIND")
        .env_remove("AGY_WAKE")
        .env_remove("FAKE_AGY_RECORDINGS_DIR")
        .stdin(std::process::Stdio::null());
    cmd
}

fn check(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Record a replay of `original` into `home`, return the capture.
fn capture(home: &Path, original: &Path, prompt: &str, speed: f64, out: &Path) -> Recording {
    let result = record_cmd(home, original, speed)
        .arg("record")
        .arg("--out")
        .arg(out)
        .arg(prompt)
        .output()
        .expect("run agy-bridge record");
    check(&result, "record");
    Recording::load(out).expect("capture parses")
}

/// fake-agy replaying `rec_path` into `home` at `speed`.
fn replay(home: &Path, rec_path: &Path, prompt: &str, speed: f64) {
    let out = std::process::Command::new(common::fake_agy())
        .env("HOME", home)
        .env("FAKE_AGY_RECORDING", rec_path)
        .env("FAKE_AGY_SPEED", speed.to_string())
        .env_remove("AGY_CONVERSATIONS_DIR")
        .args(["--dangerously-skip-permissions", "-p", prompt])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run fake-agy");
    // quota-error exits 1 by design; anything else must succeed.
    assert!(
        out.status.code().is_some(),
        "fake-agy died: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The only root database in a conversations dir (the one no other names
/// as a subagent child), and its children in step order.
fn databases(home: &Path) -> (PathBuf, Vec<PathBuf>) {
    let dir = conversations(home);
    let all: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("conversations dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "db"))
        .collect();
    let children: Vec<agy_format::ids::ConversationId> = all
        .iter()
        .flat_map(|p| discovery::subagent_children(p))
        .collect();
    let roots: Vec<&PathBuf> = all
        .iter()
        .filter(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            !children.iter().any(|c| c.as_str() == stem)
        })
        .collect();
    assert_eq!(roots.len(), 1, "one root database in {}", dir.display());
    let root = roots[0].clone();
    let kids = discovery::subagent_children(&root)
        .iter()
        .map(|c| discovery::db_path(&dir, c))
        .collect();
    (root, kids)
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

fn replace_bytes(b: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = b.to_vec();
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    out
}

fn map_value(v: &SqlValue, map: &[(String, String)]) -> SqlValue {
    match v {
        SqlValue::Text(t) => {
            let mut t = t.clone();
            for (a, b) in map {
                t = t.replace(a.as_str(), b);
            }
            SqlValue::Text(t)
        }
        SqlValue::Blob(bytes) => {
            let mut bytes = bytes.clone();
            for (a, b) in map {
                bytes = replace_bytes(&bytes, a.as_bytes(), b.as_bytes());
            }
            SqlValue::Blob(bytes)
        }
        other => other.clone(),
    }
}

/// Every table of a database, ids replaced by `map`.
fn dump(path: &Path, map: &[(String, String)]) -> Vec<TableRows> {
    let conn = agy_format::database::open_read_only(path).expect("open");
    let mut tables = read_tables(&conn).expect("read tables");
    for t in &mut tables {
        for r in &mut t.rows {
            for v in r.key.values_mut().chain(r.values.values_mut()) {
                *v = map_value(v, map);
            }
        }
    }
    tables
}

/// Placeholder ids of the same length as a UUID.
fn placeholder(n: usize) -> String {
    format!("{:0>36}", format!("conversation-{n}"))
}

/// The conversation ids of a replayed home mapped to placeholders: root
/// first, then children in step order.
fn id_map(home: &Path) -> (Vec<(String, String)>, Vec<PathBuf>) {
    let (root, kids) = databases(home);
    let mut paths = vec![root];
    paths.extend(kids);
    let map = paths
        .iter()
        .enumerate()
        .map(|(i, p)| (stem(p), placeholder(i)))
        .collect();
    (map, paths)
}

fn planner_text_len(payload: &[u8]) -> Option<usize> {
    let step = steps::decode(&StepRow {
        idx: 2,
        step_type: 15,
        status: 0,
        payload: Some(payload.to_vec()),
        ..StepRow::default()
    });
    match step.body {
        Some(Body::Planner(p)) => Some(p.text.len()),
        _ => None,
    }
}

#[test]
fn recording_hello_at_full_speed_captures_every_growth_step() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("hello-capture.jsonl");
    let original = common::load("hello");
    let path = recording::resolve("hello", &recording::bundled_dir()).unwrap();
    let cap = capture(home.path(), &path, &original.header.prompt, 1.0, &out);

    let lengths = |rec: &Recording| -> Vec<usize> {
        rec.commits
            .iter()
            .flat_map(Commit::step_payloads)
            .filter(|(idx, _)| *idx == 2)
            .filter_map(|(_, p)| planner_text_len(&p))
            .collect()
    };
    let want = lengths(&original);
    let got = lengths(&cap);
    let distinct = |v: &[usize]| {
        let mut d = v.to_vec();
        d.dedup();
        d
    };
    assert!(
        want.len() >= 6,
        "hello grows over several commits: {want:?}"
    );
    assert_eq!(
        distinct(&got),
        distinct(&want),
        "every growth step of idx 2 is its own captured commit"
    );
    assert_eq!(got.len(), want.len(), "one captured commit per growth step");

    // The header says where it came from.
    let h = &cap.header;
    assert!(matches!(
        &h.provenance,
        Provenance::Captured { agy_version, redacted: false } if agy_version == "1.2.8"
    ));
    assert_eq!(h.version_output, original.header.version_output);
    assert_eq!(h.models_output, original.header.models_output);
    assert_eq!(h.stdout, original.header.stdout);
    assert_eq!(h.exit_code, 0);
    assert_eq!(h.prompt, original.header.prompt);
    assert_eq!(
        h.schema,
        schema::DDL
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    );
    let (root, _) = databases(home.path());
    assert_eq!(h.root_conversation, stem(&root));
}

#[test]
fn record_warns_about_private_data_unless_redacted() {
    let home = tempfile::tempdir().unwrap();
    let path = recording::resolve("models-v2", &recording::bundled_dir()).unwrap();
    let out = home.path().join("c.jsonl");
    let result = record_cmd(home.path(), &path, 20.0)
        .args(["record", "--out"])
        .arg(&out)
        .arg("Say hi briefly")
        .output()
        .unwrap();
    check(&result, "record");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("holds private data"), "{stderr}");
    assert_eq!(mode_of(&out), 0o600, "the unredacted recording is private");
    // Also over an existing file someone else could read.
    let from = home.path().join("from.jsonl");
    std::fs::copy(&out, &from).unwrap();
    let open = home.path().join("open.jsonl");
    std::fs::write(&open, "").unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let result = Command::new(bin())
        .args(["record", "--from"])
        .arg(&from)
        .arg("--out")
        .arg(&open)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    check(&result, "record --from");
    assert_eq!(mode_of(&open), 0o600, "an existing file is made private");

    let out2 = home.path().join("r.jsonl");
    let result = record_cmd(home.path(), &path, 20.0)
        .args(["record", "--redact", "--out"])
        .arg(&out2)
        .arg("Say hi briefly")
        .output()
        .unwrap();
    check(&result, "record --redact");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!stderr.contains("holds private data"), "{stderr}");
    let text = std::fs::read_to_string(&out2).unwrap();
    let home_str = home.path().display().to_string();
    assert!(!text.contains(&home_str), "home path left in {text}");
    let rec = Recording::parse(&text).unwrap();
    assert_eq!(rec.header.root_conversation, redact::placeholder_id(1));
    assert!(matches!(
        rec.header.provenance,
        Provenance::Captured { redacted: true, .. }
    ));
}

/// A file's permission bits.
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Everything one corpus recording's round trip found.
struct Trip {
    name: String,
    problems: Vec<String>,
    commits: usize,
    max_late_ms: f64,
}

fn round_trip(name: &str) -> Trip {
    let mut problems = Vec::new();
    let original_path = recording::resolve(name, &recording::bundled_dir()).unwrap();
    let original = Recording::load(&original_path).unwrap();
    let prompt = original.header.prompt.clone();
    let home1 = tempfile::tempdir().unwrap();
    let home2 = tempfile::tempdir().unwrap();
    let cap_path = home1.path().join(format!("{name}.capture.jsonl"));
    let cap = capture(home1.path(), &original_path, &prompt, SPEED, &cap_path);
    replay(home2.path(), &cap_path, &prompt, 50.0);

    // Same rows, same bytes, every table of every database.
    let (map1, dbs1) = id_map(home1.path());
    let (map2, dbs2) = id_map(home2.path());
    if dbs1.len() != dbs2.len() {
        problems.push(format!(
            "{} databases after the replay of the original, {} after the capture's",
            dbs1.len(),
            dbs2.len()
        ));
    }
    for (a, b) in dbs1.iter().zip(&dbs2) {
        let (ta, tb) = (dump(a, &map1), dump(b, &map2));
        if ta != tb {
            for (x, y) in ta.iter().zip(&tb) {
                if x != y {
                    problems.push(format!(
                        "table {} differs ({} vs {} rows)",
                        x.name,
                        x.rows.len(),
                        y.rows.len()
                    ));
                }
            }
            if ta.len() != tb.len() {
                problems.push(format!("{} vs {} tables", ta.len(), tb.len()));
            }
        }
    }

    // Offsets: match each captured step write to the original commit that
    // wrote the same payload (capture ids mapped back to the recording's).
    let orig_ids = original.conversations();
    let cap_ids = cap.conversations();
    let back: Vec<(String, String)> = cap_ids
        .iter()
        .cloned()
        .zip(orig_ids.iter().cloned())
        .collect();
    let opts = recording::ApplyOptions {
        skip_permissions: true,
        ..Default::default()
    };
    let orig_commits: Vec<&Commit> = original.effective_commits(&opts).map(|(_, c)| c).collect();
    let mut max_late: f64 = 0.0;
    // The first matched commit's lateness: start-up, taken out of the rest.
    let mut startup: Option<f64> = None;
    for c in &cap.commits {
        let db = back
            .iter()
            .find(|(from, _)| *from == c.db)
            .map(|(_, to)| to.clone())
            .unwrap_or_default();
        let mut matched: Option<usize> = None;
        for (idx, payload) in c.step_payloads() {
            let mut p = payload;
            for (from, to) in &back {
                p = replace_bytes(&p, from.as_bytes(), to.as_bytes());
            }
            let k = orig_commits.iter().rposition(|o| {
                o.db == db
                    && o.step_payloads()
                        .iter()
                        .any(|(i, op)| *i == idx && *op == p)
            });
            match k {
                Some(k) => matched = Some(matched.map_or(k, |m| m.max(k))),
                None => problems.push(format!(
                    "captured commit at {} ms writes a step {idx} payload no original commit wrote",
                    c.t_ms
                )),
            }
        }
        if let Some(k) = matched {
            let o = orig_commits[k];
            let want = if o.pre { 0.0 } else { o.t_ms as f64 / SPEED };
            let got = c.t_ms as f64;
            let shift = match startup {
                Some(shift) => shift,
                None => {
                    let shift = got - want;
                    if shift.abs() > STARTUP_MAX_MS {
                        problems.push(format!(
                            "the first captured commit is {shift} ms off the scaled original's (start-up bound {STARTUP_MAX_MS} ms)"
                        ));
                    }
                    *startup.insert(shift)
                }
            };
            let got = got - shift;
            max_late = max_late.max(got - want);
            if (got - want).abs() > TOL_MS + TOL_SHARE * want {
                problems.push(format!(
                    "captured commit at {got} ms after start-up, original at {want} ms (scaled): outside {TOL_MS} ms + {}%",
                    TOL_SHARE * 100.0
                ));
            }
        }
    }
    Trip {
        name: name.to_string(),
        problems,
        commits: cap.commits.len(),
        max_late_ms: max_late,
    }
}

#[test]
fn every_corpus_recording_round_trips_through_record() {
    let started = Instant::now();
    let names = recording::list(&recording::bundled_dir()).unwrap();
    assert!(names.len() >= 16, "{names:?}");
    let trips: Vec<Trip> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|n| s.spawn(move || round_trip(n)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut failed = Vec::new();
    for t in &trips {
        eprintln!(
            "{:<16} {:>3} captured commits, latest {:>6.1} ms after the scaled original",
            t.name, t.commits, t.max_late_ms
        );
        if !t.problems.is_empty() {
            failed.push(format!("{}: {}", t.name, t.problems.join("; ")));
        }
    }
    eprintln!(
        "round trip of {} recordings: {:?}",
        trips.len(),
        started.elapsed()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn record_db_makes_a_single_transaction_recording() {
    let dir = tempfile::tempdir().unwrap();
    let original = common::load("subagent");
    let conv = dir.path().join("conversations");
    std::fs::create_dir_all(&conv).unwrap();
    // Build the databases as a finished run leaves them.
    for id in original.conversations() {
        let conn = rusqlite::Connection::open(conv.join(format!("{id}.db"))).unwrap();
        schema::create(&conn).unwrap();
        let opts = recording::ApplyOptions {
            skip_permissions: true,
            ..Default::default()
        };
        for (i, c) in original.effective_commits(&opts) {
            if c.db == id {
                recording::apply_commit(&conn, i, c, &opts).unwrap();
            }
        }
    }
    let root = original.header.root_conversation.clone();
    let out = dir.path().join("from-db.jsonl");
    Command::new(bin())
        .args(["record", "--db"])
        .arg(conv.join(format!("{root}.db")))
        .arg("--out")
        .arg(&out)
        .assert()
        .success()
        .stderr(predicates::str::contains("holds private data"));
    let rec = Recording::load(&out).unwrap();
    assert_eq!(rec.header.root_conversation, root);
    assert_eq!(rec.header.prompt, original.header.prompt);
    assert_eq!(rec.header.stdout, original.header.stdout);
    assert_eq!(rec.commits.len(), 2, "root and its subagent");
    assert!(rec.commits.iter().all(|c| c.t_ms == 0));
    // It holds exactly the final state.
    for id in original.conversations() {
        let a = original.final_database(&id).unwrap();
        let b = rec.final_database(&id).unwrap();
        assert_eq!(read_tables(&a).unwrap(), read_tables(&b).unwrap(), "{id}");
    }
}

// ---------------------------------------------------------------------------
// Redaction.

const HOME: &str = "/home/alice";
const WORKSPACE: &str = "/home/alice/src/secret-project";
const EMAIL: &str = "alice.liddell@wonder.example.org";
const ROOT_ID: &str = "5f0c6a2e-93b1-4c7e-8d2a-6b1e0f9a4c31";
const CHILD_ID: &str = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d";
const TRAJ_ID: &str = "0a1b2c3d-4e5f-4061-8273-9485a6b7c8d9";

fn planted() -> Recording {
    let file = format!("{WORKSPACE}/src/main.rs");
    // A planner response: text, thinking, a tool call, unknown fields at
    // several depths (a string, a nested unknown message, raw bytes).
    let mut p = Encoder::new();
    p.varint(1, 15).varint(4, 3);
    p.message(5, |m| {
        m.message(4, |t| {
            t.string(1, "call-1").string(2, "view_file").string(
                3,
                &format!(r#"{{"AbsolutePath":"{file}","owner":"{EMAIL}"}}"#),
            );
        })
        .message(20, |r| {
            r.string(1, TRAJ_ID).varint(2, 2).string(4, ROOT_ID);
        });
    });
    p.message(20, |m| {
        m.string(1, &format!("I read {file} for alice; mail {EMAIL}."))
            .string(
                3,
                &format!("alice's home is {HOME}, conversation {ROOT_ID}"),
            )
            .string(99, &format!("unknown string field {HOME}/.ssh"))
            .message(41, |x| {
                x.varint(1, 7).message(2, |y| {
                    y.string(5, &format!("deep unknown {WORKSPACE} {CHILD_ID}"));
                });
            });
    });
    let mut raw = vec![0xff, 0xfe, 0x00];
    raw.extend_from_slice(CHILD_ID.as_bytes());
    raw.push(0x80);
    p.bytes(777, &raw);
    let payload = p.finish();

    let mut sub = Encoder::new();
    sub.varint(1, 127).varint(4, 3).message(127, |m| {
        m.string(1, CHILD_ID).string(
            2,
            &format!("file://{HOME}/.gemini/antigravity-cli/brain/{CHILD_ID}/log"),
        );
    });
    let mut meta = Encoder::new();
    meta.varint(3, 2).message(20, |r| {
        r.string(1, TRAJ_ID).string(4, ROOT_ID);
    });
    let mut blob_meta = Encoder::new();
    blob_meta
        .message(1, |w| {
            w.string(1, &format!("file://{WORKSPACE}"));
        })
        .string(6, ROOT_ID)
        .string(7, &format!("file://{WORKSPACE}"));
    let mut gen = Encoder::new();
    gen.message(1, |m| {
        m.string(19, "gemini-3.7-flash-medium").string(50, EMAIL);
    });
    let gen = gen.finish();

    let step = |idx: i64, t: i64, payload: Vec<u8>, meta: Option<Vec<u8>>| {
        let mut values = BTreeMap::new();
        values.insert("step_type".into(), SqlValue::Integer(t));
        values.insert("status".into(), SqlValue::Integer(3));
        values.insert("step_payload".into(), SqlValue::Blob(payload));
        if let Some(m) = meta {
            values.insert("metadata".into(), SqlValue::Blob(m));
        }
        Write {
            table: "steps".into(),
            op: Default::default(),
            key: BTreeMap::from([("idx".to_string(), SqlValue::Integer(idx))]),
            values,
            stream_error: None,
        }
    };
    let kv = |table: &str, key: (&str, SqlValue), vals: Vec<(&str, SqlValue)>| Write {
        table: table.into(),
        op: Default::default(),
        key: BTreeMap::from([(key.0.to_string(), key.1)]),
        values: vals.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        stream_error: None,
    };
    Recording {
        header: Header {
            format: recording::FORMAT_VERSION,
            agy_version: "1.2.8".into(),
            provenance: Provenance::Captured {
                agy_version: "1.2.8".into(),
                redacted: false,
            },
            description: String::new(),
            prompt: format!("read {file} and mail {EMAIL}"),
            model: None,
            workspace: Some(WORKSPACE.into()),
            root_conversation: ROOT_ID.into(),
            stdout: format!("Done with {file}.\n"),
            stderr: format!("warning: {HOME}/.gemini/config for alice\n"),
            exit_code: 0,
            models_output: String::new(),
            version_output: "1.2.8\n".into(),
            schema: Vec::new(),
            outcome: None,
        },
        commits: vec![
            Commit {
                t_ms: 100,
                db: ROOT_ID.into(),
                pre: false,
                gate: None,
                mcp_call: None,
                turn: 0,
                writes: vec![
                    kv(
                        "trajectory_meta",
                        ("trajectory_id", SqlValue::Text(TRAJ_ID.into())),
                        vec![("cascade_id", SqlValue::Text(ROOT_ID.into()))],
                    ),
                    kv(
                        "trajectory_metadata_blob",
                        ("id", SqlValue::Text("main".into())),
                        vec![("data", SqlValue::Blob(blob_meta.finish()))],
                    ),
                    step(2, 15, payload, Some(meta.finish())),
                    kv(
                        "gen_metadata",
                        ("idx", SqlValue::Integer(2)),
                        vec![
                            ("size", SqlValue::Integer(gen.len() as i64)),
                            ("data", SqlValue::Blob(gen)),
                        ],
                    ),
                ],
            },
            Commit {
                t_ms: 200,
                db: ROOT_ID.into(),
                pre: false,
                gate: None,
                mcp_call: None,
                turn: 0,
                writes: vec![step(3, 127, sub.finish(), None)],
            },
            Commit {
                t_ms: 300,
                db: CHILD_ID.into(),
                pre: false,
                gate: None,
                mcp_call: None,
                turn: 0,
                writes: vec![kv(
                    "parent_references",
                    ("idx", SqlValue::Integer(0)),
                    vec![("data", SqlValue::Text(format!("{ROOT_ID} {HOME}")))],
                )],
            },
        ],
    }
}

const SECRETS: &[&str] = &[
    "alice",
    HOME,
    WORKSPACE,
    "secret-project",
    EMAIL,
    "wonder.example",
    ROOT_ID,
    CHILD_ID,
    TRAJ_ID,
];

/// The file's text plus every base64 blob in it, decoded (lossily).
fn searchable(text: &str) -> String {
    let mut all = text.to_string();
    let v: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    fn walk(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(b) = m.get("base64").and_then(|b| b.as_str()) {
                    let bytes = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
                    out.push('\n');
                    out.push_str(&String::from_utf8_lossy(&bytes));
                }
                m.values().for_each(|x| walk(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    v.iter().for_each(|x| walk(x, &mut all));
    all
}

fn alice() -> RedactOptions {
    RedactOptions {
        home: Some(HOME.into()),
        user: Some("alice".into()),
        workspaces: vec![],
    }
}

#[test]
fn planted_secrets_are_visible_before_redaction() {
    // Guard against a test that passes because nothing was planted.
    let text = searchable(&planted().to_jsonl());
    for s in SECRETS {
        assert!(text.contains(s), "{s} not planted");
    }
}

#[test]
fn redaction_removes_every_planted_value_and_keeps_payloads_valid() {
    let red = redact::redact_recording(&planted(), &alice());
    let text = red.to_jsonl();
    let all = searchable(&text);
    for s in SECRETS {
        assert!(!all.contains(s), "{s:?} survived redaction:\n{all}");
    }
    // Placeholders, and the ids stay UUID-shaped and consistent.
    let root = redact::placeholder_id(1);
    assert_eq!(red.header.root_conversation, root);
    assert_eq!(red.header.workspace.as_deref(), Some("/workspace"));
    assert!(red.header.prompt.contains("/workspace/src/main.rs"));
    assert!(red.header.prompt.contains("user@example.com"));
    assert!(red
        .header
        .stderr
        .contains("/home/user/.gemini/config for user"));
    assert!(agy_format::ids::ConversationId::parse(&red.commits[2].db).is_ok());
    assert_eq!(red.commits[0].db, root);

    // The redacted recording still decodes, with the text replaced.
    let path = tempfile::tempdir().unwrap();
    let file = path.path().join("red.jsonl");
    red.save(&file).unwrap();
    let decoded = decode::decode_path(&file).unwrap();
    assert!(decoded.steps.iter().all(|s| s.error().is_none()));
    let planner = decoded.steps.iter().find(|s| s.idx() == 2).unwrap();
    match &planner.step.body {
        Some(Body::Planner(p)) => {
            assert_eq!(
                p.text,
                "I read /workspace/src/main.rs for user; mail user@example.com."
            );
            assert_eq!(
                p.thinking,
                format!("user's home is /home/user, conversation {root}")
            );
        }
        other => panic!("{other:?}"),
    }
    let call = planner.step.tool_call().unwrap();
    assert_eq!(
        call.arguments,
        r#"{"AbsolutePath":"/workspace/src/main.rs","owner":"user@example.com"}"#
    );
    let sub = decoded.steps.iter().find(|s| s.idx() == 3).unwrap();
    match &sub.step.body {
        Some(Body::Subagent(s)) => {
            assert_eq!(s.child_conversation_id, red.commits[2].db);
            assert_eq!(
                s.log_uri.as_deref(),
                Some(
                    format!(
                        "file:///home/user/.gemini/antigravity-cli/brain/{}/log",
                        red.commits[2].db
                    )
                    .as_str()
                )
            );
        }
        other => panic!("{other:?}"),
    }
    // Every blob is still well-formed protobuf, down to the nested unknowns.
    for c in &red.commits {
        for w in &c.writes {
            for v in w.values.values() {
                if let SqlValue::Blob(b) = v {
                    agy_format::wire::validate(b).unwrap();
                }
            }
            if w.table == "gen_metadata" {
                let data = w.values["data"].as_blob().unwrap();
                assert_eq!(w.values["size"], SqlValue::Integer(data.len() as i64));
            }
        }
    }
    let row = red.commits[0].writes[2].values["step_payload"]
        .as_blob()
        .unwrap()
        .to_vec();
    let step = steps::decode(&StepRow {
        idx: 2,
        step_type: 15,
        status: 3,
        payload: Some(row),
        ..StepRow::default()
    });
    assert!(step.decode_error.is_none());
    // The unknown string and the deep unknown message were redacted in place.
    let mut found = Vec::new();
    let payload = red.commits[0].writes[2].values["step_payload"]
        .as_blob()
        .unwrap();
    let all_text = String::from_utf8_lossy(payload).into_owned();
    found.push(all_text.contains("unknown string field /home/user/.ssh"));
    found.push(all_text.contains(&format!("deep unknown /workspace {}", red.commits[2].db)));
    assert_eq!(found, [true, true], "{all_text:?}");
}

#[test]
fn redaction_is_stable_and_idempotent() {
    let once = redact::redact_recording(&planted(), &alice());
    let again = redact::redact_recording(&planted(), &alice());
    assert_eq!(once, again);
    let twice = redact::redact_recording(&once, &alice());
    assert_eq!(twice, once);
}

#[test]
fn record_from_redacts_an_existing_recording() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("planted.jsonl");
    planted().save(&input).unwrap();
    let out = dir.path().join("published.jsonl");
    Command::new(bin())
        .env("HOME", HOME)
        .env("USER", "alice")
        .current_dir(dir.path())
        .args(["record", "--redact", "--from"])
        .arg(&input)
        .arg("--out")
        .arg(&out)
        .timeout(Duration::from_secs(30))
        .assert()
        .success();
    let all = searchable(&std::fs::read_to_string(&out).unwrap());
    for s in SECRETS {
        assert!(!all.contains(s), "{s:?} survived");
    }
}
