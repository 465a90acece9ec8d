//! `agy-bridge drift` as a maintainer runs it: the corpus shows no drift
//! against its committed baseline, and mutated copies of recordings (payloads
//! rewritten with the library's encoder) are each flagged with the right
//! class, kind and path.

use agy_bridge::recording::{self, Recording, SqlValue, Write};
use agy_bridge::schema;
use agy_bridge::wire::{self, Encoder, Value};
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn bin() -> Command {
    let mut cmd = Command::cargo_bin("agy-bridge").expect("binary builds");
    cmd.timeout(Duration::from_secs(60));
    cmd
}

fn corpus() -> PathBuf {
    recording::bundled_dir()
}

fn baseline() -> PathBuf {
    corpus().join("schema-baseline.json")
}

fn load(name: &str) -> Recording {
    Recording::load(&corpus().join(format!("{name}.jsonl"))).expect("recording")
}

/// Save `rec` as `dir/name` (the name is what reports cite).
fn save(dir: &Path, name: &str, rec: &Recording) -> PathBuf {
    let path = dir.join(name);
    rec.save(&path).expect("save");
    path
}

/// Rewrite every `steps` upsert.
fn mutate_steps(rec: &Recording, mut f: impl FnMut(&mut Write)) -> Recording {
    let mut out = rec.clone();
    for c in &mut out.commits {
        for w in &mut c.writes {
            if w.table == "steps" && !w.values.is_empty() {
                f(w);
            }
        }
    }
    out
}

fn step_type(w: &Write) -> i64 {
    w.values
        .get("step_type")
        .and_then(SqlValue::as_i64)
        .unwrap_or(0)
}

fn payload(w: &mut Write) -> Option<&mut Vec<u8>> {
    match w.values.get_mut("step_payload") {
        Some(SqlValue::Blob(b)) => Some(b),
        _ => None,
    }
}

/// Re-encode a message, letting `f` rewrite each field (`None` keeps it).
fn rewrite(buf: &[u8], f: &mut dyn FnMut(&mut Encoder, u32, Value<'_>) -> bool) -> Vec<u8> {
    let mut e = Encoder::new();
    for field in wire::fields(buf) {
        let field = field.expect("corpus payloads are well-formed");
        if !f(&mut e, field.number, field.value) {
            e.value(field.number, &field.value);
        }
    }
    e.finish()
}

/// Rewrite the fields of the planner body (payload field 20).
fn rewrite_planner(p: &[u8], f: &mut dyn FnMut(&mut Encoder, u32, Value<'_>) -> bool) -> Vec<u8> {
    rewrite(p, &mut |e, n, v| match (n, v) {
        (20, Value::Len(body)) => {
            e.bytes(20, &rewrite(body, f));
            true
        }
        _ => false,
    })
}

fn run_json(paths: &[&Path]) -> (i32, Json) {
    let out = bin()
        .arg("drift")
        .arg("--json")
        .args(paths)
        .output()
        .expect("run drift");
    let json: Json = serde_json::from_slice(&out.stdout).expect("drift --json prints JSON");
    (out.status.code().unwrap_or(-1), json)
}

/// The findings of a `--json` report with this class, kind and path.
fn has(json: &Json, class: &str, kind: &str, path: Option<&str>) -> bool {
    json["findings"].as_array().unwrap().iter().any(|f| {
        f["class"] == class
            && f["kind"] == kind
            && match path {
                Some(p) => f["path"].as_str() == Some(p),
                None => true,
            }
    })
}

#[test]
fn corpus_shows_no_drift_against_its_baseline() {
    bin()
        .args(["drift", "--baseline"])
        .arg(baseline())
        .arg(corpus())
        .assert()
        .success()
        .stdout(predicate::str::ends_with("no drift\n"));
    // The same by file, and as JSON.
    let files: Vec<PathBuf> = recording::list(&corpus())
        .unwrap()
        .iter()
        .map(|n| corpus().join(format!("{n}.jsonl")))
        .collect();
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (code, json) = run_json(&refs);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["breaking"], 0);
    assert_eq!(json["additive"], 0);
    assert_eq!(json["findings"], Json::Array(vec![]));
}

#[test]
fn baseline_is_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("baseline.json");
    bin()
        .args(["drift", "--update-baseline"])
        .arg(&fresh)
        .arg(corpus())
        .assert()
        .success()
        .stdout(predicate::str::contains(" sources, "));
    let want = std::fs::read_to_string(&fresh).unwrap();
    let have = std::fs::read_to_string(baseline()).unwrap();
    assert!(
        want == have,
        "recordings/schema-baseline.json is stale: run `agy-bridge drift --update-baseline recordings/schema-baseline.json recordings/`"
    );
}

#[test]
fn a_single_recording_shows_no_drift_and_notes_what_it_does_not_exercise() {
    bin()
        .args(["drift"])
        .arg(corpus().join("hello.jsonl"))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "note: not exercised by these inputs (not checked): 5 (file edit)",
        ))
        .stdout(predicate::str::contains("20.3"))
        .stdout(predicate::str::ends_with("no drift\n"));
}

#[test]
fn renumbered_text_field_is_breaking() {
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("hello"), |w| {
        if step_type(w) == 15 {
            let p = payload(w).unwrap();
            *p = rewrite_planner(p, &mut |e, n, v| match (n, v) {
                (1, Value::Len(text)) => {
                    e.bytes(21, text);
                    true
                }
                _ => false,
            });
        }
    });
    let path = save(dir.path(), "hello.jsonl", &rec);
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "BREAKING: 15 (planner response): 20.1 len -> missing in 1/1 steps (baseline: 26/27 steps, chance 3.7%; e.g. hello.jsonl) [load-bearing]",
        ))
        .stdout(predicate::str::contains(
            "warning: 15 (planner response): new path 20.21 len in 1/1 steps (e.g. hello.jsonl)",
        ))
        .stdout(predicate::str::contains("1 breaking, 1 additive"));
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 1);
    assert!(has(&json, "breaking", "missing_load_bearing", Some("20.1")));
    assert!(has(&json, "additive", "new_path", Some("20.21")));
}

#[test]
fn string_turned_into_varint_is_a_breaking_wire_type_change() {
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("thinking"), |w| {
        if step_type(w) == 15 {
            let p = payload(w).unwrap();
            *p = rewrite_planner(p, &mut |e, n, v| match (n, v) {
                (1, Value::Len(text)) => {
                    e.varint(1, text.len() as u64);
                    true
                }
                _ => false,
            });
        }
    });
    let path = save(dir.path(), "thinking.jsonl", &rec);
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "BREAKING: 15 (planner response): 20.1 len -> varint in 1/1 steps (e.g. thinking.jsonl) [load-bearing]",
        ));
    let (_, json) = run_json(&[&path]);
    assert!(has(&json, "breaking", "wire_type_change", Some("20.1")));
    // Reported once, as a wire-type change, not also as missing.
    assert!(!has(
        &json,
        "breaking",
        "missing_load_bearing",
        Some("20.1")
    ));
}

#[test]
fn new_step_type_is_additive() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = load("hello");
    let mut e = Encoder::new();
    e.varint(1, 200).varint(4, 3).message(200, |m| {
        m.string(1, "a feature from the future").varint(2, 7);
    });
    let mut values = BTreeMap::new();
    values.insert("step_type".to_string(), SqlValue::Integer(200));
    values.insert("status".to_string(), SqlValue::Integer(3));
    values.insert("step_payload".to_string(), SqlValue::Blob(e.finish()));
    let last = rec.commits.last().unwrap().clone();
    rec.commits.push(recording::Commit {
        t_ms: last.t_ms + 10,
        writes: vec![Write {
            table: "steps".into(),
            op: Default::default(),
            key: BTreeMap::from([("idx".to_string(), SqlValue::Integer(3))]),
            values,
        }],
        ..last
    });
    let path = save(dir.path(), "hello-plus.jsonl", &rec);
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "warning: 200 (unknown): new step type in 1 steps, 3 field paths (e.g. hello-plus.jsonl)",
        ))
        .stdout(predicate::str::contains("0 breaking, 1 additive"));
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 0);
    assert!(has(&json, "additive", "new_step_type", None));
}

fn ddl_with_steps(steps: &str) -> Vec<String> {
    schema::DDL
        .iter()
        .map(|s| {
            if s.starts_with("CREATE TABLE `steps`") {
                steps.to_string()
            } else {
                s.to_string()
            }
        })
        .collect()
}

#[test]
fn new_column_in_steps_is_additive_and_a_removed_needed_column_is_breaking() {
    let dir = tempfile::tempdir().unwrap();
    let steps = schema::DDL[1];
    let mut added = load("hello");
    added.header.schema = ddl_with_steps(&steps.replace(
        ",`step_format` integer NOT NULL DEFAULT 0,",
        ",`step_format` integer NOT NULL DEFAULT 0,`trace_id` text,",
    ));
    let path = save(dir.path(), "hello-col.jsonl", &added);
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "warning: new column steps.trace_id",
        ))
        .stdout(predicate::str::contains(
            "warning: schema statement not in the baseline: CREATE TABLE `steps`",
        ));
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 0);
    assert!(has(&json, "additive", "new_column", None));
    assert!(has(&json, "additive", "schema_change", None));

    let mut removed = load("hello");
    removed.header.schema = ddl_with_steps(&steps.replace("`permissions` blob,", ""));
    let path = save(dir.path(), "hello-nocol.jsonl", &removed);
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "BREAKING: column steps.permissions vanished [read by the decoder]",
        ));
    // A column the decoder does not read is only a warning.
    let mut unread = load("hello");
    unread.header.schema = ddl_with_steps(&steps.replace("`render_info` blob,", ""));
    let path = save(dir.path(), "hello-norender.jsonl", &unread);
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "warning: column steps.render_info vanished\n",
        ));
}

#[test]
fn models_output_in_a_new_format_is_breaking() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = load("hello");
    rec.header.models_output =
        "[{\"slug\":\"gemini-4-flash\",\"name\":\"Gemini 4 Flash\"}]\n".into();
    let path = save(dir.path(), "models-json.jsonl", &rec);
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "BREAKING: `agy models` output is in a format none of 1/2/3 matches (e.g. models-json.jsonl)",
        ));
    // A known format the baseline lacks would only be a warning; the corpus
    // has all three, so every bundled models format passes.
    let (code, json) = run_json(&[&corpus().join("models-v1.jsonl")]);
    assert_eq!(code, 0, "{json}");
}

#[test]
fn decode_errors_are_breaking() {
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("hello"), |w| {
        if step_type(w) == 15 {
            *payload(w).unwrap() = vec![0x08, 0x0f, 0xa2, 0x01, 0xff];
        }
    });
    let path = save(dir.path(), "hello-bad.jsonl", &rec);
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 1);
    assert!(has(&json, "breaking", "decode_errors", None), "{json}");
}

#[test]
fn a_vanished_step_type_is_breaking_when_the_whole_corpus_is_rerun() {
    // The corpus re-recorded with a new agy that numbers file edits 6.
    let dir = tempfile::tempdir().unwrap();
    for name in recording::list(&corpus()).unwrap() {
        let mut rec = load(&name);
        if name == "tools" {
            rec = mutate_steps(&rec, |w| {
                if step_type(w) == 5 {
                    w.values.insert("step_type".into(), SqlValue::Integer(6));
                    let p = payload(w).unwrap();
                    *p = rewrite(p, &mut |e, n, v| match (n, v) {
                        (1, Value::Varint(_)) => {
                            e.varint(1, 6);
                            true
                        }
                        _ => false,
                    });
                }
            });
        }
        save(dir.path(), &format!("{name}.jsonl"), &rec);
    }
    bin()
        .arg("drift")
        .arg(dir.path())
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "BREAKING: 5 (file edit): step type vanished (baseline: 1 steps, e.g. tools.jsonl)",
        ))
        .stdout(predicate::str::contains(
            "warning: 6 (unknown): new step type in 1 steps",
        ));
}

#[test]
fn databases_are_fingerprinted_too() {
    let dir = tempfile::tempdir().unwrap();
    let rec = load("tools");
    let db = dir
        .path()
        .join(format!("{}.db", rec.header.root_conversation));
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        schema::create(&conn).unwrap();
        let opts = recording::ApplyOptions {
            skip_permissions: true,
            ..Default::default()
        };
        for (i, c) in rec.effective_commits(&opts) {
            recording::apply_commit(&conn, i, c, &opts).unwrap();
        }
    }
    bin()
        .arg("drift")
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::ends_with("no drift\n"));

    // The legacy 4-column table loses the side columns.
    let legacy = dir.path().join("legacy.db");
    let conn = rusqlite::Connection::open(&legacy).unwrap();
    conn.execute(schema::LEGACY_STEPS_DDL, []).unwrap();
    conn.execute(
        "INSERT INTO steps VALUES (0, 14, 3, ?1)",
        [{
            let mut e = Encoder::new();
            e.varint(1, 14).varint(4, 3).message(19, |m| {
                m.string(2, "hi");
            });
            e.finish()
        }],
    )
    .unwrap();
    drop(conn);
    bin()
        .arg("drift")
        .arg(&legacy)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "BREAKING: column steps.metadata vanished [read by the decoder]",
        ))
        .stdout(predicate::str::contains(
            "warning: table gen_metadata vanished",
        ));
}

#[test]
fn unreadable_inputs_exit_2() {
    bin()
        .args(["drift", "/nonexistent/x.jsonl"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("agy-bridge: error:"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("b.json");
    std::fs::write(&bad, "{}").unwrap();
    bin()
        .args(["drift", "--baseline"])
        .arg(&bad)
        .arg(corpus().join("hello.jsonl"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("baseline"));
}
