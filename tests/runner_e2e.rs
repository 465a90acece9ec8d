//! The runner end to end: fake-agy stands in for agy, in a temporary HOME.
//! Assertions are about content, order and generous bounds; timing precision
//! lives in `benches/latency.rs`.

mod common;

use agy_bridge::follow::discovery::BindMethod;
use agy_bridge::follow::events::Event;
use agy_bridge::follow::transcript::Transcript;
use agy_bridge::runner::failure::Failure;
use agy_bridge::runner::{RunEvent, TurnRequest, WakeMode};
use agy_corpus::recording;
use agy_format::agy_args::BindMode;
use agy_format::ids::ConversationId;
use common::*;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_while_agy_is_still_running() {
    let home = Home::new();
    let out = run(home.config("hello", 1.0), "Say hello").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    let first_text = out
        .events
        .iter()
        .find(|(_, e)| matches!(e, RunEvent::Agy(Event::Text { .. })))
        .map(|(t, _)| t.duration_since(out.started))
        .expect("a text event");
    let total = Duration::from_millis(out.result.duration_ms);
    // hello's text grows over ~1 s after its first chunk; the first delta must
    // land well before agy exits, not in one burst at the end.
    assert!(
        first_text + Duration::from_millis(400) < total,
        "first text at {first_text:?}, run took {total:?}"
    );
    let text_events = out
        .agy_events()
        .iter()
        .filter(|e| matches!(e, Event::Text { .. }))
        .count();
    assert!(text_events >= 2, "text came in {text_events} piece(s)");
    assert_eq!(out.transcript(), expected(&load("hello")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recording_streams_exactly_its_content() {
    let names = recording::list(&recording::bundled_dir()).expect("corpus");
    assert!(names.len() >= 12);
    for name in names {
        let home = Home::new();
        let rec = load(&name);
        let out = run(home.config(&name, 8.0), &rec.header.prompt).await;
        assert_eq!(out.transcript(), expected(&rec), "{name}");
        assert!(
            out.result.conversation_id.is_some(),
            "{name}: {:?}",
            out.result.failure
        );
        if rec.header.exit_code == 0 {
            assert!(out.result.ok(), "{name}: {:?}", out.result.failure);
            assert_eq!(out.result.stdout, rec.header.stdout, "{name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_streams_only_the_new_turn() {
    let home = Home::new();
    let first = run(home.config("hello", 10.0), "Say hello").await;
    let id = first.result.conversation_id.clone().expect("bound");
    let last = first.result.last_idx.expect("last idx");

    let req = TurnRequest {
        prompt: "Any suggestions?".into(),
        conversation: Some(ConversationId::parse(&id).expect("id")),
        ..TurnRequest::default()
    };
    let second = run_with(home.config("resume", 10.0), req, CancellationToken::new()).await;
    assert!(second.result.ok(), "{:?}", second.result.failure);
    assert_eq!(second.result.conversation_id.as_deref(), Some(id.as_str()));
    assert_eq!(second.result.bind_method, Some(BindMethod::Given));
    let events = second.agy_events();
    assert!(!events.is_empty());
    assert!(
        events.iter().all(|e| e.idx() > last),
        "old steps re-streamed: {events:?}"
    );
    let transcript = second.transcript();
    assert!(
        transcript.text().contains("proptest"),
        "{}",
        transcript.text()
    );
    assert!(!transcript.text().contains("Hello! I'm agy"));
    // The new turn's user input is there, as user input.
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::UserInput { text, .. } if text == "Any suggestions?")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_concurrent_runs_each_bind_their_own_database() {
    let names = recording::list(&recording::bundled_dir()).expect("corpus");
    assert!(
        names.len() >= 16,
        "need 16 distinct recordings, have {}",
        names.len()
    );
    let names: Vec<String> = names.into_iter().take(16).collect();
    for round in 0..5 {
        // One HOME, one conversations directory, all sixteen at once.
        let home = Home::new();
        let mut handles = Vec::new();
        for name in &names {
            let mut cfg = home.config(name, 6.0);
            // agy records the prompt it is given (here the note naming the
            // turn's private prompt file), which is what binds a run whose
            // agy exited before discovery saw it hold its database (a loaded
            // machine): then its running evidence is gone, and the prompt
            // alone tells the sixteen apart.
            cfg.env.push(("FAKE_AGY_GIVEN_PROMPT".into(), "1".into()));
            let rec = load(name);
            let name = name.clone();
            handles.push(tokio::spawn(async move {
                let out = run(cfg, &rec.header.prompt).await;
                (name, rec, out)
            }));
        }
        let mut ids = Vec::new();
        for h in handles {
            let (name, rec, out) = h.await.expect("join");
            let id = out
                .result
                .conversation_id
                .clone()
                .unwrap_or_else(|| panic!("round {round} {name}: {:?}", out.result.failure));
            assert_eq!(
                prompt_as_given(out.transcript(), &rec.header.prompt),
                expected(&rec),
                "round {round}: {name}"
            );
            ids.push(id);
        }
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            ids.len(),
            "round {round}: two runs bound one database"
        );
    }
}

/// Once agy has exited, its open files no longer show which new database
/// is its: with another run's database new beside it, only agy's own record
/// of the prompt it was given (the note naming this turn's private prompt
/// file, unique to the turn) tells them apart. Here the runner looks only
/// at agy's start (before any database is new) and at its exit, as on a
/// loaded machine: no notifications, no tick during the run, and agy (in
/// text mode) prints nothing that wakes it; the other run's database
/// appears in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_agy_exited_unseen_binds_by_the_prompt_it_gave() {
    let home = Home::new();
    let started = home.dir.path().join("argv.log");
    let mut cfg = home.config("hello", 4.0);
    cfg.wake = WakeMode::PollOnly;
    cfg.poll_interval = Duration::from_secs(600);
    cfg.env.extend([
        ("FAKE_AGY_GIVEN_PROMPT".into(), "1".into()),
        ("FAKE_AGY_DB_DELAY_MS".into(), "2000".into()),
        ("FAKE_AGY_ARGV_LOG".into(), started.display().to_string()),
    ]);
    let ours = tokio::spawn(async move { run(cfg, "Say hello").await });
    // The other run starts once ours has taken its snapshot: agy's first
    // invocation (a feature probe, or the turn) comes after it, and the
    // turn's database two seconds after the turn starts.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&started).map_or(true, |m| m.len() == 0) {
        assert!(Instant::now() < deadline, "fake-agy never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let other = run(
        home.config("thinking", 4.0),
        &load("thinking").header.prompt,
    )
    .await;
    assert!(other.result.ok(), "{:?}", other.result.failure);
    let out = ours.await.expect("join");
    assert_eq!(
        out.result.bind_method,
        Some(BindMethod::PromptMatch),
        "{:?}",
        out.result.failure
    );
    assert_ne!(out.result.conversation_id, other.result.conversation_id);
    assert_eq!(
        prompt_as_given(out.transcript(), "Say hello"),
        expected(&load("hello"))
    );
}

/// `t` with the bridge's note for `prompt` (a user input naming the file
/// the prompt was saved to) read as the prompt it stands for. Every other
/// user input stays as it was, to equal the recording's: the prompt itself
/// (given on agy's stdin), or an earlier turn's.
fn prompt_as_given(mut t: Transcript, prompt: &str) -> Transcript {
    let note = format!(
        "[agy-bridge: the user's message ({} bytes) was saved to the file",
        prompt.len()
    );
    for e in t.steps.values_mut().flatten() {
        if let Event::UserInput { text, .. } = e {
            if text.starts_with(&note) {
                *text = prompt.to_string();
            }
        }
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_run_binds_the_parent() {
    let home = Home::new();
    let rec = load("subagent");
    let out = run(home.config("subagent", 4.0), &rec.header.prompt).await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    let events = out.agy_events();
    let child = events
        .iter()
        .find_map(|e| match e {
            Event::Subagent {
                conversation_id, ..
            } => Some(conversation_id.clone()),
            _ => None,
        })
        .expect("subagent event");
    assert_ne!(out.result.conversation_id.as_deref(), Some(child.as_str()));
    // The child's database exists beside the parent's: binding had a choice.
    assert!(home.conversations().join(format!("{child}.db")).is_file());
    assert_eq!(out.transcript(), expected(&rec));
    assert!(out.transcript().text().contains("researcher subagent"));
    // Its end carries its task's answer, read from its own database.
    let answer = events.iter().find_map(|e| match e {
        Event::SubagentEnded { answer, .. } => answer.clone(),
        _ => None,
    });
    assert_eq!(
        answer.as_deref(),
        Some("`parse_config` is called from src/main.rs:12 and src/cli.rs:40, both with a &Path.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_modes_stream_json_and_discovery() {
    for (mode, want) in [
        (BindMode::StreamJson, vec![BindMethod::StreamJson]),
        (
            BindMode::Discovery,
            vec![BindMethod::SnapshotDiff, BindMethod::ProcessTree],
        ),
    ] {
        let home = Home::new();
        let mut cfg = home.config("thinking", 8.0);
        cfg.bind = mode;
        let out = run(cfg, "q").await;
        assert!(out.result.ok(), "{mode:?}: {:?}", out.result.failure);
        let how = out.result.bind_method.expect("bound");
        assert!(want.contains(&how), "{mode:?} bound by {how:?}");
        assert_eq!(out.transcript(), expected(&load("thinking")));
    }
    // Auto: agy 1.2.8 supports stream-json; 1.1.4 does not.
    for (name, want) in [
        ("hello", BindMethod::StreamJson),
        ("models-v1", BindMethod::SnapshotDiff),
    ] {
        let home = Home::new();
        let mut cfg = home.config(name, 8.0);
        cfg.bind = BindMode::Auto;
        // The version probe runs `fake-agy --version`, which reads the
        // recording from our environment, not the child's.
        cfg.agy_bin = write_wrapper(&home, name);
        let out = run(cfg, "q").await;
        let how = out.result.bind_method.expect("bound");
        if want == BindMethod::SnapshotDiff {
            assert!(
                matches!(how, BindMethod::SnapshotDiff | BindMethod::ProcessTree),
                "{name}: {how:?}"
            );
        } else {
            assert_eq!(how, want, "{name}");
        }
    }
}

/// A tiny wrapper script that pins the recording for every invocation.
fn write_wrapper(home: &Home, recording: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = home.dir.path().join(format!("agy-{recording}"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nFAKE_AGY_RECORDING={recording} exec {} \"$@\"\n",
            fake_agy().display()
        ),
    )
    .expect("write wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_only_mode_streams_the_same_content() {
    let home = Home::new();
    let mut cfg = home.config("tools", 8.0);
    cfg.wake = WakeMode::PollOnly;
    cfg.poll_interval = Duration::from_millis(50);
    let out = run(cfg, "q").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    assert_eq!(out.transcript(), expected(&load("tools")));
}

// ----- faults -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_during_generation_kills_the_whole_tree() {
    let home = Home::new();
    let pidfile = home.dir.path().join("grandchild.pid");
    let mut cfg = home.config("long-answer", 0.5);
    cfg.env.push(("FAKE_AGY_GRANDCHILD".into(), "1".into()));
    cfg.env.push((
        "FAKE_AGY_GRANDCHILD_PIDFILE".into(),
        pidfile.display().to_string(),
    ));
    let cancel = CancellationToken::new();
    let (tx, mut rx) = agy_bridge::runner::event_channel();
    let req = TurnRequest {
        prompt: "Write a long report".into(),
        ..TurnRequest::default()
    };
    let c2 = cancel.clone();
    let task = tokio::spawn(async move { agy_bridge::runner::run(&cfg, &req, c2, tx).await });
    let mut agy_pid = 0;
    let mut saw_text = false;
    while let Some(ev) = rx.recv().await {
        match ev {
            RunEvent::Started { pid } => agy_pid = pid,
            RunEvent::Agy(Event::Text { .. }) => {
                saw_text = true;
                break;
            }
            _ => {}
        }
    }
    assert!(saw_text);
    let abort_at = Instant::now();
    cancel.cancel();
    let mut aborted_after = None;
    while let Some(ev) = rx.recv().await {
        if matches!(ev, RunEvent::Aborted) {
            aborted_after = Some(abort_at.elapsed());
        }
    }
    let result = task.await.expect("join");
    assert!(result.aborted);
    assert_eq!(result.failure, Some(Failure::Aborted));
    assert!(aborted_after.expect("aborted event") < Duration::from_secs(1));
    // No process of agy's tree is left, and agy itself was reaped.
    assert!(
        !exists(agy_pid),
        "agy {agy_pid} left behind (zombie or running)"
    );
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .expect("grandchild pid")
        .trim()
        .parse()
        .expect("pid");
    assert!(
        common::eventually(Duration::from_secs(10), || !alive(grandchild)),
        "grandchild {grandchild} survived the abort"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_timeout_stops_agy() {
    let home = Home::new();
    let mut cfg = home.config("long-answer", 0.1);
    cfg.timeout = Duration::from_millis(1500);
    let out = run(cfg, "q").await;
    assert!(out.result.timed_out);
    assert!(matches!(out.result.failure, Some(Failure::TimedOut { .. })));
    assert!(out
        .events
        .iter()
        .any(|(_, e)| matches!(e, RunEvent::TimedOut)));
    assert!(
        out.result.duration_ms < 10_000,
        "{}",
        out.result.duration_ms
    );
    let failure = out.result.failure.expect("failure");
    let msg = failure.to_string();
    // Not retried: a retry would run agy for another whole period.
    assert!(msg.contains("did not finish within"), "{msg}");
    assert!(!failure.retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_agy_binary_is_reported() {
    let home = Home::new();
    let mut cfg = home.config("hello", 1.0);
    cfg.agy_bin = home.dir.path().join("no-such-agy");
    let out = run(cfg, "q").await;
    let failure = out.result.failure.expect("failure");
    assert!(
        matches!(failure, Failure::NotInstalled { .. }),
        "{failure:?}"
    );
    assert!(failure.to_string().contains("not installed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonzero_exit_keeps_stderr() {
    let home = Home::new();
    let mut cfg = home.config("hello", 10.0);
    cfg.env
        .push(("FAKE_AGY_CRASH_AT_COMMIT".into(), "4".into()));
    cfg.env
        .push(("FAKE_AGY_CRASH_MODE".into(), "exit:3".into()));
    let out = run(cfg, "q").await;
    assert_eq!(out.result.exit_code, Some(3));
    match out.result.failure.expect("failure") {
        Failure::AgyFailed { code, message } => {
            assert_eq!(code, 3);
            assert!(!message.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert!(!out.result.stderr_tail.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_never_created_fails_safe() {
    let home = Home::new();
    let mut cfg = home.config("hello", 10.0);
    cfg.env.push(("FAKE_AGY_NO_DB".into(), "1".into()));
    let out = run(cfg, "q").await;
    match out.result.failure.expect("failure") {
        Failure::CouldNotBind { reason } => {
            assert!(reason.contains("without creating"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(out.result.conversation_id.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_start_still_binds() {
    let home = Home::new();
    let mut cfg = home.config("hello", 10.0);
    cfg.env.push(("FAKE_AGY_DB_DELAY_MS".into(), "1500".into()));
    // A tight ambiguity budget proves that waiting is not counted as ambiguity.
    cfg.ambiguity_budget = Duration::from_millis(100);
    let out = run(cfg, "q").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    assert_eq!(out.transcript(), expected(&load("hello")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_run_keeps_what_streamed() {
    let home = Home::new();
    let mut cfg = home.config("hello", 4.0);
    cfg.env
        .push(("FAKE_AGY_CRASH_AT_COMMIT".into(), "5".into()));
    cfg.env
        .push(("FAKE_AGY_CRASH_MODE".into(), "sigkill".into()));
    let out = run(cfg, "q").await;
    assert_eq!(out.result.signal, Some(9));
    assert_eq!(
        out.result.failure,
        Some(Failure::Stopped {
            how: "signal 9".into()
        })
    );
    let text = out.transcript().text();
    assert!(!text.is_empty(), "nothing streamed before the crash");
    let full = load("hello").header.stdout;
    assert!(
        full.starts_with(&text) && text.len() < full.trim_end().len(),
        "{text:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_hang_names_the_cause() {
    let home = Home::new();
    let mut cfg = home.config("permission", 8.0);
    cfg.skip_permissions = false;
    cfg.permission_stall = Duration::from_millis(800);
    let out = run(cfg, "Run the tests").await;
    let failure = out.result.failure.expect("failure");
    assert!(
        matches!(&failure, Failure::PermissionStall { tool } if tool == "run_command"),
        "{failure:?}"
    );
    assert!(failure.to_string().contains("permission"));
    assert!(out.result.duration_ms < 20_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_error_carries_agys_message() {
    let home = Home::new();
    let out = run(home.config("quota-error", 8.0), "q").await;
    assert_eq!(out.result.exit_code, Some(1));
    match out.result.failure.clone().expect("failure") {
        Failure::QuotaExceeded { message, .. } => {
            assert!(message.contains("exhausted your capacity"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(out.agy_events().iter().any(
        |e| matches!(e, Event::Error { message, .. } if message.contains("quota will reset"))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_steps_do_not_stop_the_stream() {
    let home = Home::new();
    let out = run(home.config("unknown-steps", 8.0), "q").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    let events = out.agy_events();
    let unknown: Vec<i64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Unknown { step_type, .. } => Some(*step_type),
            _ => None,
        })
        .collect();
    assert_eq!(unknown, vec![250, 77]);
    // Text after the first unknown step still arrived, and so did the step after it.
    assert!(Transcript::from_events(events).text().starts_with("Done."));
    assert_eq!(out.result.last_idx, Some(5));
}

/// An agy whose stream-json `init` line names no conversation (older than
/// 1.1.8, or a changed init) is bound by discovery while it runs, on proof
/// (our agy holds the database open), not after the 3 s grace for the
/// line: here agy never exits, and the binding comes well inside the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_init_id_discovery_binds_on_proof_inside_the_grace() {
    let home = Home::new();
    let mut cfg = home.config("hello", 8.0);
    cfg.bind = BindMode::StreamJson;
    cfg.env
        .push(("FAKE_AGY_FAULT".into(), "init-without-id".into()));
    cfg.env.push(("FAKE_AGY_HANG".into(), "1".into()));
    let req = TurnRequest {
        prompt: "Say hello".into(),
        ..TurnRequest::default()
    };
    let (tx, mut rx) = agy_bridge::runner::event_channel();
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let turn = tokio::spawn(async move { agy_bridge::runner::run(&cfg, &req, stop, tx).await });
    let started = Instant::now();
    let bound = tokio::time::timeout(Duration::from_millis(2500), async {
        while let Some(ev) = rx.recv().await {
            if let RunEvent::Bound { method, .. } = ev {
                return Some(method);
            }
        }
        None
    })
    .await;
    cancel.cancel();
    while rx.recv().await.is_some() {}
    let result = turn.await.expect("turn");
    let method = bound
        .unwrap_or_else(|_| panic!("not bound within 2.5 s ({:?})", started.elapsed()))
        .expect("bound before the turn ended");
    assert!(
        matches!(method, BindMethod::SnapshotDiff | BindMethod::ProcessTree),
        "{method:?}"
    );
    assert!(result.conversation_id.is_some());
}

/// When agy's `init` line names the conversation discovery already bound,
/// the turn says it was bound by agy's word (the stronger evidence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_line_confirming_discovery_makes_it_agys_word() {
    for _ in 0..3 {
        let home = Home::new();
        let mut cfg = home.config("hello", 8.0);
        cfg.bind = BindMode::StreamJson;
        let out = run(cfg, "Say hello").await;
        assert!(out.result.ok(), "{:?}", out.result.failure);
        assert_eq!(out.result.bind_method, Some(BindMethod::StreamJson));
    }
}

// ----- the end of a turn ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_ends_once_agy_has_exited_and_its_database_is_read() {
    // Reads after agy's exit used to be spaced by `trailing_interval` come
    // what may; with nobody writing the database once agy is gone, the
    // turn ends at the first of them. An interval of 30 s makes the old
    // way take 90 s.
    let home = Home::new();
    let mut cfg = home.config("hello", 8.0);
    cfg.trailing_interval = Duration::from_secs(30);
    let started = Instant::now();
    let out = run(cfg, "Say hello").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    assert_eq!(out.transcript(), expected(&load("hello")));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the turn took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_still_holding_the_database_after_agy_is_read_to_its_commit() {
    // At its exit fake-agy leaves a process outside its group holding the
    // database's write lock, which commits one more step 400 ms later: the
    // trailing reads go on while the lock is held, and that step is read.
    let home = Home::new();
    let mut cfg = home.config("hello", 8.0);
    cfg.env
        .push(("FAKE_AGY_LATE_COMMIT_MS".into(), "400".into()));
    cfg.trailing_polls = 20;
    cfg.trailing_interval = Duration::from_millis(100);
    let recorded_last = load("hello")
        .commits
        .iter()
        .flat_map(|c| &c.writes)
        .filter(|w| w.table == "steps")
        .filter_map(|w| w.key.get("idx").and_then(recording::SqlValue::as_i64))
        .max()
        .expect("hello writes steps");
    let out = run(cfg, "Say hello").await;
    assert!(out.result.ok(), "{:?}", out.result.failure);
    assert_eq!(
        out.result.last_idx,
        Some(recorded_last + 1),
        "the late step was not read"
    );
}
