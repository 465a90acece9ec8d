//! The recording corpus: the files in `recordings/` are exactly what
//! `agy_synth` builds, and each one's decoded, merged event stream is
//! pinned by an insta snapshot.
//!
//! Regenerate the files after changing the synthesiser with
//! `AGY_BRIDGE_UPDATE_CORPUS=1 cargo test --test corpus`, then review the diff
//! and the snapshot changes (`cargo insta review`).

use agy_bridge::follow::events::{self, Event};
use agy_bridge::follow::poller;
use agy_bridge::follow::transcript::{merge, Transcript};
use agy_corpus::recording::{self, Recording};
use agy_format::steps;
use agy_synth as synth;
use std::path::Path;

/// agy ended before it created a conversation (no database, no steps).
fn before_conversation(rec: &Recording) -> bool {
    rec.header
        .outcome
        .as_ref()
        .is_some_and(|o| o.before_conversation)
}

fn decoded(rec: &Recording) -> Vec<Event> {
    let conn = rec
        .final_database(&rec.header.root_conversation)
        .expect("recording applies");
    let rows = agy_format::database::read_all(&conn, Path::new(":memory:")).expect("rows");
    let steps: Vec<_> = rows.iter().map(steps::decode).collect();
    merge(events::decode_all(&steps))
}

#[test]
fn corpus_files_match_the_synthesiser() {
    let dir = recording::bundled_dir();
    let update = std::env::var_os("AGY_BRIDGE_UPDATE_CORPUS").is_some();
    let mut stale = Vec::new();
    for (name, rec) in synth::corpus() {
        let path = dir.join(format!("{name}.jsonl"));
        let want = rec.to_jsonl();
        if update {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("create corpus dir");
            }
            std::fs::write(&path, &want).expect("write corpus file");
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(have) if have == want => {}
            _ => stale.push(name),
        }
    }
    assert!(
        stale.is_empty(),
        "recordings out of date with crates/synth/src/: {stale:?}; run AGY_BRIDGE_UPDATE_CORPUS=1 cargo test --test corpus"
    );
}

#[test]
fn corpus_has_every_required_recording() {
    let names = recording::list(&recording::bundled_dir()).expect("recordings dir");
    for required in [
        "hello",
        "thinking",
        "tools",
        "resume",
        "unicode",
        "quota-error",
        "long-answer",
        "subagent",
        "unknown-steps",
        "placeholder",
        "equal-rewrite",
        "permission",
    ] {
        assert!(names.iter().any(|n| n == required), "missing {required}");
    }
    assert!(names.len() >= 12);
}

#[test]
fn corpus_files_parse_and_round_trip() {
    for (name, rec) in synth::corpus() {
        let parsed = Recording::parse(&rec.to_jsonl()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed, rec, "{name}");
    }
}

/// Apply the root conversation's commits one at a time to a WAL database on
/// disk and poll after each: the stream a poller with perfect resolution
/// sees, deterministically (no timing involved).
fn replayed(rec: &Recording) -> Vec<Event> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conv.db");
    let writer = rusqlite::Connection::open(&path).expect("open");
    writer
        .pragma_update(None, "journal_mode", "wal")
        .expect("wal");
    agy_format::schema::create(&writer).expect("schema");
    let mut poller = poller::Poller::new(&path, None);
    let opts = recording::ApplyOptions {
        skip_permissions: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    for (i, commit) in rec.effective_commits(&opts) {
        if commit.db != rec.header.root_conversation {
            continue;
        }
        recording::apply_commit(&writer, i, commit, &opts).expect("apply");
        match poller.poll() {
            poller::Poll::Ready(events) => out.extend(events),
            poller::Poll::NotReady(e) => panic!("poll: {e}"),
        }
    }
    out
}

/// Text longer than this is snapshotted as its length and a hash, so a
/// snapshot stays readable (long-answer's 210 KB answer).
const SNAPSHOT_TEXT_LIMIT: usize = 4096;

/// FNV-1a, 64 bits: a hash that never changes with the toolchain.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `text`, or past [`SNAPSHOT_TEXT_LIMIT`] its length and hash.
fn digested(text: String) -> String {
    if text.len() <= SNAPSHOT_TEXT_LIMIT {
        return text;
    }
    format!(
        "<{} bytes, fnv1a64 {:016x}>",
        text.len(),
        fnv1a64(text.as_bytes())
    )
}

/// Text and thinking events with long content digested.
fn for_snapshot(events: Vec<Event>) -> Vec<Event> {
    events
        .into_iter()
        .map(|e| match e {
            Event::Text { idx, text } => Event::Text {
                idx,
                text: digested(text),
            },
            Event::Thinking { idx, text } => Event::Thinking {
                idx,
                text: digested(text),
            },
            other => other,
        })
        .collect()
}

#[test]
fn replayed_streams_match_snapshots() {
    for (name, rec) in synth::corpus() {
        let events = for_snapshot(merge(replayed(&rec)));
        insta::assert_json_snapshot!(name.replace('/', "__"), events);
    }
}

#[test]
fn long_text_is_digested_and_short_text_kept() {
    let long = "x".repeat(SNAPSHOT_TEXT_LIMIT + 1);
    let events = for_snapshot(vec![
        Event::Text {
            idx: 1,
            text: long.clone(),
        },
        Event::Thinking {
            idx: 1,
            text: "short".into(),
        },
    ]);
    let want = format!(
        "<{} bytes, fnv1a64 {:016x}>",
        SNAPSHOT_TEXT_LIMIT + 1,
        fnv1a64(long.as_bytes())
    );
    assert_eq!(
        events,
        vec![
            Event::Text { idx: 1, text: want },
            Event::Thinking {
                idx: 1,
                text: "short".into()
            },
        ]
    );
    // FNV-1a's published test vectors: "" and "a".
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
}

#[test]
fn replayed_streams_amount_to_the_final_decode() {
    for (name, rec) in synth::corpus() {
        let live = Transcript::from_events(replayed(&rec));
        let once = Transcript::from_events(decoded(&rec));
        assert_eq!(live, once, "{name}");
    }
}

#[test]
fn equal_length_rewrite_is_reported() {
    let rec = synth::corpus()
        .into_iter()
        .find(|(n, _)| *n == "equal-rewrite")
        .map(|(_, r)| r)
        .expect("equal-rewrite");
    let events = replayed(&rec);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Rewrite { text, .. } if text == "The answer is 42.")),
        "{events:?}"
    );
}

#[test]
fn answers_equal_the_recorded_stdout() {
    for (name, rec) in synth::corpus() {
        if rec.header.exit_code != 0 || rec.header.stdout.is_empty() {
            continue;
        }
        // No conversation, no database: what agy printed (a slash
        // command's answer) is in no step.
        if before_conversation(&rec) {
            continue;
        }
        // `stdout` is what `-p` prints, which replays the first stdin turn.
        let mut rec = rec;
        rec.commits.retain(|c| c.turn == 0);
        let transcript = Transcript::from_events(decoded(&rec));
        // The printed answer is the last planner response's text.
        let last_text = transcript
            .steps
            .values()
            .flatten()
            .rev()
            .find_map(|e| match e {
                Event::Text { text, .. } => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        // Real agy answers keep their final newline; the text printed
        // ends with exactly one.
        assert_eq!(
            last_text.trim_end_matches('\n'),
            rec.stdout_text(),
            "{name}"
        );
    }
}

#[test]
fn hello_grows_over_at_least_five_commits() {
    let rec = synth::corpus()
        .into_iter()
        .find(|(n, _)| *n == "hello")
        .map(|(_, r)| r)
        .expect("hello");
    let growth = rec
        .commits
        .iter()
        .filter(|c| {
            c.writes
                .iter()
                .any(|w| w.table == "steps" && w.key.get("idx").and_then(|v| v.as_i64()) == Some(2))
        })
        .count();
    assert!(growth >= 5, "{growth}");
}

#[test]
fn long_answer_is_over_200_kb() {
    let rec = synth::corpus()
        .into_iter()
        .find(|(n, _)| *n == "long-answer")
        .map(|(_, r)| r)
        .expect("long-answer");
    assert!(rec.stdout_text().len() >= 200_000);
}

#[test]
fn user_input_is_never_thinking() {
    for (name, rec) in synth::corpus() {
        for event in decoded(&rec) {
            if let Event::Thinking { text, .. } = &event {
                assert_ne!(
                    text, &rec.header.prompt,
                    "{name}: prompt echoed as thinking"
                );
            }
        }
    }
}

#[test]
fn prompts_are_distinct_across_the_corpus() {
    let mut seen = std::collections::BTreeMap::new();
    for (name, rec) in synth::corpus() {
        if let Some(other) = seen.insert(rec.header.prompt.clone(), name) {
            panic!(
                "{name} and {other} share the prompt {:?}",
                rec.header.prompt
            );
        }
    }
}

#[test]
fn outcome_recordings_name_the_capture_they_follow() {
    for (name, rec) in synth::corpus() {
        if !name.starts_with("outcomes/") {
            continue;
        }
        let recording::Provenance::Synthesized {
            follows: Some(follows),
            ..
        } = &rec.header.provenance
        else {
            panic!("{name}: no provenance.follows");
        };
        assert!(!follows.contains("shared"), "{name}: {follows}");
        assert_eq!(
            rec.header.version_output,
            format!("{}\n", rec.header.agy_version),
            "{name}"
        );
        // A killed run printed no result: no status, no error to check.
        if rec.header.outcome.as_ref().is_some_and(|o| o.killed) {
            assert_ne!(rec.header.exit_code, 0, "{name}");
            assert!(!rec.commits.is_empty(), "{name}: killed before starting");
            continue;
        }
        // A recorded failure says so in its outcome, and its error is what
        // stderr (or, when stderr is silent, the result alone) carries.
        if rec.header.exit_code != 0 {
            let outcome = rec.header.outcome.as_ref().expect("outcome");
            assert_eq!(outcome.status, "ERROR", "{name}");
            let error = outcome.error.as_deref().expect("error");
            let first = error.lines().next().unwrap_or_default();
            assert!(
                rec.header.stderr.is_empty()
                    || rec.header.stderr.contains(first)
                    || name.contains("signed-out"),
                "{name}: stderr does not name {first:?}"
            );
        }
        if before_conversation(&rec) {
            assert!(rec.commits.is_empty(), "{name}");
        }
    }
}

/// The per-call usage in metadata 9 is what the stream reports: every
/// finished planner response of an outcome recording carries it.
#[test]
fn outcome_recordings_carry_usage_on_every_model_call() {
    for (name, rec) in synth::corpus() {
        if !name.starts_with("outcomes/") || rec.commits.is_empty() {
            continue;
        }
        let conn = rec
            .final_database(&rec.header.root_conversation)
            .expect("applies");
        let rows = agy_format::database::read_all(&conn, Path::new(":memory:")).expect("rows");
        let planners: Vec<_> = rows
            .iter()
            .map(steps::decode)
            .filter(|s| s.step_type == steps::StepType::PlannerResponse)
            .filter(|s| s.status == steps::StepStatus::Done)
            .collect();
        for p in &planners {
            let usage = p.metadata.as_ref().and_then(|m| m.usage.as_ref());
            assert!(
                usage.is_some_and(|u| u.input_tokens > 0 && u.output_tokens > 0),
                "{name}: step {} has no usage",
                p.idx
            );
        }
        // The prompt is step 0, as agy numbers it.
        assert_eq!(
            rows.first().map(|r| (r.idx, r.step_type)),
            Some((0, 14)),
            "{name}"
        );
    }
}
