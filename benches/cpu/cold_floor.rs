//! The least a cold turn does, as the reference for the bridge's fixed
//! CPU per cold turn (issue 22, item 2), as `latency/floor.rs` is for
//! its latency: its own process, pi's request read, agy started and
//! waited for, agy's new database opened and read once, a line per step
//! on stdout, the pi session's binding stored durably (a file written,
//! `fsync`ed and renamed into place, its directory `fsync`ed). Nothing a
//! cold turn could skip; none of what the bridge adds: no guardian, no
//! live following, no thread, no runtime, no session lock, no admission,
//! no model catalog, no decoding.
//!
//! It is this bench's own binary started again with [`CHILD_ENV`] set: a
//! Rust binary linked as the bridge is, against the same shared libraries,
//! with the same SQLite and JSON code, started the same way;
//! `benches/cpu.rs` measures it as it measures the bridge (its process's
//! CPU less fake-agy's own). It is smaller than the bridge (link-time
//! optimisation keeps only what the bench uses, about a third of the
//! bridge's size), so it starts a little quicker: on the machine of
//! 2026-12-04, 1.12 ms of CPU to exit at once (`--list`) against 1.57 ms
//! for `agy-bridge --version` (medians of 200, interleaved).

use serde_json::json;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set in the environment of this bench's binary to make it the floor's
/// cold turn.
pub const CHILD_ENV: &str = "CPU_COLD_FLOOR_CHILD";

/// Run as the floor's cold turn if started as one (then never returns).
pub fn run_if_asked() {
    if std::env::var_os(CHILD_ENV).is_some() {
        turn();
        std::process::exit(0);
    }
}

fn turn() {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .expect("pi's request");
    let request: serde_json::Value = serde_json::from_str(&line).expect("pi's request is JSON");
    let prompt = request["messages"][0]["content"]
        .as_str()
        .expect("a prompt");
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let dir = home.join(".gemini/antigravity-cli/conversations");
    std::fs::create_dir_all(&dir).expect("conversations directory");
    let before = databases(&dir);
    let agy = std::env::var_os("AGY_BIN").expect("AGY_BIN");
    let status = Command::new(agy)
        .args(["-p", prompt])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("agy ran");
    let db = databases(&dir)
        .into_iter()
        .find(|p| !before.contains(p))
        .expect("agy's new database");
    let mut out = std::io::stdout().lock();
    let last = print_steps(&db, &mut out);
    writeln!(out, "{}", json!({"type": "done", "ok": status.success()})).expect("stdout");
    out.flush().expect("stdout");
    store_binding(&home, &request["sessionId"], &db, last);
}

/// The conversation databases in `dir`.
fn databases(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("conversations directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "db"))
        .collect()
}

/// One line per step of `db` (its payload's length): the last step's idx.
fn print_steps(db: &Path, out: &mut impl Write) -> i64 {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("agy's database");
    let mut stmt = conn
        .prepare("SELECT idx, length(step_payload) FROM steps ORDER BY idx")
        .expect("steps");
    let mut rows = stmt.query([]).expect("steps");
    let mut last = -1;
    while let Some(row) = rows.next().expect("a step") {
        let (idx, len): (i64, Option<i64>) =
            (row.get(0).expect("idx"), row.get(1).expect("length"));
        writeln!(
            out,
            "{}",
            json!({"type": "text_delta", "idx": idx, "len": len})
        )
        .expect("stdout");
        last = idx;
    }
    last
}

/// The session's binding, written as the bridge writes its state: a
/// temporary file `fsync`ed, renamed over the old, the directory `fsync`ed.
fn store_binding(home: &Path, session: &serde_json::Value, db: &Path, last: i64) {
    let state = home.join("cold-floor-sessions.json");
    let tmp = home.join("cold-floor-sessions.json.tmp");
    let binding = json!({"session": session, "conversation": db, "lastStepIdx": last});
    let mut f = std::fs::File::create(&tmp).expect("state file");
    f.write_all(binding.to_string().as_bytes())
        .expect("state written");
    f.sync_all().expect("state synced");
    std::fs::rename(&tmp, &state).expect("state renamed");
    std::fs::File::open(home)
        .and_then(|d| d.sync_all())
        .expect("state's directory synced");
}
