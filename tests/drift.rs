//! `agy-bridge drift` as a maintainer runs it: the corpus shows no drift
//! against its committed baseline, a real agy step gives no breaking finding,
//! and mutated copies of recordings (payloads rewritten with the library's
//! encoder) are each judged as a person would: omitted zero values and
//! content carried by an alternative field are notes, a wire-type change or a
//! moved field the decoder reads is breaking, a new step type is a warning,
//! and an empty input is "nothing to compare", not a breaking change.
//!
//! The checks that compare with a baseline take a [`Corpus`] (a recordings
//! directory and its baseline) and compute every count they expect from
//! that baseline, never from numbers typed in here: they run on the
//! repository's corpus, and again (`the_readme_path_stays_green`) on a copy
//! to which a new agy's recording was added and whose baseline was
//! regenerated with README's command, as a new maintainer would.

mod common;

use agy_corpus::drift::{self, Fingerprint, PathKey, SIGNIFICANCE};
use agy_corpus::recording::{self, Recording, SqlValue, Write};
use agy_format::schema;
use agy_format::steps::StepType;
use agy_format::wire::{self, Encoder, Value};
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

fn load(name: &str) -> Recording {
    Recording::load(&corpus().join(format!("{name}.jsonl"))).expect("recording")
}

/// README's "Recording a new agy version" command that regenerates the
/// baseline, run from the repository root: `recordings/` reads every
/// recording below it (`outcomes/`, `mcp/`).
const README_UPDATE: &str =
    "agy-bridge drift --update-baseline recordings/schema-baseline.json recordings/";

/// A corpus and its baseline, loaded with the library's drift types: the
/// repository's, or a copy a test changed the way a maintainer would. The
/// checks that compare with a baseline take one, and derive every count
/// they expect from its baseline, so they hold for any corpus whose
/// baseline is current.
struct Corpus {
    dir: PathBuf,
    baseline: PathBuf,
    fp: Fingerprint,
}

/// How often the baseline saw a path where it could be (`had` of `of`
/// steps), and the chance that `n` steps all lack it, as drift computes it.
struct Share {
    had: u64,
    of: u64,
    n: u64,
    chance: f64,
}

impl Share {
    /// Whether drift takes `n` steps without the path as evidence.
    fn is_evidence(&self) -> bool {
        self.chance < SIGNIFICANCE
    }

    /// `in 26 of 27`, as a report gives the baseline's count.
    fn counts(&self) -> String {
        format!("in {} of {}", self.had, self.of)
    }

    /// `chance 3.7%`.
    fn chance(&self) -> String {
        format!("chance {:.1}%", self.chance * 100.0)
    }
}

impl Corpus {
    fn bundled() -> Corpus {
        Corpus::at(corpus(), drift::bundled_baseline())
    }

    fn at(dir: PathBuf, baseline: PathBuf) -> Corpus {
        let fp = Fingerprint::load(&baseline).expect("baseline loads");
        Corpus { dir, baseline, fp }
    }

    fn load(&self, name: &str) -> Recording {
        Recording::load(&self.dir.join(format!("{name}.jsonl"))).expect("recording")
    }

    /// `agy-bridge drift --baseline <this baseline>`.
    fn drift(&self) -> Command {
        let mut cmd = bin();
        cmd.arg("drift").arg("--baseline").arg(&self.baseline);
        cmd
    }

    /// `drift --json` of `paths` against this baseline.
    fn run_json(&self, paths: &[&Path]) -> (i32, Json) {
        let out = self
            .drift()
            .arg("--json")
            .args(paths)
            .output()
            .expect("run drift");
        let json: Json = serde_json::from_slice(&out.stdout).expect("drift --json prints JSON");
        (out.status.code().unwrap_or(-1), json)
    }

    /// Baseline steps of `step_type` carrying `path` (`None`: all of them).
    fn steps(&self, step_type: i64, path: Option<&str>) -> u64 {
        let Some(t) = self.fp.step_types.get(&step_type) else {
            return 0;
        };
        match path {
            Some(p) => t
                .paths
                .get(&PathKey(p.to_string()))
                .map_or(0, |pp| pp.steps),
            None => t.steps,
        }
    }

    /// The baseline's example source of `step_type`.
    fn example(&self, step_type: i64) -> String {
        self.fp.step_types[&step_type].example.clone()
    }

    /// The evidence a report gives that `path` is missing from `n` steps of
    /// `step_type` that carry `scope` (the whole step when `None`).
    fn share(&self, step_type: i64, path: &str, scope: Option<&str>, n: u64) -> Share {
        let (had, of) = (
            self.steps(step_type, Some(path)),
            self.steps(step_type, scope),
        );
        assert!(had > 0, "the baseline has no {step_type}: {path}");
        let share = (had as f64 / of as f64).min(1.0);
        let chance = (1.0 - share).powi(n as i32);
        Share { had, of, n, chance }
    }

    /// The fewest steps lacking `path` that drift takes as evidence.
    fn evidence(&self, step_type: i64, path: &str, scope: Option<&str>) -> Share {
        (1..=1000)
            .map(|n| self.share(step_type, path, scope, n))
            .find(Share::is_evidence)
            .expect("some number of steps is evidence")
    }

    /// The first field number from `from` with no path `<parent>.<n>` in the
    /// baseline's `step_type` at all: a field agy has never written there.
    fn unseen_field(&self, step_type: i64, parent: &str, from: u32) -> u32 {
        let t = &self.fp.step_types[&step_type];
        (from..)
            .find(|n| !t.paths.contains_key(&PathKey(format!("{parent}.{n}"))))
            .unwrap()
    }
}

/// The file names of `n` copies of one input: `stem.ext` alone, else
/// `stem-001.ext`, ... (sorted as listed, so the first is a report's
/// example).
fn copy_names(stem: &str, ext: &str, n: u64) -> Vec<String> {
    match n {
        1 => vec![format!("{stem}.{ext}")],
        _ => (1..=n).map(|i| format!("{stem}-{i:03}.{ext}")).collect(),
    }
}

/// Save `n` copies of `rec` in `dir` (see [`copy_names`]).
fn save_copies(dir: &Path, stem: &str, rec: &Recording, n: u64) -> Vec<PathBuf> {
    copy_names(stem, "jsonl", n)
        .iter()
        .map(|name| save(dir, name, rec))
        .collect()
}

/// `1 step`, `3 steps`.
fn steps_text(n: u64) -> String {
    match n {
        1 => "1 step".to_string(),
        n => format!("{n} steps"),
    }
}

/// Every recording under `dir`, in every subdirectory, sorted.
fn recordings_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(recordings_under(&path));
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// What [`README_UPDATE`] passes: the corpus directory, which drift reads
/// at every depth.
fn update_inputs(dir: &Path) -> Vec<PathBuf> {
    vec![dir.to_path_buf()]
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
    column(w, "step_payload")
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

/// Rewrite the fields of the message at `path` (`[20]`: the planner body;
/// `[5, 9]`: the usage inside the metadata), keeping everything else.
fn rewrite_at(
    buf: &[u8],
    path: &[u32],
    f: &mut dyn FnMut(&mut Encoder, u32, Value<'_>) -> bool,
) -> Vec<u8> {
    let Some((first, rest)) = path.split_first() else {
        return rewrite(buf, f);
    };
    rewrite(buf, &mut |e, n, v| match (n, v) {
        (n, Value::Len(body)) if n == *first => {
            e.bytes(n, &rewrite_at(body, rest, f));
            true
        }
        _ => false,
    })
}

/// Rewrite the fields of the planner body (payload field 20).
fn rewrite_planner(p: &[u8], f: &mut dyn FnMut(&mut Encoder, u32, Value<'_>) -> bool) -> Vec<u8> {
    rewrite_at(p, &[20], f)
}

/// Drop field `number` of the message at `path`.
fn drop_field(buf: &[u8], path: &[u32], number: u32) -> Vec<u8> {
    rewrite_at(buf, path, &mut |_, n, _| n == number)
}

/// Renumber field `from` of the message at `path` to `to`.
fn renumber(buf: &[u8], path: &[u32], from: u32, to: u32) -> Vec<u8> {
    rewrite_at(buf, path, &mut |e, n, v| {
        if n == from {
            e.value(to, &v);
            true
        } else {
            false
        }
    })
}

fn column<'a>(w: &'a mut Write, name: &str) -> Option<&'a mut Vec<u8>> {
    match w.values.get_mut(name) {
        Some(SqlValue::Blob(b)) => Some(b),
        _ => None,
    }
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

/// The corpus shows no drift against its baseline: README's inputs, and
/// every recording under the corpus directory by file, as JSON.
fn check_no_drift(c: &Corpus) {
    c.drift()
        .args(update_inputs(&c.dir))
        .assert()
        .success()
        .stdout(predicate::str::ends_with("no drift\n"));
    let files = recordings_under(&c.dir);
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (code, json) = c.run_json(&refs);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["breaking"], 0, "{json}");
    assert_eq!(json["additive"], 0, "{json}");
    assert_eq!(json["findings"], Json::Array(vec![]), "{json}");
}

/// Every recording under the corpus directory, however deep, is a source
/// of the baseline, and `drift` of each directory alone warns of nothing.
fn check_every_recording_is_covered(c: &Corpus) {
    let files = recordings_under(&c.dir);
    let mut dirs: Vec<&Path> = Vec::new();
    for file in &files {
        let name = drift::source_name(file);
        assert!(
            c.fp.sources.contains(&name),
            "{} is not in {}: run `{README_UPDATE}`",
            file.display(),
            c.baseline.display()
        );
        let dir = file.parent().unwrap();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    assert!(
        dirs.len() > 1,
        "the corpus has recordings in subdirectories"
    );
    for dir in dirs {
        let (code, json) = c.run_json(&[dir]);
        assert_eq!(code, 0, "{}: {json}", dir.display());
        assert_eq!(json["breaking"], 0, "{}: {json}", dir.display());
        assert_eq!(json["additive"], 0, "{}: {json}", dir.display());
        c.drift()
            .arg(dir)
            .assert()
            .success()
            .stdout(predicate::str::contains("warning:").not())
            .stdout(predicate::str::ends_with("no drift\n"));
    }
}

/// The baseline is what README's command writes for the corpus.
fn check_baseline_is_current(c: &Corpus) {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("baseline.json");
    bin()
        .args(["drift", "--update-baseline"])
        .arg(&fresh)
        .args(update_inputs(&c.dir))
        .assert()
        .success()
        .stdout(predicate::str::contains(" sources, "));
    let want = std::fs::read_to_string(&fresh).unwrap();
    let have = std::fs::read_to_string(&c.baseline).unwrap();
    assert!(
        want == have,
        "{} is stale: run `{README_UPDATE}`",
        c.baseline.display()
    );
}

#[test]
fn corpus_shows_no_drift_against_its_baseline() {
    check_no_drift(&Corpus::bundled());
    // The same corpus with no --baseline: the default one is this tree's.
    bin()
        .arg("drift")
        .arg(corpus())
        .assert()
        .success()
        .stdout(predicate::str::ends_with("no drift\n"));
}

#[test]
fn every_recording_under_recordings_is_covered_by_the_baseline() {
    check_every_recording_is_covered(&Corpus::bundled());
}

#[test]
fn baseline_is_up_to_date() {
    check_baseline_is_current(&Corpus::bundled());
}

#[test]
fn readme_gives_the_update_command_and_the_check() {
    let readme = std::fs::read_to_string(corpus().join("../README.md")).unwrap();
    let start = readme
        .find("## Recording a new agy version")
        .expect("README has the section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    assert!(section.contains(README_UPDATE), "README: `{README_UPDATE}`");
    assert!(section.contains("cargo test --workspace --no-fail-fast"));
}

#[test]
fn a_single_recording_shows_no_drift_and_notes_what_it_does_not_exercise() {
    bin()
        .args(["drift"])
        .arg(corpus().join("hello.jsonl"))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "coverage: these inputs have no steps of these baseline types, so they were not checked: 5 (file edit)",
        ))
        .stdout(predicate::str::contains(
            "coverage: baseline fields these inputs lack where that could well be chance (not checked): 15 (planner response): ",
        ))
        .stdout(predicate::str::contains("20.3 (planner response thinking)"))
        .stdout(predicate::str::ends_with("no drift\n"));
}

/// The planner text (20.1) renumbered to a field agy never wrote there is
/// breaking, in as few copies of hello's planner step as the baseline's
/// share of 20.1 makes evidence (one, unless agy often omits the text).
fn check_renumbered_text(c: &Corpus) {
    let dir = tempfile::tempdir().unwrap();
    let to = c.unseen_field(15, "20", 21);
    let rec = move_planner_text(&c.load("hello"), to);
    let share = c.evidence(15, "20.1", Some("20"));
    let paths = save_copies(dir.path(), "hello", &rec, share.n);
    let example = drift::source_name(&paths[0]);
    let steps = steps_text(share.n);
    let (counts, chance) = (share.counts(), share.chance());
    let mut cmd = c.drift();
    cmd.args(&paths)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "BREAKING: 15 (planner response): 20.1 (planner response text) is absent in {steps} where the unread length-delimited field 20.{to} (unknown to the decoder, inside planner response) now appears instead, never beside it (baseline: {counts} steps that carry 20 (planner response); {chance}; e.g. {example}): its content probably moved there and would not be shown\n",
        )))
        .stdout(predicate::str::contains(format!(
            "warning: 15 (planner response): new field 20.{to} (unknown to the decoder, inside planner response) with wire type len in {n} of {n} steps (e.g. {example})\n",
            n = share.n
        )))
        .stdout(predicate::str::contains("1 breaking, 1 additive"));
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (code, json) = c.run_json(&refs);
    assert_eq!(code, 1, "{json}");
    assert!(has(&json, "breaking", "missing_load_bearing", Some("20.1")));
    assert!(has(
        &json,
        "additive",
        "new_path",
        Some(&format!("20.{to}"))
    ));
}

#[test]
fn renumbered_text_field_is_breaking() {
    check_renumbered_text(&Corpus::bundled());
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
            "BREAKING: 15 (planner response): 20.1 (planner response text) changed wire type from len to varint in 1 of 1 steps (e.g. thinking.jsonl): the decoder reads it as len, so it would be misread or dropped\n",
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
            stream_error: None,
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
            "warning: step type 200 (unknown) is new: 1 step with 3 field paths (the decoder does not know it and skips such steps); e.g. hello-plus.jsonl\n",
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
            "warning: new column steps.trace_id; the decoder does not read it\n",
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
            "BREAKING: column steps.permissions vanished: the decoder reads it\n",
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

/// The whole corpus re-recorded with a new agy that numbers file edits
/// (5) as a type neither the decoder nor the baseline knows: breaking, with
/// the baseline's count and example of file edits.
fn check_vanished_step_type(c: &Corpus) {
    let dir = tempfile::tempdir().unwrap();
    let to = (6..)
        .find(|t| !c.fp.step_types.contains_key(t) && !StepType::from_raw(*t).is_known())
        .unwrap();
    for file in recordings_under(&c.dir) {
        let rec = Recording::load(&file).expect("recording");
        let rec = mutate_steps(&rec, |w| {
            if step_type(w) == 5 {
                w.values.insert("step_type".into(), SqlValue::Integer(to));
                let p = payload(w).unwrap();
                *p = rewrite(p, &mut |e, n, v| match (n, v) {
                    (1, Value::Varint(_)) => {
                        e.varint(1, to as u64);
                        true
                    }
                    _ => false,
                });
            }
        });
        // One directory: the file names are what the baseline lists.
        save(dir.path(), &drift::source_name(&file), &rec);
    }
    let edits = match c.steps(5, None) {
        0 => panic!("the baseline has no file edit"),
        1 => "1 step".to_string(),
        n => format!("{n} steps"),
    };
    let example = c.example(5);
    c.drift()
        .arg(dir.path())
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "BREAKING: step type 5 (file edit) no longer appears although these inputs include every baseline recording (baseline: {edits}, e.g. {example}), and step types the decoder does not know appeared ({to}): its steps have probably been renumbered and would not be shown\n",
        )))
        .stdout(predicate::str::contains(format!(
            "warning: step type {to} (unknown) is new: {edits} with ",
        )));
}

#[test]
fn a_vanished_step_type_is_breaking_when_the_whole_corpus_is_rerun() {
    check_vanished_step_type(&Corpus::bundled());
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
            "BREAKING: column steps.metadata vanished: the decoder reads it\n",
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

/// Findings of a `--json` report with this class.
fn classes(json: &Json, class: &str) -> Vec<String> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["class"] == class)
        .map(|f| f["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A usage with cache_read 0 and no stop reason: proto3 leaves both out,
/// and drift never calls that breaking. Each absence is a note where the
/// baseline makes one step without it evidence, else coverage.
fn check_omitted_zeros(c: &Corpus) {
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&c.load("hello"), |w| {
        if step_type(w) != 15 {
            return;
        }
        let p = payload(w).unwrap();
        *p = drop_field(&drop_field(p, &[5, 9], 5), &[20], 12);
        if let Some(m) = column(w, "metadata") {
            *m = drop_field(m, &[9], 5);
        }
    });
    let path = save(dir.path(), "hello-zeros.jsonl", &rec);
    let (code, json) = c.run_json(&[&path]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["breaking"], 0, "{json}");
    for (field, scope) in [
        ("5.9.5", "5.9"),
        ("metadata.9.5", "metadata.9"),
        ("20.12", "20"),
    ] {
        let share = c.share(15, field, Some(scope), 1);
        let noted = has(&json, "info", "absent_path", Some(field));
        assert_eq!(noted, share.is_evidence(), "{field}: {json}");
        let listed = json["not_seen"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Json::as_str)
            .filter(|s| s.starts_with("15 (planner response): "))
            .any(|s| s.contains(&drift::describe_path(field)));
        assert_eq!(listed, !share.is_evidence(), "{field}: {json}");
    }
    let share = c.share(15, "5.9.5", Some("5.9"), 1);
    let note = format!(
        "note: 15 (planner response): 5.9.5 (metadata usage cache read tokens) is absent from the one step that carries 5.9 (metadata usage) (baseline: {}; {}; e.g. hello-zeros.jsonl); proto3 omits zero and empty values, so this loses nothing\n",
        share.counts(),
        share.chance()
    );
    let note = if share.is_evidence() {
        predicate::str::contains(note).boxed()
    } else {
        predicate::str::contains(note).not().boxed()
    };
    c.drift()
        .arg(&path)
        .assert()
        .success()
        .stdout(note)
        .stdout(predicate::str::ends_with("no drift\n"));
}

#[test]
fn omitted_zero_values_are_notes_not_breaking() {
    check_omitted_zeros(&Corpus::bundled());
}

#[test]
fn load_bearing_text_carried_by_the_modified_response_is_not_breaking() {
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("hello"), |w| {
        if step_type(w) == 15 {
            let p = payload(w).unwrap();
            *p = renumber(p, &[20], 1, 8);
        }
    });
    // As many such steps as make the absence of 20.1 evidence.
    let c = Corpus::bundled();
    let n = c.evidence(15, "20.1", Some("20")).n;
    let paths = save_copies(dir.path(), "hello-modified", &rec, n);
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (code, json) = c.run_json(&refs);
    assert_eq!(code, 0, "{json}");
    assert!(
        has(&json, "info", "carried_elsewhere", Some("20.1")),
        "{json}"
    );
    assert!(classes(&json, "info").iter().any(|m| m.contains(
        "but 20.8 (planner response modified response), which the decoder reads instead, carries its content"
    )));
}

#[test]
fn generic_tool_name_carried_by_its_second_field_is_not_breaking() {
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("orchestration"), |w| {
        if step_type(w) == 132 {
            let p = payload(w).unwrap();
            *p = renumber(p, &[5, 4], 2, 9);
        }
    });
    let path = save(dir.path(), "orchestration-name9.jsonl", &rec);
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 0, "{json}");
    assert!(
        has(&json, "info", "carried_elsewhere", Some("5.4.2")),
        "{json}"
    );
}

#[test]
fn a_command_that_printed_nothing_is_not_breaking() {
    // run_command output (28.21) is load-bearing, but empty output is
    // omitted: with nothing unread in its place it is a note.
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("tools"), |w| {
        if step_type(w) == 21 {
            let p = payload(w).unwrap();
            *p = drop_field(p, &[28], 21);
        }
    });
    let path = save(dir.path(), "tools-quiet.jsonl", &rec);
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 0, "{json}");
    assert!(has(&json, "info", "absent_path", Some("28.21")), "{json}");
}

#[test]
fn a_subagent_without_its_child_id_is_breaking() {
    // 127.1 is load-bearing and never empty: gone with nothing carrying it.
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("subagent"), |w| {
        if step_type(w) == 127 {
            let p = payload(w).unwrap();
            *p = drop_field(p, &[127], 1);
        }
    });
    let path = save(dir.path(), "subagent-noid.jsonl", &rec);
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 1, "{json}");
    assert!(
        has(&json, "breaking", "missing_load_bearing", Some("127.1")),
        "{json}"
    );
    assert!(classes(&json, "breaking").iter().any(|m| m.contains(
        "127.1 (subagent child conversation id) is absent from the one step that carries 127 (subagent)"
    ) && m.ends_with("nothing the decoder reads carries it: it would be lost")), "{json}");
}

#[test]
fn a_bookkeeping_step_that_fails_to_decode_is_only_a_warning() {
    // Conversation history (98) carries nothing a user sees.
    let dir = tempfile::tempdir().unwrap();
    let rec = mutate_steps(&load("orchestration"), |w| {
        if step_type(w) == 98 {
            *payload(w).unwrap() = vec![0x08, 0x62, 0x92, 0x06, 0xff];
        }
    });
    let path = save(dir.path(), "orchestration-bad98.jsonl", &rec);
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 0, "{json}");
    assert!(has(&json, "additive", "decode_errors", None), "{json}");
}

#[ignore = "needs AGY_CAPTURES_DIR (real agy captures)"]
#[test]
fn real_user_input_step_gives_no_breaking_finding() {
    let dir = common::captures_dir();
    let file = Path::new(&dir).join("other/real-user-input-step.json");
    let text = std::fs::read_to_string(&file).expect("real-user-input-step.json");
    let row: Json = serde_json::from_str(&text).expect("JSON");
    let hex = |key: &str| -> Vec<u8> {
        let s = row[key].as_str().expect("hex string");
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("real-user-input.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    schema::create(&conn).unwrap();
    conn.execute(
        "INSERT INTO steps (idx, step_type, status, metadata, step_payload) VALUES (?1, ?2, ?3, ?4, ?5)",
        rusqlite::params![
            row["idx"].as_i64().unwrap(),
            row["step_type"].as_i64().unwrap(),
            row["status"].as_i64().unwrap(),
            hex("metadata"),
            hex("step_payload"),
        ],
    )
    .unwrap();
    drop(conn);
    let (code, json) = run_json(&[&db]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["breaking"], 0, "{json}");
    // It did compare: the step is there, and what it lacks is coverage.
    assert_eq!(json["nothing_to_compare"], false);
    assert!(json["not_exercised"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "15 (planner response)"));
}

#[test]
fn an_empty_directory_is_nothing_to_compare() {
    let dir = tempfile::tempdir().unwrap();
    bin()
        .arg("drift")
        .arg(dir.path())
        .assert()
        .code(3)
        .stdout(predicate::str::starts_with(
            "drift: nothing to compare: no recording or database to read.\nlooked at: ",
        ))
        .stdout(predicate::str::contains(
            "(a directory with 0 .jsonl file(s) in it and below)",
        ))
        .stdout(predicate::str::contains("BREAKING").not())
        .stdout(predicate::str::contains("vanished").not());
    let (code, json) = run_json(&[dir.path()]);
    assert_eq!(code, 3);
    assert_eq!(json["nothing_to_compare"], true);
    assert_eq!(json["breaking"], 0);
    assert_eq!(json["findings"], Json::Array(vec![]));
    // Nor does it overwrite a baseline with an empty one.
    let out = dir.path().join("baseline.json");
    bin()
        .args(["drift", "--update-baseline"])
        .arg(&out)
        .arg(dir.path())
        .assert()
        .code(3)
        .stderr(predicate::str::contains("nothing to write"));
    assert!(!out.exists());
}

#[test]
fn a_database_without_steps_is_nothing_to_compare() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fresh.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    schema::create(&conn).unwrap();
    drop(conn);
    bin()
        .arg("drift")
        .arg(&db)
        .assert()
        .code(3)
        .stdout(predicate::str::contains(
            "drift: nothing to compare: 1 input(s) read (fresh.db), but none holds a step.",
        ));
}

/// A recording whose `steps` writes carry a column named `trace_id`.
fn with_trace_id(rec: &Recording) -> Recording {
    mutate_steps(rec, |w| {
        w.values
            .insert("trace_id".into(), SqlValue::Text("t-1".into()));
    })
}

#[test]
fn writing_an_undeclared_column_is_breaking_and_decode_refuses_it_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = save(
        dir.path(),
        "hello-trace.jsonl",
        &with_trace_id(&load("hello")),
    );
    // decode cannot replay it ...
    bin()
        .arg("decode")
        .arg(&path)
        .assert()
        .failure()
        .stderr(predicate::str::contains("trace_id"));
    // ... and drift says so instead of "no drift".
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 1, "{json}");
    assert!(
        has(&json, "breaking", "unknown_write", Some("steps.trace_id")),
        "{json}"
    );
    bin()
        .arg("drift")
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "BREAKING: hello-trace.jsonl writes column steps.trace_id, which its own schema does not declare",
        ));

    // Declared by the recording's own (captured) schema: a newer agy's
    // column, a warning that names why decode refuses it.
    let mut declared = with_trace_id(&load("hello"));
    declared.header.schema = ddl_with_steps(&schema::DDL[1].replace(
        ",`step_format` integer NOT NULL DEFAULT 0,",
        ",`step_format` integer NOT NULL DEFAULT 0,`trace_id` text,",
    ));
    let path = save(dir.path(), "hello-trace-declared.jsonl", &declared);
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 0, "{json}");
    assert!(
        has(&json, "additive", "unknown_write", Some("steps.trace_id")),
        "{json}"
    );
    assert!(has(&json, "additive", "new_column", None), "{json}");
}

#[test]
fn writing_a_table_agy_does_not_have_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = load("hello");
    let last = rec.commits.last().unwrap().clone();
    rec.commits.push(recording::Commit {
        t_ms: last.t_ms + 10,
        writes: vec![Write {
            table: "traces".into(),
            op: Default::default(),
            key: BTreeMap::from([("idx".to_string(), SqlValue::Integer(0))]),
            values: BTreeMap::new(),
            stream_error: None,
        }],
        ..last
    });
    let path = save(dir.path(), "hello-traces.jsonl", &rec);
    bin().arg("decode").arg(&path).assert().failure();
    let (code, json) = run_json(&[&path]);
    assert_eq!(code, 1, "{json}");
    assert!(
        has(&json, "breaking", "unknown_write", Some("traces")),
        "{json}"
    );
}

/// Move the planner text (20.1) of every version of every type-15 step to
/// field `to`, still length-delimited, carrying the same text.
fn move_planner_text(rec: &Recording, to: u32) -> Recording {
    mutate_steps(rec, |w| {
        if step_type(w) == 15 {
            let p = payload(w).unwrap();
            *p = renumber(p, &[20], 1, to);
        }
    })
}

/// Add a length-delimited field `number` (unknown to the decoder) to the
/// planner body of every type-15 step.
fn add_planner_field(rec: &Recording, number: u32) -> Recording {
    mutate_steps(rec, |w| {
        if step_type(w) == 15 {
            let p = payload(w).unwrap();
            *p = rewrite_at(p, &[], &mut |e, n, v| match (n, v) {
                (20, Value::Len(body)) => {
                    let mut body = body.to_vec();
                    let mut extra = Encoder::new();
                    extra.string(number, "a new planner field");
                    body.extend(extra.finish());
                    e.bytes(20, &body);
                    true
                }
                _ => false,
            });
        }
    })
}

/// A database holding what `rec` wrote, as agy would leave it.
fn database_of(rec: &Recording, path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    schema::create(&conn).unwrap();
    let opts = recording::ApplyOptions {
        skip_permissions: true,
        ..Default::default()
    };
    for (i, c) in rec.effective_commits(&opts) {
        recording::apply_commit(&conn, i, c, &opts).unwrap();
    }
}

#[test]
fn text_moved_to_an_unread_field_the_baseline_knows_by_another_wire_type_is_breaking() {
    // The baseline has a planner field the decoder does not read, but never
    // length-delimited (20.2, a fixed64 in unknown-steps.jsonl); here it is
    // length-delimited and carries the text 20.1 no longer does.
    let c = Corpus::bundled();
    let planner = &c.fp.step_types[&15];
    let field = planner
        .paths
        .iter()
        .filter(|(p, pp)| {
            p.0.strip_prefix("20.")
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                && !pp.wire.contains_key("len")
                && !drift::known_paths().contains_key(&p.0)
        })
        .map(|(p, _)| p.0.clone())
        .next()
        .expect("the baseline has an unread planner field that is not length-delimited");
    let number: u32 = field["20.".len()..].parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = move_planner_text(&c.load("hello"), number);
    // As many such steps as make the absence of 20.1 evidence, as
    // recordings and as databases.
    let share = c.evidence(15, "20.1", Some("20"));
    let recordings = save_copies(dir.path(), "hello-moved", &rec, share.n);
    let dbs: Vec<PathBuf> = copy_names(&rec.header.root_conversation, "db", share.n)
        .iter()
        .map(|name| {
            let db = dir.path().join(name);
            database_of(&rec, &db);
            db
        })
        .collect();
    let (counts, chance) = (share.counts(), share.chance());
    let steps = steps_text(share.n);
    for inputs in [&recordings, &dbs] {
        let name = source_name(&inputs[0]);
        let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
        let (code, json) = c.run_json(&refs);
        assert_eq!(code, 1, "{json}");
        assert!(
            has(&json, "breaking", "missing_load_bearing", Some("20.1")),
            "{json}"
        );
        c.drift()
            .args(&refs)
            .assert()
            .code(1)
            .stdout(predicate::str::contains(format!(
                "BREAKING: 15 (planner response): 20.1 (planner response text) is absent in {steps} where the unread length-delimited field {field} (unknown to the decoder, inside planner response) now appears instead, never beside it (baseline: {counts} steps that carry 20 (planner response); {chance}; e.g. {name}): its content probably moved there and would not be shown\n",
            )))
            .stdout(predicate::str::contains("note: 15 (planner response): 20.1").not());
    }
}

#[test]
fn an_answer_without_text_stays_a_note_when_nothing_unread_takes_its_place() {
    let dir = tempfile::tempdir().unwrap();
    // An empty answer: proto3 leaves 20.1 out, and nothing takes its place.
    let empty = mutate_steps(&load("hello"), |w| {
        if step_type(w) == 15 {
            let p = payload(w).unwrap();
            *p = drop_field(p, &[20], 1);
        }
    });
    // The same answer only calls a tool, and the tool call (another message
    // than the one 20.1 belongs to) carries a new field the decoder does not
    // read: that is not where the text went.
    let tool_only = mutate_steps(&empty, |w| {
        if step_type(w) == 15 {
            let p = payload(w).unwrap();
            *p = rewrite_at(p, &[], &mut |e, n, v| match (n, v) {
                (20, Value::Len(body)) => {
                    let mut body = body.to_vec();
                    let mut call = Encoder::new();
                    call.message(7, |c| {
                        c.string(1, "call_1")
                            .string(2, "run_command")
                            .string(3, "{\"CommandLine\":\"ls\"}")
                            .string(20, "a new tool call field");
                    });
                    body.extend(call.finish());
                    e.bytes(20, &body);
                    true
                }
                _ => false,
            });
        }
    });
    // As many such steps as make the absence of 20.1 evidence.
    let c = Corpus::bundled();
    let n = c.evidence(15, "20.1", Some("20")).n;
    let absent = match n {
        1 => "the one step that carries".to_string(),
        n => format!("all {n} steps that carry"),
    };
    for (name, rec) in [("hello-empty", &empty), ("hello-tool-only", &tool_only)] {
        let paths = save_copies(dir.path(), name, rec, n);
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let (code, json) = c.run_json(&refs);
        assert_eq!(code, 0, "{name}: {json}");
        assert_eq!(json["breaking"], 0, "{name}: {json}");
        assert!(
            has(&json, "info", "absent_path", Some("20.1")),
            "{name}: {json}"
        );
        assert!(
            classes(&json, "info").iter().any(|m| m.starts_with(&format!(
                "15 (planner response): 20.1 (planner response text) is absent from {absent} 20 (planner response)"
            )) && m.ends_with("so these steps most likely had none")),
            "{name}: {json}"
        );
    }
}

#[test]
fn an_unread_field_in_other_steps_is_not_paired_with_the_vanished_path() {
    // Two inputs: in hello's planner step the text moved to 20.2; in
    // thinking's, the text is still in 20.1 and a new field 20.9 sits
    // beside it. The text is lost where 20.2 replaced it (breaking, naming
    // 20.2), but 20.9 appears only in a step that kept its text: it is new,
    // not where the text went.
    // As many moved steps as make the absence of 20.1 evidence.
    let c = Corpus::bundled();
    let n = c.evidence(15, "20.1", Some("20")).n;
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = save_copies(
        dir.path(),
        "hello-moved",
        &move_planner_text(&load("hello"), 2),
        n,
    );
    let beside = save(
        dir.path(),
        "thinking-beside.jsonl",
        &add_planner_field(&load("thinking"), 9),
    );
    inputs.push(beside.clone());
    let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let (code, json) = c.run_json(&refs);
    assert_eq!(code, 1, "{json}");
    let breaking = classes(&json, "breaking");
    assert_eq!(breaking.len(), 1, "{json}");
    let steps = steps_text(n);
    assert!(breaking[0].contains(&format!("20.1 (planner response text) is absent in {steps} where the unread length-delimited field 20.2 ")), "{json}");
    assert!(!breaking[0].contains("20.9"), "{json}");
    assert!(has(&json, "additive", "new_path", Some("20.9")), "{json}");

    // 20.9 alone, beside the text in every step: a new field, nothing lost.
    let (code, json) = c.run_json(&[&beside]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["breaking"], 0, "{json}");
    assert!(has(&json, "additive", "new_path", Some("20.9")), "{json}");
}

fn source_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// Copy `from` into `to`, subdirectories and all.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// What agy 1.3.0 might write for tools.jsonl's scenario: the version
/// moved on, every planner body carries a new varint field 20.21 (README's
/// example report has a new 20.21 too), and no call read the cache, so
/// proto3 leaves the cache-read counts (5.9.5, metadata.9.5) out.
fn agy_1_3_recording(c: &Corpus) -> Recording {
    let mut rec = mutate_steps(&c.load("tools"), |w| {
        if step_type(w) != 15 {
            return;
        }
        let p = payload(w).unwrap();
        *p = rewrite_at(
            &drop_field(p, &[5, 9], 5),
            &[],
            &mut |e, n, v| match (n, v) {
                (20, Value::Len(body)) => {
                    let mut body = body.to_vec();
                    let mut extra = Encoder::new();
                    extra.varint(21, 1);
                    body.extend(extra.finish());
                    e.bytes(20, &body);
                    true
                }
                _ => false,
            },
        );
        if let Some(m) = column(w, "metadata") {
            *m = drop_field(m, &[9], 5);
        }
    });
    rec.header.agy_version = "1.3.0".into();
    rec.header.version_output = "1.3.0\n".into();
    rec.header.description = format!("agy 1.3.0: {}", rec.header.description);
    rec
}

/// Run README's baseline command from `root` (which holds `recordings/`),
/// with this build's agy-bridge first on `PATH`.
fn run_readme_update(root: &Path) {
    let bin_dir = assert_cmd::cargo::cargo_bin("agy-bridge")
        .parent()
        .unwrap()
        .to_path_buf();
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(&inherited)))
            .unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(README_UPDATE)
        .current_dir(root)
        .env("PATH", path)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "{README_UPDATE}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_readme_path_stays_green() {
    // A copy of the corpus, with a new agy's recording added as README's
    // "Recording a new agy version" says.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let dir = root.join("recordings");
    copy_tree(&corpus(), &dir);
    let baseline = dir.join(drift::BASELINE_FILE);
    let before = Corpus::at(dir.clone(), baseline.clone());
    let name = "agy-1.3.0-tools.jsonl";
    let new = save(root, name, &agy_1_3_recording(&before));
    // 3. Drift: something new, nothing breaking.
    let (code, json) = before.run_json(&[&new]);
    assert_eq!(code, 0, "{json}");
    assert!(has(&json, "additive", "new_path", Some("20.21")), "{json}");
    // 5. Add it and regenerate the baseline with README's command.
    std::fs::copy(&new, dir.join(name)).unwrap();
    run_readme_update(root);
    let after = Corpus::at(dir, baseline);
    assert!(
        after.fp.sources.iter().any(|s| s == name),
        "{:?}",
        after.fp.sources
    );
    assert_ne!(after.fp, before.fp, "the new recording moved the baseline");
    // The drift tests' checks hold against the updated baseline.
    check_baseline_is_current(&after);
    check_no_drift(&after);
    check_every_recording_is_covered(&after);
    check_renumbered_text(&after);
    check_omitted_zeros(&after);
    check_vanished_step_type(&after);
}

/// README's "You have a new agy version": a conformance report written
/// into the corpus (here against fake-agy), the baseline regenerated with
/// README's command, and the drift tests' checks hold again.
#[test]
fn the_conformance_path_stays_green() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let dir = root.join("recordings");
    copy_tree(&corpus(), &dir);
    let report = dir.join("agy-9.9.9");
    let out = common::bridge("conformance", root, "hello", "50")
        .arg("--out")
        .arg(&report)
        .output()
        .expect("run conformance");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let added = recordings_under(&report).len();
    assert!(added >= 10, "{added} recordings in the report");
    run_readme_update(root);
    let after = Corpus::at(dir.clone(), dir.join(drift::BASELINE_FILE));
    check_baseline_is_current(&after);
    check_no_drift(&after);
    check_every_recording_is_covered(&after);
}

/// A directory is read at every depth (a conformance report's
/// `recordings/agy-<version>/recordings/` is two down), and a file named
/// twice, alone and in its directory, counts once.
#[test]
fn directories_are_read_at_every_depth_and_each_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("agy-9.9.9").join("recordings");
    std::fs::create_dir_all(&deep).unwrap();
    save(dir.path(), "top.jsonl", &load("hello"));
    let nested = save(&deep, "nested.jsonl", &load("tools"));
    let out = tempfile::tempdir().unwrap();
    bin()
        .args(["drift", "--update-baseline"])
        .arg(out.path().join("baseline.json"))
        .arg(dir.path())
        .arg(&nested)
        .assert()
        .success()
        .stdout(predicate::str::contains(": 2 sources, "));
}
