//! The poller's contract, against a real WAL database and a real writer.

use agy_bridge::follow::events::{Channel, Event};
use agy_bridge::follow::poller::{Poll, Poller};
use agy_format::database::ReadError;
use agy_format::steps::{
    Body, PlannerResponse, RunCommandResult, Step, StepStatus, StepType, ToolCall,
};
use rusqlite::Connection;
use std::path::Path;

fn writer(path: &Path) -> Connection {
    let w = Connection::open(path).expect("open");
    w.pragma_update(None, "journal_mode", "wal").expect("wal");
    agy_format::schema::create(&w).expect("schema");
    w
}

fn put(w: &Connection, step: &Step) {
    let row = step.to_row();
    w.execute(
        "INSERT OR REPLACE INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![row.idx, row.step_type, row.status, row.payload],
    )
    .expect("write");
}

fn text(idx: i64, status: StepStatus, t: &str) -> Step {
    Step::new(idx, StepType::PlannerResponse, status).with_body(Body::Planner(PlannerResponse {
        text: t.into(),
        ..PlannerResponse::default()
    }))
}

/// A database whose one step is still growing, and a poller that has read
/// it (the temporary directory lives as long as the first value).
fn one_growing_step(so_far: &str) -> (tempfile::TempDir, Connection, Poller) {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    let w = writer(&path);
    put(&w, &text(0, StepStatus::Generating, so_far));
    let mut p = Poller::new(&path, None);
    ready(&mut p);
    (dir, w, p)
}

fn ready(p: &mut Poller) -> Vec<Event> {
    match p.poll() {
        Poll::Ready(e) => e,
        Poll::NotReady(e) => panic!("not ready: {e}"),
    }
}

/// The poller's next poll finds the database without its `steps` table.
fn no_table_yet(p: &mut Poller) {
    assert!(matches!(
        p.poll(),
        Poll::NotReady(ReadError::NoStepsTable { .. })
    ));
}

/// The poller's next poll reads step `idx` as the answer `text`.
fn reads_answer(p: &mut Poller, idx: i64, text: &str) {
    assert_eq!(
        ready(p),
        vec![Event::Text {
            idx,
            text: text.into()
        }]
    );
}

#[test]
fn missing_file_then_missing_table_mean_not_ready() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    let mut p = Poller::new(&path, None);
    assert!(matches!(
        p.poll(),
        Poll::NotReady(ReadError::Missing { .. })
    ));
    assert!(!path.exists(), "the poller must never create the database");
    let w = Connection::open(&path).expect("open");
    w.pragma_update(None, "journal_mode", "wal").expect("wal");
    no_table_yet(&mut p);
    agy_format::schema::create(&w).expect("schema");
    put(&w, &text(0, StepStatus::Done, "hi"));
    reads_answer(&mut p, 0, "hi");
    // The look that found no table kept its connection for the next: the
    // schema is read on one connection, not one per look.
    assert_eq!(p.stats().opens, 1);
}

#[test]
fn a_database_first_seen_empty_is_read_on_the_same_connection_once_it_is_wal() {
    // agy's first notification is the file's creation: SQLite has written
    // nothing yet, not even the switch to WAL.
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    std::fs::File::create(&path).expect("create");
    let mut p = Poller::new(&path, None);
    no_table_yet(&mut p);
    let w = writer(&path);
    put(&w, &text(0, StepStatus::Done, "hi"));
    reads_answer(&mut p, 0, "hi");
    put(&w, &text(1, StepStatus::Done, "again"));
    reads_answer(&mut p, 1, "again");
    assert_eq!(p.stats().opens, 1);
}

#[test]
fn a_database_replaced_while_it_had_no_table_is_read_anew() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    let first = Connection::open(&path).expect("open");
    first
        .pragma_update(None, "journal_mode", "wal")
        .expect("wal");
    let mut p = Poller::new(&path, None);
    no_table_yet(&mut p);
    drop(first);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let w = writer(&path);
    put(&w, &text(0, StepStatus::Done, "hi"));
    reads_answer(&mut p, 0, "hi");
    assert_eq!(p.stats().opens, 2, "the new file is opened anew");
}

#[test]
fn idle_polls_run_no_row_select() {
    let (_dir, w, mut p) = one_growing_step("thinking about it");
    let before = p.stats();
    for _ in 0..50 {
        assert!(ready(&mut p).is_empty());
    }
    let after = p.stats();
    assert_eq!(
        after.row_selects, before.row_selects,
        "idle polls selected rows"
    );
    assert_eq!(after.version_checks, before.version_checks + 50);
    // One commit: exactly one SELECT (the new rows and the unfinished
    // newest step's re-read are one range).
    put(
        &w,
        &text(0, StepStatus::Generating, "thinking about it more"),
    );
    assert_eq!(
        ready(&mut p),
        vec![Event::Text {
            idx: 0,
            text: " more".into()
        }]
    );
    assert_eq!(p.stats().row_selects, after.row_selects + 1);
}

/// A step older than the newest read that has not finished (a tool still
/// running while agy wrote on) is read again beside the new rows, in the
/// same read: its growth and the new rows come together, in order.
#[test]
fn an_older_unfinished_step_is_read_again_beside_the_new_rows() {
    let (_dir, w, mut p) = one_growing_step("a");
    put(&w, &text(1, StepStatus::Done, "x"));
    assert_eq!(ready(&mut p).len(), 1);
    let before = p.stats();
    put(&w, &text(0, StepStatus::Generating, "a b"));
    put(&w, &text(2, StepStatus::Done, "y"));
    assert_eq!(
        ready(&mut p),
        vec![
            Event::Text {
                idx: 0,
                text: " b".into()
            },
            Event::Text {
                idx: 2,
                text: "y".into()
            }
        ]
    );
    assert_eq!(p.stats().row_selects, before.row_selects + 2);
}

#[test]
fn cursor_skips_history() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    let w = writer(&path);
    for i in 0..10 {
        put(&w, &text(i, StepStatus::Done, &format!("old {i}")));
    }
    let mut p = Poller::new(&path, Some(9));
    assert!(ready(&mut p).is_empty());
    put(&w, &text(10, StepStatus::Done, "new"));
    assert_eq!(
        ready(&mut p),
        vec![Event::Text {
            idx: 10,
            text: "new".into()
        }]
    );
    assert_eq!(p.last_idx(), Some(10));
}

#[test]
fn unfinished_tool_steps_are_reread_until_their_result_lands() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    let w = writer(&path);
    let call = ToolCall {
        id: "c1".into(),
        name: "run_command".into(),
        arguments: "{\"CommandLine\":\"ls\"}".into(),
    };
    let running = Step::new(0, StepType::RunCommand, StepStatus::Running).with_tool_call(call);
    put(&w, &running);
    put(&w, &text(1, StepStatus::Done, "meanwhile"));
    let mut p = Poller::new(&path, None);
    let first = ready(&mut p);
    assert!(matches!(&first[0], Event::ToolCall { name, .. } if name == "run_command"));
    assert!(!first.iter().any(|e| matches!(e, Event::ToolResult { .. })));
    let mut done = running.clone();
    done.status = StepStatus::Done;
    done.body = Some(Body::RunCommand(RunCommandResult {
        exit_code: Some(0),
        output: "a\nb\n".into(),
        command: Some("ls".into()),
        cwd: None,
    }));
    put(&w, &done);
    let second = ready(&mut p);
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(matches!(
        &second[0],
        Event::ToolResult {
            ok: true,
            exit_code: Some(0),
            ..
        }
    ));
    assert_eq!(p.unfinished().count(), 0);
}

#[test]
fn equal_length_rewrite_is_an_event() {
    let (_dir, w, mut p) = one_growing_step("value: 41");
    put(&w, &text(0, StepStatus::Generating, "value: 42"));
    assert_eq!(
        ready(&mut p),
        vec![Event::Rewrite {
            idx: 0,
            channel: Channel::Text,
            text: "value: 42".into()
        }]
    );
}

#[test]
fn no_read_transaction_is_held_between_polls() {
    let (dir, w, mut p) = one_growing_step("a");
    let path = dir.path().join("c.db");
    put(&w, &text(0, StepStatus::Generating, "ab"));
    // A reader holding a snapshot would make TRUNCATE report busy (1).
    let busy: i64 = w
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .expect("checkpoint");
    assert_eq!(busy, 0);
    assert_eq!(
        ready(&mut p),
        vec![Event::Text {
            idx: 0,
            text: "b".into()
        }]
    );
    // And our reader never checkpointed: the writer's WAL is still there.
    put(&w, &text(0, StepStatus::Done, "abc"));
    ready(&mut p);
    drop(p);
    let wal = path.with_extension("db-wal");
    assert!(wal.exists() && std::fs::metadata(&wal).expect("wal").len() > 0);
}

/// A checkpoint that restarts the WAL makes the next commits write at its
/// start, the WAL's length unchanged: they are seen as any other. (`look`:
/// one look of a settling poll, no window.)
#[test]
fn commits_after_the_wal_restarts_are_seen() {
    let (_dir, w, mut p) = one_growing_step("a");
    let look = |p: &mut Poller| match p.poll_settling(std::time::Duration::ZERO) {
        Poll::Ready(e) => e,
        Poll::NotReady(e) => panic!("not ready: {e}"),
    };
    let mut want = String::from("a");
    for round in 0..5 {
        for piece in ["b", "c"] {
            want.push_str(piece);
            put(&w, &text(0, StepStatus::Generating, &want));
            assert_eq!(
                look(&mut p),
                vec![Event::Text {
                    idx: 0,
                    text: piece.into()
                }],
                "round {round}"
            );
            // Nothing committed since: the look finds nothing.
            assert!(look(&mut p).is_empty(), "round {round}");
        }
        let busy: i64 = w
            .query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get(0))
            .expect("checkpoint");
        assert_eq!(busy, 0);
        assert!(look(&mut p).is_empty(), "round {round}");
    }
}

#[test]
fn legacy_four_column_table_is_read() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    let w = Connection::open(&path).expect("open");
    w.execute(agy_format::schema::LEGACY_STEPS_DDL, [])
        .expect("legacy");
    put(&w, &text(0, StepStatus::Done, "old format"));
    let mut p = Poller::new(&path, None);
    assert_eq!(
        ready(&mut p),
        vec![Event::Text {
            idx: 0,
            text: "old format".into()
        }]
    );
}

#[test]
fn a_locked_database_is_not_ready_then_reads() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    // A rollback-journal database held under an exclusive lock: readers get
    // SQLITE_BUSY, which must mean "try again", not an error.
    let w = Connection::open(&path).expect("open");
    agy_format::schema::create(&w).expect("schema");
    put(&w, &text(0, StepStatus::Done, "behind the lock"));
    w.execute_batch("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;")
        .expect("lock");
    let mut p = Poller::new(&path, None);
    match p.poll() {
        Poll::NotReady(ReadError::Locked { .. }) => {}
        Poll::NotReady(other) => panic!("expected locked, got {other}"),
        Poll::Ready(events) => panic!("read through an exclusive lock: {events:?}"),
    }
    w.execute_batch("COMMIT; PRAGMA locking_mode=NORMAL;")
        .expect("unlock");
    // NORMAL takes effect at the next access that releases the lock.
    let _: i64 = w
        .query_row("SELECT count(*) FROM steps", [], |r| r.get(0))
        .expect("touch");
    assert_eq!(
        ready(&mut p),
        vec![Event::Text {
            idx: 0,
            text: "behind the lock".into()
        }]
    );
}

/// The writer of the settling tests, as a process of its own, as agy is
/// (SQLite's locks are `fcntl` locks, which a process never sees among its
/// own): a write transaction held open, then committed. Run by
/// [`settling_writer`]; with no `POLLER_WRITER_DB` it does nothing, so
/// `--include-ignored` runs it harmlessly.
#[test]
#[ignore = "a helper process of the settling tests, not a test"]
fn writer_process() {
    let Some(db) = std::env::var_os("POLLER_WRITER_DB") else {
        return;
    };
    let text_now = std::env::var("POLLER_WRITER_TEXT").expect("text");
    let w = Connection::open(&db).expect("open");
    w.execute_batch("BEGIN IMMEDIATE").expect("begin");
    put(&w, &text(0, StepStatus::Generating, &text_now));
    // Written, not committed: the state of agy between its WAL write and
    // the end of its fsync. Say so, then hold it a while.
    let ready = std::path::PathBuf::from(format!("{}.ready", db.to_string_lossy()));
    std::fs::write(&ready, b"").expect("ready");
    std::thread::sleep(std::time::Duration::from_millis(100));
    w.execute_batch("COMMIT").expect("commit");
}

/// [`writer_process`] started on `db`: it holds a write transaction that
/// rewrites step 0 to `text` for 100 ms, then commits. Returns once the
/// transaction is open.
fn settling_writer(db: &Path, text: &str) -> std::process::Child {
    let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["writer_process", "--exact", "--ignored", "--quiet"])
        .env("POLLER_WRITER_DB", db)
        .env("POLLER_WRITER_TEXT", text)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("writer process");
    let ready = std::path::PathBuf::from(format!("{}.ready", db.display()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never began"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child
}

/// After a file notification the commit it announced may not be visible
/// yet (agy holds its write transaction; its fsync has not returned):
/// `poll_settling` keeps looking (version checks only) and reads the commit
/// as soon as it lands, without waiting out its window.
#[test]
fn a_settling_poll_reads_a_commit_that_lands_during_its_window() {
    let (dir, w, mut p) = one_growing_step("one");
    drop(w);
    let before = p.stats();
    let mut writer = settling_writer(&dir.path().join("c.db"), "one two");
    let window = std::time::Duration::from_secs(20);
    let started = std::time::Instant::now();
    let events = match p.poll_settling(window) {
        Poll::Ready(e) => e,
        Poll::NotReady(e) => panic!("not ready: {e}"),
    };
    let took = started.elapsed();
    assert!(writer.wait().expect("writer").success());
    assert_eq!(
        events,
        vec![Event::Text {
            idx: 0,
            text: " two".into()
        }]
    );
    // It read as soon as the commit landed, not at the end of its window.
    assert!(took < window / 2, "waited {took:?}");
    let after = p.stats();
    assert_eq!(
        after.polls,
        before.polls + 1,
        "one poll, however many looks"
    );
    assert!(after.version_checks > before.version_checks + 1);
    assert_eq!(after.row_selects, before.row_selects + 1);
    // A pause between each look and the next, none after the last.
    assert_eq!(
        after.pauses - before.pauses,
        after.version_checks - before.version_checks - 1,
        "{after:?}"
    );
}

/// With no write transaction open in another process (the test's own
/// writer is in this process, and POSIX locks never conflict within one),
/// every commit is visible already: a settling poll looks once, whatever
/// its window.
#[test]
fn with_no_writer_a_settling_poll_looks_once() {
    let (_dir, w, mut p) = one_growing_step("one");
    let before = p.stats();
    let window = std::time::Duration::from_secs(20);
    let started = std::time::Instant::now();
    match p.poll_settling(window) {
        Poll::Ready(e) => assert!(e.is_empty(), "{e:?}"),
        Poll::NotReady(e) => panic!("not ready: {e}"),
    }
    assert!(started.elapsed() < window / 2, "{:?}", started.elapsed());
    let after = p.stats();
    assert_eq!(after.row_selects, before.row_selects);
    assert_eq!(after.version_checks, before.version_checks + 1);
    assert_eq!(
        after.pauses, before.pauses,
        "slept with nothing to wait for"
    );
    drop(w);
}

/// A commit read while it was being written: the settling poll marks the
/// WAL before it looks, so the commit's own writes after the one that
/// notified look unread to it. Once no writer is left and nothing was
/// published since the read, they count as read without another look
/// (no SQLite asked), so the runner's re-checks stop at once instead of
/// costing a wake-up and a read transaction per commit.
#[test]
fn a_commit_read_as_it_was_written_leaves_nothing_unread_once_the_writer_is_gone() {
    let (dir, w, mut p) = one_growing_step("one");
    drop(w);
    let mut writer = settling_writer(&dir.path().join("c.db"), "one two");
    match p.poll_settling(std::time::Duration::from_secs(20)) {
        Poll::Ready(e) => assert_eq!(e.len(), 1, "{e:?}"),
        Poll::NotReady(e) => panic!("not ready: {e}"),
    }
    assert!(writer.wait().expect("writer").success());
    let before = p.stats();
    assert!(!p.written_since_read());
    assert_eq!(p.stats(), before, "SQLite was asked");
}

#[test]
fn a_finished_subagent_carries_the_answer_of_its_own_conversation() {
    let dir = tempfile::tempdir().expect("tmp");
    let child = "abc658f6-9dcd-4d28-aff1-9b0920303202";
    let c = writer(&dir.path().join(format!("{child}.db")));
    put(
        &c,
        &text(0, StepStatus::Done, "  two callers, both pass a path  "),
    );
    let path = dir.path().join("root.db");
    let w = writer(&path);
    let subagent = |status| {
        Step::new(0, StepType::InvokeSubagent, status).with_body(Body::Subagent(
            agy_format::steps::Subagent {
                child_conversation_id: child.into(),
                role: Some("researcher".into()),
                ..Default::default()
            },
        ))
    };
    put(&w, &subagent(StepStatus::Running));
    let mut p = Poller::new(&path, None);
    ready(&mut p);
    put(&w, &subagent(StepStatus::Done));
    let ended = ready(&mut p);
    assert_eq!(
        ended,
        vec![Event::SubagentEnded {
            idx: 0,
            conversation_id: child.into(),
            role: Some("researcher".into()),
            ok: true,
            answer: Some("two callers, both pass a path".into()),
            error: None,
        }]
    );
    // An id that is not a conversation id is never a path.
    assert_eq!(
        agy_bridge::testing::follow::subagent_answer(&path, "../root"),
        None
    );
}

/// The text of each `Event::Text`, by step.
fn texts(events: &[Event]) -> Vec<(i64, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Text { idx, text } => Some((*idx, text.clone())),
            _ => None,
        })
        .collect()
}

/// A backlog is read in batches (rows, then bytes), each poll going on
/// from the cursor without a new commit, until it has caught up.
#[test]
fn a_backlog_is_read_in_bounded_batches_from_the_cursor() {
    use agy_bridge::testing::follow::{BYTES_PER_POLL, ROWS_PER_POLL};
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.db");
    let w = writer(&path);
    let many = 2 * ROWS_PER_POLL as i64 + 5;
    for idx in 0..many {
        put(&w, &text(idx, StepStatus::Done, &format!("step {idx}")));
    }
    let mut p = Poller::new(&path, None);
    let first = texts(&ready(&mut p));
    assert_eq!(first.len(), ROWS_PER_POLL, "one batch of rows");
    assert!(p.behind());
    let mut all = first;
    while p.behind() {
        all.extend(texts(&ready(&mut p)));
    }
    let want: Vec<(i64, String)> = (0..many).map(|i| (i, format!("step {i}"))).collect();
    assert_eq!(all, want, "every step once, in order");
    assert!(ready(&mut p).is_empty(), "caught up: nothing new");

    // Large rows: a batch stops at the byte budget (at least one row each).
    let big = "x".repeat(BYTES_PER_POLL / 2 + 1);
    for idx in many..many + 3 {
        put(&w, &text(idx, StepStatus::Done, &big));
    }
    let batch = texts(&ready(&mut p));
    assert_eq!(batch.len(), 2, "two rows reach the byte budget");
    assert!(p.behind());
    assert_eq!(texts(&ready(&mut p)).len(), 1);
    assert!(!p.behind());
}

/// A growing step past the byte budget is read again whole on each commit
/// and leaves the reader caught up: the budget is for new rows. (Counting
/// it left the reader behind on every poll, re-reading the step in a loop
/// while it grew.)
#[test]
fn a_growing_step_past_the_byte_budget_leaves_the_reader_caught_up() {
    use agy_bridge::testing::follow::BYTES_PER_POLL;
    let big = "x".repeat(BYTES_PER_POLL + 1);
    let (_dir, w, mut p) = one_growing_step(&big);
    // A new row that large is a batch of its own: one more poll sees that
    // nothing follows it.
    if p.behind() {
        assert!(ready(&mut p).is_empty());
    }
    assert!(!p.behind(), "behind on a step it read whole");
    put(&w, &text(0, StepStatus::Generating, &format!("{big} more")));
    let before = p.stats();
    assert_eq!(
        ready(&mut p),
        vec![Event::Text {
            idx: 0,
            text: " more".into()
        }]
    );
    assert!(!p.behind(), "behind on a step it read whole");
    assert!(ready(&mut p).is_empty());
    assert_eq!(p.stats().row_selects, before.row_selects + 1);
}

/// Caught up: every commit read and none on its way, known without SQLite.
/// Not after a commit it has not read, nor while another process holds a
/// write transaction; again once it has read.
#[test]
fn caught_up_means_read_to_the_last_commit_with_no_writer() {
    let (dir, w, mut p) = one_growing_step("one");
    assert!(p.caught_up());
    put(&w, &text(0, StepStatus::Generating, "one two"));
    assert!(!p.caught_up(), "a commit it has not read");
    assert_eq!(ready(&mut p).len(), 1);
    assert!(p.caught_up());
    drop(w);
    let mut writer = settling_writer(&dir.path().join("c.db"), "one two three");
    assert!(!p.caught_up(), "a write transaction is open");
    assert!(writer.wait().expect("writer").success());
    assert!(!p.caught_up(), "its commit is not read yet");
    assert_eq!(ready(&mut p).len(), 1);
    assert!(p.caught_up());
}
