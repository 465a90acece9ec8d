//! The least a cold turn does, as the reference for the bridge's fixed
//! CPU per cold turn (issue 22, item 2), as `latency/floor.rs` is for
//! its latency: its own process, pi's request read, agy started and
//! waited for, agy's new database opened and read once, a line per step
//! on stdout, the pi session's binding stored durably (a file written,
//! `fsync`ed and renamed into place, its directory `fsync`ed). Nothing a
//! cold turn could skip; none of what the bridge adds: no guardian, no
//! live following, no thread, no runtime, no session lock, no admission,
//! no model catalog, no decoding ([`Variant::Plain`]).
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
//!
//! [`Variant::Guarded`] is the same turn with agy started as the bridge
//! starts it: under the library's guardian
//! ([`agy_bridge::process::standby::Standby::fork`], forked first thing while
//! the process has one thread, as `stream` does), on a current-thread
//! runtime, agy's stdout and stderr read to their end. The guardian is the
//! one part of the bridge's extra that no cold turn of ours may leave out
//! (agy's whole tree dies with the bridge, however it dies), and agy's
//! output is what binds its conversation and carries its answer, so their
//! cost is measured on their own.
//!
//! [`Variant::Runner`] is not a floor: the same binary running the turn
//! through the library's runner alone (`runner_turn.rs`), the step between
//! the guarded floor and the bridge's `stream`.

use serde_json::json;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set in the environment of this bench's binary to make it one of these
/// cold turns ([`Variant::env_value`]).
pub const CHILD_ENV: &str = "CPU_COLD_FLOOR_CHILD";

/// Which turn [`CHILD_ENV`] asks for (its value). The discriminants
/// index the bench's per-variant results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// agy started as a plain child, its stdout to `/dev/null`.
    Plain = 0,
    /// agy started under the library's guardian, its stdout and stderr
    /// read through a runtime.
    Guarded = 1,
    /// Not a floor: the library's runner alone (`runner_turn.rs`).
    Runner = 2,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Plain, Variant::Guarded, Variant::Runner];

    /// The value of [`CHILD_ENV`] that asks for this variant.
    pub fn env_value(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Guarded => "guarded",
            Variant::Runner => "runner",
        }
    }
}

/// Run as a cold turn of this bench's own if started as one (then never
/// returns).
pub fn run_if_asked() {
    let Some(value) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let variant = Variant::ALL
        .into_iter()
        .find(|v| value == v.env_value())
        .unwrap_or_else(|| panic!("{CHILD_ENV}={value:?}: not plain, guarded or runner"));
    // Which mechanisms the runner's follower runs, and whether its
    // guardian is forked now or started at the turn (`mechanisms.rs`).
    let knobs = crate::mechanisms::Knobs::from_env();
    agy_bridge::testing::follow::set_mechanisms(knobs.follow);
    let standby = (variant != Variant::Plain && knobs.early_guardian).then(|| {
        // SAFETY: the first thing the bench's `main` does: no thread yet.
        unsafe { agy_bridge::process::standby::Standby::fork() }.expect("the guardian")
    });
    turn(variant, standby);
    std::process::exit(0);
}

/// The turn: pi's request read, agy run, a line per step or event, the
/// binding stored.
fn turn(variant: Variant, standby: Option<agy_bridge::process::standby::Standby>) {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .expect("pi's request");
    let request: serde_json::Value = serde_json::from_str(&line).expect("pi's request is JSON");
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let prompt = request["messages"][0]["content"]
        .as_str()
        .expect("a prompt");
    let mut out = std::io::stdout().lock();
    let session = &request["sessionId"];
    let (ok, conversation, last) = match (variant, standby) {
        (Variant::Runner, standby) => {
            let cwd = request["cwd"].as_str();
            let resume = bound_conversation(&home, session);
            crate::runner_turn::run(standby, prompt, cwd, resume, &mut out)
        }
        (_, standby) => read_once(&home, prompt, standby, &mut out),
    };
    // The bench takes only a turn that ends with "done": a failed one ends
    // with "error", which stops it rather than counting a turn that did
    // less.
    let end = if ok { "done" } else { "error" };
    writeln!(out, "{}", json!({"type": end})).expect("stdout");
    out.flush().expect("stdout");
    store_binding(&home, session, conversation, last);
}

/// agy run to its end (under `standby` if there is one), then its new
/// database read once: whether agy succeeded, the database and its last
/// step's idx.
fn read_once(
    home: &Path,
    prompt: &str,
    standby: Option<agy_bridge::process::standby::Standby>,
    out: &mut impl Write,
) -> (bool, Option<String>, i64) {
    let dir = home.join(".gemini/antigravity-cli/conversations");
    std::fs::create_dir_all(&dir).expect("conversations directory");
    let before = databases(&dir);
    let ok = match standby {
        Some(standby) => run_guarded(standby, prompt),
        None => run_plain(prompt),
    };
    let db = databases(&dir)
        .into_iter()
        .find(|p| !before.contains(p))
        .expect("agy's new database");
    let last = print_steps(&db, out);
    (ok, Some(db.display().to_string()), last)
}

/// agy as a plain child: whether it succeeded.
fn run_plain(prompt: &str) -> bool {
    let agy = std::env::var_os("AGY_BIN").expect("AGY_BIN");
    Command::new(agy)
        .args(["-p", prompt])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("agy ran")
        .success()
}

/// agy under the guardian `standby`, as the bridge starts it: whether it
/// succeeded.
fn run_guarded(standby: agy_bridge::process::standby::Standby, prompt: &str) -> bool {
    use tokio::io::AsyncReadExt;
    let agy = std::env::var_os("AGY_BIN").expect("AGY_BIN");
    let launch = agy_bridge::process::launch::Launch {
        program: agy,
        args: vec!["-p".into(), prompt.into()],
        ..Default::default()
    };
    runtime().block_on(async {
        let mut agy = standby.launch(&launch).await.expect("agy started");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut stdout = agy.stdout.take().expect("agy's stdout");
        let mut stderr = agy.stderr.take().expect("agy's stderr");
        let (read_out, read_err) =
            tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        read_out.expect("agy's stdout");
        read_err.expect("agy's stderr");
        agy.wait().await.expect("agy's exit").success()
    })
}

/// A current-thread runtime, as `stream` runs its turn on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
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
fn store_binding(home: &Path, session: &serde_json::Value, db: Option<String>, last: i64) {
    let state = binding_file(home, session);
    let tmp = state.with_extension("json.tmp");
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

/// Where pi session `session`'s binding is stored: a file of its own.
fn binding_file(home: &Path, session: &serde_json::Value) -> PathBuf {
    let name: String = session
        .as_str()
        .unwrap_or("none")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    home.join(format!("cold-floor-{name}.json"))
}

/// The conversation pi session `session` is bound to (the runner's turns
/// store its id), to resume as pi's next turn would.
fn bound_conversation(home: &Path, session: &serde_json::Value) -> Option<String> {
    let text = std::fs::read_to_string(binding_file(home, session)).ok()?;
    let binding: serde_json::Value = serde_json::from_str(&text).ok()?;
    binding["conversation"].as_str().map(str::to_string)
}
