//! Binding the conversation id that agy never prints.
//!
//! `agy -p` writes one `<uuid>.db` per conversation (docs/agy-format.md, "Where agy writes") but
//! names none of them on stdout, so a fresh run has to find its own database.
//! This module owns that decision and nothing else: the id type (validated, so
//! an id handed to `--conversation` can never be a flag), the before/after
//! snapshot of the conversations directory, the `/proc` evidence of which
//! databases our agy's process tree holds open, and the type-127 subagent
//! links that tell a root conversation from its subagents. It is pure and
//! synchronous; the runner decides when to ask again and how long to wait.
//!
//! Platforms: the open-file evidence needs Linux's `/proc`. Elsewhere
//! (macOS) `open_db_ids` has none to give, so a run binds by agy's own
//! stream-json `init` line first (the runner's choice), and otherwise by the
//! snapshot diff, the subagent links and the prompt; the process tree
//! (`crate::process::tree`) comes from `ps` instead of `/proc`.
//!
//! The rule throughout is *fail safe, never guess*: when the evidence does not
//! single out one database, `decide` says so (`Binding::Waiting` or
//! `Binding::Ambiguous`) instead of picking one.

use crate::process::tree::{is_alive, process_tree};
use agy_format::ids::ConversationId;
use agy_format::steps::{self, Body, StepRow};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The database file of conversation `id` in `dir`.
pub(crate) fn db_path(dir: &Path, id: &ConversationId) -> PathBuf {
    dir.join(format!("{}.db", id.as_str()))
}

/// The `*.db` file stems present in a conversations directory at one moment,
/// taken before agy is spawned. Every stem is kept, UUID-like or not; only
/// [`new_since`] filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot(BTreeSet<String>);

// What the unit tests ask of a snapshot; the bridge itself only diffs one.
#[cfg(test)]
impl Snapshot {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn contains(&self, stem: &str) -> bool {
        self.0.contains(stem)
    }
}

/// List the `*.db` stems in `dir` (not `-wal`/`-shm`, not directories). A
/// missing directory is an empty snapshot: agy creates it on first use.
pub(crate) fn snapshot(dir: &Path) -> io::Result<Snapshot> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Snapshot::default()),
        Err(e) => return Err(e),
    };
    let mut stems = BTreeSet::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            // The entry vanished between listing and reading: not ours to judge.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(stem) = name.strip_suffix(".db") {
            if !stem.is_empty() {
                stems.insert(stem.to_owned());
            }
        }
    }
    Ok(Snapshot(stems))
}

/// The conversations whose `<uuid>.db` is in `dir` now but was not in
/// `before`, in id order. Stems that are not UUID-like are ignored.
pub(crate) fn new_since(dir: &Path, before: &Snapshot) -> io::Result<Vec<ConversationId>> {
    let now = snapshot(dir)?;
    let mut new: Vec<ConversationId> = now
        .0
        .difference(&before.0)
        .filter_map(|stem| ConversationId::parse(stem).ok())
        .collect();
    new.sort();
    new.dedup();
    Ok(new)
}

/// The conversation a file name belongs to: `<uuid>.db`, `<uuid>.db-wal` or
/// `<uuid>.db-shm`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn id_of_db_file(name: &str) -> Option<ConversationId> {
    let stem = name
        .strip_suffix(".db")
        .or_else(|| name.strip_suffix(".db-wal"))
        .or_else(|| name.strip_suffix(".db-shm"))?;
    ConversationId::parse(stem).ok()
}

/// The conversations in `dir` whose database (or its `-wal`/`-shm`) any of
/// `pids` holds open, read from the `/proc/<pid>/fd/*` links. Processes whose
/// descriptors cannot be read (gone, another user's) contribute nothing.
/// `None` when `/proc` is not available at all (not Linux, not mounted), so
/// the caller can tell "no evidence" from "holds nothing".
pub(crate) fn open_db_ids(pids: &[u32], dir: &Path) -> Option<BTreeSet<ConversationId>> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        std::fs::read_dir("/proc/self/fd").ok()?;
        // fd links are absolute and resolved; compare against both spellings.
        let canonical = std::fs::canonicalize(dir).ok();
        let in_dir = |parent: &Path| parent == dir || canonical.as_deref() == Some(parent);
        let mut ids = BTreeSet::new();
        for pid in pids {
            let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                let Ok(target) = std::fs::read_link(fd.path()) else {
                    continue;
                };
                let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
                    continue;
                };
                if !in_dir(parent) {
                    continue;
                }
                // A deleted file reads as "<name> (deleted)" and parses as nothing.
                if let Some(id) = name.to_str().and_then(id_of_db_file) {
                    ids.insert(id);
                }
            }
        }
        Some(ids)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (pids, dir);
        None
    }
}

/// The child conversations named by the subagent steps (payload field 127.1,
/// docs/agy-format.md, "Step bodies") of the database at `db_path`, in step order, without
/// repeats. Opened read-only; a missing, locked or unreadable database, or a
/// child id that is not UUID-like, gives nothing rather than an error, since
/// every caller treats "no children known" as the safe answer.
pub(crate) fn subagent_children(db_path: &Path) -> Vec<ConversationId> {
    match read_step_rows(db_path) {
        Some(rows) => steps::subagent_children(&rows),
        None => Vec::new(),
    }
}

/// The text of a conversation's first user input (type 14, field 19).
/// Rows are read in idx order only up to it (usually the first step), not
/// the whole conversation: the prompt match reads every candidate. A row
/// that cannot be read before it ends the search with nothing.
pub(crate) fn first_user_input(db_path: &Path) -> Option<String> {
    use agy_format::database::{open_read_only, to_row_ref, StepColumns};
    let conn = open_read_only(db_path).ok()?;
    let cols = StepColumns::detect(&conn, db_path).ok()?;
    let mut stmt = conn
        .prepare(&format!("{} ORDER BY idx", cols.select()))
        .ok()?;
    let rows = stmt
        .query_map([], |r| to_row_ref(r).map(steps::decode_row))
        .ok()?;
    for step in rows {
        if let Some(Body::UserInput(u)) = step.ok()?.body {
            return Some(u.text);
        }
    }
    None
}

/// Last resort once agy has exited and its open files can no longer be read:
/// the one candidate whose first user input is exactly `prompt`. None when
/// no candidate or several do (identical prompts in concurrent runs): the
/// caller then refuses to bind rather than guess. Used only to break a tie
/// the other evidence left, never on its own.
pub(crate) fn match_prompt(
    dir: &Path,
    candidates: &[ConversationId],
    prompt: &str,
) -> Option<ConversationId> {
    let want = prompt.trim();
    if want.is_empty() {
        return None;
    }
    let mut hits = candidates.iter().filter(|id| {
        first_user_input(&db_path(dir, id))
            .map(|text| text.trim() == want)
            .unwrap_or(false)
    });
    let first = hits.next()?.clone();
    hits.next().is_none().then_some(first)
}

/// Every step of the database at `db_path`, read-only; `None` when it
/// cannot be read (missing, locked, not agy's).
fn read_step_rows(db_path: &Path) -> Option<Vec<StepRow>> {
    let conn = agy_format::database::open_read_only(db_path).ok()?;
    agy_format::database::read_all(&conn, db_path).ok()
}

/// How a conversation id was bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BindMethod {
    /// Exactly one new database appeared (and, where our agy's open files
    /// could be read, our agy holds it).
    SnapshotDiff,
    /// Several appeared; our agy's process tree holds exactly one open.
    ProcessTree,
    /// Several remained; all but one are subagents (type-127 children) of
    /// another.
    SubagentFilter,
    /// agy had already exited, the other evidence left several candidates,
    /// and exactly one of them opens with our prompt as its user input.
    PromptMatch,
    /// agy named it on its `--output-format stream-json` `init` line.
    StreamJson,
    /// The caller gave it (`--conversation`).
    Given,
}

impl BindMethod {
    /// The snake_case name, as serialised.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BindMethod::SnapshotDiff => "snapshot_diff",
            BindMethod::ProcessTree => "process_tree",
            BindMethod::SubagentFilter => "subagent_filter",
            BindMethod::PromptMatch => "prompt_match",
            BindMethod::StreamJson => "stream_json",
            BindMethod::Given => "given",
        }
    }
}

impl fmt::Display for BindMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What [`decide`] concluded at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Binding {
    /// This conversation is ours.
    Bound { id: ConversationId, how: BindMethod },
    /// Nothing to decide yet: no new database that could be ours has
    /// appeared (agy is still starting, or every new one belongs to another
    /// run). This is the ordinary wait for a slow agy, **not** an ambiguity;
    /// it must not use up a caller's retry budget.
    Waiting,
    /// Several databases could be ours and the evidence does not single one
    /// out, or the subagent links contradict each other (a cycle). This can
    /// resolve later, e.g. once a parent commits the type-127 step naming a
    /// child, so a caller may ask again; how many times and for how long is
    /// the caller's retry budget. When it runs out the answer is "could not
    /// bind", never a guess.
    Ambiguous {
        /// The candidates still standing, or, when the subagent links removed
        /// every one (a cycle), all that were considered.
        candidates: Vec<ConversationId>,
    },
}

/// Which new databases our agy holds open: `None` when there is no such
/// evidence (no pid, no `/proc`, or agy already exited or is a zombie).
fn held_by_tree(agy_pid: Option<u32>, dir: &Path) -> Option<BTreeSet<ConversationId>> {
    let pid = agy_pid?;
    if !is_alive(pid) {
        return None;
    }
    let held = open_db_ids(&process_tree(pid), dir)?;
    // The process may have exited while we read; its descriptors are then
    // missing, which is no evidence either way.
    is_alive(pid).then_some(held)
}

/// Bind our conversation: the new databases in `dir` since `before` (taken
/// before agy was spawned), narrowed by what our agy's process tree
/// (`agy_pid`) holds open and by subagent links. Never guesses:
///
/// 1. No new database: [`Binding::Waiting`].
/// 2. Where our agy's open files can be read (`agy_pid` given, `/proc`
///    available, agy still running), only candidates it or a descendant holds
///    open remain. None held: `Waiting` (ours is not created yet; the others
///    are concurrent runs'). One held: bound, by [`BindMethod::SnapshotDiff`]
///    if it was the only new file, else by [`BindMethod::ProcessTree`].
///    Without that evidence (pass `None` once agy has exited: its
///    descriptors are gone), a single new database binds by `SnapshotDiff`.
/// 3. Several left: each one that is reachable through type-127 child links
///    from another candidate (a subagent, or a subagent's subagent) is
///    dropped. One left: bound by [`BindMethod::SubagentFilter`]; otherwise
///    [`Binding::Ambiguous`].
///
/// Step 2 also guards the single-file case: two runs started together can
/// make "exactly one new file" the *other* run's database, and the
/// descriptor check is what catches that.
///
/// Errors only when `dir` exists but cannot be listed.
pub(crate) fn decide(dir: &Path, before: &Snapshot, agy_pid: Option<u32>) -> io::Result<Binding> {
    let new = new_since(dir, before)?;
    if new.is_empty() {
        return Ok(Binding::Waiting);
    }
    Ok(match held_by_tree(agy_pid, dir) {
        Some(held) => among_held(dir, new, &held),
        None => match new.as_slice() {
            [id] => Binding::Bound {
                id: id.clone(),
                how: BindMethod::SnapshotDiff,
            },
            _ => subagent_filter(dir, new),
        },
    })
}

/// [`decide`] with proof only: what our running agy's open files single
/// out (step 2, then the subagent links among what it holds). Without its
/// open files (not readable, agy gone) nothing is proven: `Waiting`. What
/// a turn may bind on before agy names its conversation itself.
pub(crate) fn decide_proven(dir: &Path, before: &Snapshot, agy_pid: u32) -> io::Result<Binding> {
    let new = new_since(dir, before)?;
    if new.is_empty() {
        return Ok(Binding::Waiting);
    }
    Ok(match held_by_tree(Some(agy_pid), dir) {
        Some(held) => among_held(dir, new, &held),
        None => Binding::Waiting,
    })
}

/// Step 2 and 3 of [`decide`] where our agy's open files were read: the new
/// databases it holds.
fn among_held(dir: &Path, new: Vec<ConversationId>, held: &BTreeSet<ConversationId>) -> Binding {
    let only_one_new = new.len() == 1;
    let ours: Vec<ConversationId> = new.into_iter().filter(|id| held.contains(id)).collect();
    match ours.as_slice() {
        [] => Binding::Waiting,
        [id] => Binding::Bound {
            id: id.clone(),
            how: if only_one_new {
                BindMethod::SnapshotDiff
            } else {
                BindMethod::ProcessTree
            },
        },
        _ => subagent_filter(dir, ours),
    }
}

/// Drop every candidate reachable from *another* candidate through subagent
/// links (followed transitively, through databases in `dir` that are not
/// candidates too); bind what is left if it is exactly one.
fn subagent_filter(dir: &Path, candidates: Vec<ConversationId>) -> Binding {
    let mut links: BTreeMap<ConversationId, Vec<ConversationId>> = BTreeMap::new();
    let mut dropped: BTreeSet<ConversationId> = BTreeSet::new();
    for root in &candidates {
        for reached in descendants(dir, root, &mut links) {
            if reached != *root && candidates.contains(&reached) {
                dropped.insert(reached);
            }
        }
    }
    let left: Vec<ConversationId> = candidates
        .iter()
        .filter(|c| !dropped.contains(c))
        .cloned()
        .collect();
    match left.as_slice() {
        [id] => Binding::Bound {
            id: id.clone(),
            how: BindMethod::SubagentFilter,
        },
        [] => Binding::Ambiguous { candidates },
        _ => Binding::Ambiguous { candidates: left },
    }
}

/// Every conversation reachable from `root` through subagent links (may
/// include `root` itself when the links form a cycle). Each database is read
/// at most once per decision, via `links`, so the walk always ends.
fn descendants(
    dir: &Path,
    root: &ConversationId,
    links: &mut BTreeMap<ConversationId, Vec<ConversationId>>,
) -> BTreeSet<ConversationId> {
    let mut reached = BTreeSet::new();
    let mut queue = VecDeque::from([root.clone()]);
    while let Some(id) = queue.pop_front() {
        let children = links
            .entry(id.clone())
            .or_insert_with(|| subagent_children(&db_path(dir, &id)));
        for child in children.iter() {
            if reached.insert(child.clone()) {
                queue.push_back(child.clone());
            }
        }
    }
    reached
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::tree::parse_ps_links;
    use agy_format::steps::{Step, StepStatus, StepType, Subagent};
    use rusqlite::Connection;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    const A: &str = "0a1b2c3d-0000-4000-8000-00000000000a";
    const B: &str = "0a1b2c3d-0000-4000-8000-00000000000b";
    const C: &str = "0a1b2c3d-0000-4000-8000-00000000000c";

    fn id(s: &str) -> ConversationId {
        ConversationId::parse(s).unwrap()
    }

    /// A real agy-schema database at `<dir>/<id>.db` whose steps name
    /// `children` as subagents.
    fn make_db(dir: &Path, conv: &str, children: &[&str]) -> PathBuf {
        let path = dir.join(format!("{conv}.db"));
        let conn = Connection::open(&path).unwrap();
        agy_format::schema::create(&conn).unwrap();
        let mut steps = vec![Step::new(0, StepType::UserInput, StepStatus::Done)];
        for (i, child) in children.iter().enumerate() {
            steps.push(
                Step::new(i as i64 + 1, StepType::InvokeSubagent, StepStatus::Done).with_body(
                    Body::Subagent(Subagent {
                        child_conversation_id: (*child).to_owned(),
                        role: Some("worker".into()),
                        ..Default::default()
                    }),
                ),
            );
        }
        for step in steps {
            let row = step.to_row();
            conn.execute(
                "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![row.idx, row.step_type, row.status, row.payload],
            )
            .unwrap();
        }
        path
    }

    fn make_prompt_db(dir: &Path, conv: &str, prompt: &str) {
        let conn = Connection::open(dir.join(format!("{conv}.db"))).unwrap();
        agy_format::schema::create(&conn).unwrap();
        let row = Step::new(0, StepType::UserInput, StepStatus::Done)
            .with_body(Body::UserInput(agy_format::steps::UserInput {
                text: prompt.into(),
                workspace_uri: None,
            }))
            .to_row();
        conn.execute(
            "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![row.idx, row.step_type, row.status, row.payload],
        )
        .unwrap();
    }

    #[test]
    fn first_user_input_is_the_lowest_idx_one_whatever_comes_before() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(format!("{A}.db"));
        let conn = Connection::open(&path).unwrap();
        agy_format::schema::create(&conn).unwrap();
        let user = |idx: i64, text: &str| {
            Step::new(idx, StepType::UserInput, StepStatus::Done).with_body(Body::UserInput(
                agy_format::steps::UserInput {
                    text: text.into(),
                    workspace_uri: None,
                },
            ))
        };
        // Written out of idx order, with another kind of step first.
        for step in [
            user(5, "a later message"),
            user(3, "the first message"),
            Step::new(1, StepType::PlannerResponse, StepStatus::Done),
        ] {
            let row = step.to_row();
            conn.execute(
                "INSERT INTO steps (idx, step_type, status, step_payload) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![row.idx, row.step_type, row.status, row.payload],
            )
            .unwrap();
        }
        assert_eq!(
            first_user_input(&path).as_deref(),
            Some("the first message")
        );
    }

    #[test]
    fn prompt_match_breaks_a_tie_only_when_unique() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        make_prompt_db(dir, A, "fix the parser");
        make_prompt_db(dir, B, "write docs");
        make_prompt_db(dir, C, "write docs");
        let all = [id(A), id(B), id(C)];
        assert_eq!(match_prompt(dir, &all, " fix the parser\n"), Some(id(A)));
        // Two runs with the same prompt: no guess.
        assert_eq!(match_prompt(dir, &all, "write docs"), None);
        assert_eq!(match_prompt(dir, &all, "something else"), None);
        assert_eq!(match_prompt(dir, &all, "  "), None);
        assert_eq!(first_user_input(&dir.join("missing.db")), None);
    }

    /// Kills and reaps a spawned process (and its group) even when a test
    /// fails half-way.
    struct Reaper(Child);

    impl Drop for Reaper {
        fn drop(&mut self) {
            let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Spawn `sh -c script` in a process group of its own.
    fn spawn_group(script: &str) -> Reaper {
        use std::os::unix::process::CommandExt;
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        Reaper(child)
    }

    fn wait_until_held(pid: u32, dir: &Path, want: &ConversationId) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let held = open_db_ids(&process_tree(pid), dir).unwrap_or_default();
            if held.contains(want) {
                return;
            }
            assert!(Instant::now() < deadline, "{want} never held by {pid}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn has_proc() -> bool {
        Path::new("/proc/self/fd").is_dir()
    }

    #[test]
    fn id_accepts_uuids_in_either_case() {
        for good in [
            A,
            "123e4567-e89b-12d3-a456-426614174000",
            "123E4567-E89B-12D3-A456-426614174000",
            "00000000-0000-0000-0000-000000000000",
        ] {
            let parsed = ConversationId::parse(good).unwrap();
            assert_eq!(parsed.as_str(), good.to_ascii_lowercase());
            assert_eq!(parsed.to_string(), good.to_ascii_lowercase());
        }
        assert_eq!(
            id("123e4567-e89b-12d3-a456-426614174000"),
            id("123E4567-E89B-12D3-A456-426614174000")
        );
    }

    #[test]
    fn id_rejects_flags_paths_and_junk() {
        for bad in [
            "",
            "-p",
            "--help",
            "--conversation",
            "-23e4567-e89b-12d3-a456-426614174000",
            "../x",
            "a/b",
            "../23e4567-e89b-12d3-a456-42661417400",
            "123e4567/e89b-12d3-a456-426614174000",
            " 123e4567-e89b-12d3-a456-426614174000",
            "123e4567-e89b-12d3-a456-426614174000 ",
            "123e4567-e89b-12d3-a456 426614174000",
            "123e4567-e89b-12d3-a456-42661417400\n",
            "123e4567e89b12d3a456426614174000",
            "123e4567-e89b-12d3-a456-4266141740000",
            "123e4567-e89b-12d3-a456-42661417400g",
            "{123e4567-e89b-12d3-a456-426614174000}",
            "123e4567-e89b-12d3-a456-42661417400é",
        ] {
            assert!(ConversationId::parse(bad).is_err(), "accepted {bad:?}");
        }
        let err = ConversationId::parse("--help").unwrap_err();
        assert_eq!(err.input(), "--help");
        assert!(err.to_string().contains("--help"));
    }

    #[test]
    fn bind_method_names_are_snake_case() {
        assert_eq!(BindMethod::SnapshotDiff.to_string(), "snapshot_diff");
        assert_eq!(
            serde_json::to_string(&BindMethod::SubagentFilter).unwrap(),
            "\"subagent_filter\""
        );
        assert_eq!(serde_json::to_string(&id(A)).unwrap(), format!("\"{A}\""));
    }

    #[test]
    fn db_path_joins_the_stem() {
        assert_eq!(
            db_path(Path::new("/x"), &id(A)),
            PathBuf::from(format!("/x/{A}.db"))
        );
    }

    #[test]
    fn missing_dir_is_an_empty_snapshot() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("not-yet");
        let before = snapshot(&dir).unwrap();
        assert!(before.is_empty());
        assert!(new_since(&dir, &before).unwrap().is_empty());
        assert_eq!(decide(&dir, &before, None).unwrap(), Binding::Waiting);
    }

    #[test]
    fn new_since_ignores_wal_shm_and_non_uuid_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join(format!("{A}.db")), b"").unwrap();
        let before = snapshot(dir).unwrap();
        assert!(before.contains(A));
        for name in [
            format!("{B}.db-wal"),
            format!("{B}.db-shm"),
            format!("{B}.json"),
            "notes.db".to_owned(),
            "--help.db".to_owned(),
            "conversation_summaries.db".to_owned(),
            ".db".to_owned(),
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.join(format!("{C}.db"))).unwrap();
        assert!(new_since(dir, &before).unwrap().is_empty());
        assert_eq!(decide(dir, &before, None).unwrap(), Binding::Waiting);

        std::fs::write(dir.join(format!("{B}.db")), b"").unwrap();
        assert_eq!(new_since(dir, &before).unwrap(), vec![id(B)]);
    }

    #[test]
    fn exactly_one_new_database_binds() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        make_db(dir, A, &[]);
        let before = snapshot(dir).unwrap();
        make_db(dir, B, &[]);
        assert_eq!(
            decide(dir, &before, None).unwrap(),
            Binding::Bound {
                id: id(B),
                how: BindMethod::SnapshotDiff
            }
        );
    }

    #[test]
    fn process_tree_includes_the_root_and_grandchildren() {
        if !has_proc() {
            return;
        }
        let me = std::process::id();
        assert_eq!(process_tree(me).first(), Some(&me));
        let group = spawn_group("sleep 30 & wait");
        let root = group.0.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_tree(root).len() < 2 {
            assert!(Instant::now() < deadline, "sleep child never seen");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(process_tree(me).contains(&root));
    }

    #[test]
    fn ps_output_parses_into_children_in_order() {
        let ps =
            "    1     0\n  200     1\n  201   200\n  garbage\n  202   200  x\n  203   200\n\n";
        let children = parse_ps_links(ps);
        assert_eq!(
            children,
            BTreeMap::from([(0, vec![1]), (1, vec![200]), (200, vec![201, 203])])
        );
    }

    /// The `ps` fallback (macOS) finds the same child as `/proc` does here.
    #[test]
    fn ps_links_agree_with_proc() {
        if !has_proc() {
            return;
        }
        let group = spawn_group("sleep 30 & wait");
        let root = group.0.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let tree = loop {
            let tree = process_tree(root);
            if tree.len() >= 2 {
                break tree;
            }
            assert!(Instant::now() < deadline, "sleep child never seen");
            std::thread::sleep(Duration::from_millis(10));
        };
        let Ok(out) = Command::new("ps").args(["-A", "-o", "pid=,ppid="]).output() else {
            println!("skipped: no ps on this machine");
            return;
        };
        let from_ps = parse_ps_links(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(from_ps.get(&root), Some(&tree[1..].to_vec()));
    }

    #[test]
    fn open_db_ids_counts_wal_and_shm() {
        if !has_proc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let wal = dir.join(format!("{A}.db-wal"));
        let other = dir.join("notes.db");
        std::fs::write(&wal, b"").unwrap();
        std::fs::write(&other, b"").unwrap();
        let _wal = std::fs::File::open(&wal).unwrap();
        let _other = std::fs::File::open(&other).unwrap();
        let held = open_db_ids(&[std::process::id()], dir).unwrap();
        assert_eq!(held, BTreeSet::from([id(A)]));
        // Another directory holds nothing of ours.
        let elsewhere = tempfile::tempdir().unwrap();
        assert!(open_db_ids(&[std::process::id()], elsewhere.path())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn process_tree_binds_the_database_our_agy_holds() {
        if !has_proc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        let ours = make_db(dir, A, &[]);
        make_db(dir, B, &[]);
        let holder = spawn_group(&format!("exec 3<'{}'; exec sleep 30", ours.display()));
        let pid = holder.0.id();
        wait_until_held(pid, dir, &id(A));
        assert_eq!(
            decide(dir, &before, Some(pid)).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::ProcessTree
            }
        );
        drop(holder);
    }

    /// Proof only: one new database nobody of ours holds is not bound (a
    /// concurrent run's, maybe); the one our agy holds is, among others.
    #[test]
    fn decide_proven_binds_only_what_our_agy_holds() {
        if !has_proc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        let theirs = make_db(dir, B, &[]);
        let idle = spawn_group("exec sleep 30");
        assert_eq!(
            decide_proven(dir, &before, idle.0.id()).unwrap(),
            Binding::Waiting
        );
        // decide, without proof, takes the one new file.
        assert!(matches!(
            decide(dir, &before, None).unwrap(),
            Binding::Bound { .. }
        ));
        let ours = make_db(dir, A, &[]);
        let holder = spawn_group(&format!("exec 3<'{}'; exec sleep 30", ours.display()));
        let pid = holder.0.id();
        wait_until_held(pid, dir, &id(A));
        assert_eq!(
            decide_proven(dir, &before, pid).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::ProcessTree
            }
        );
        drop((holder, idle, theirs));
    }

    #[test]
    fn process_tree_follows_descendants() {
        if !has_proc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        make_db(dir, A, &[]);
        let ours = make_db(dir, B, &[]);
        // The shell stays the root; its background child holds the file.
        let holder = spawn_group(&format!("sleep 30 3<'{}' & wait", ours.display()));
        let pid = holder.0.id();
        wait_until_held(pid, dir, &id(B));
        assert_eq!(
            decide(dir, &before, Some(pid)).unwrap(),
            Binding::Bound {
                id: id(B),
                how: BindMethod::ProcessTree
            }
        );
    }

    #[test]
    fn new_databases_our_agy_does_not_hold_mean_waiting() {
        if !has_proc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        let holder = spawn_group("exec sleep 30");
        let pid = holder.0.id();
        // One new database that is not ours (a concurrent run's): no bind.
        make_db(dir, A, &[]);
        assert_eq!(decide(dir, &before, Some(pid)).unwrap(), Binding::Waiting);
        make_db(dir, B, &[]);
        assert_eq!(decide(dir, &before, Some(pid)).unwrap(), Binding::Waiting);
    }

    #[test]
    fn exited_agy_falls_back_to_the_other_evidence() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        make_db(dir, A, &[B]);
        make_db(dir, B, &[]);
        let mut gone = Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        assert_eq!(
            decide(dir, &before, Some(pid)).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::SubagentFilter
            }
        );
    }

    #[test]
    fn held_candidates_are_narrowed_by_the_subagent_filter() {
        if !has_proc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        let root = make_db(dir, A, &[B]);
        let sub = make_db(dir, B, &[]);
        make_db(dir, C, &[]); // a concurrent run's, not held
        let holder = spawn_group(&format!(
            "exec 3<'{}' 4<'{}'; exec sleep 30",
            root.display(),
            sub.display()
        ));
        let pid = holder.0.id();
        wait_until_held(pid, dir, &id(A));
        wait_until_held(pid, dir, &id(B));
        assert_eq!(
            decide(dir, &before, Some(pid)).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::SubagentFilter
            }
        );
    }

    #[test]
    fn subagent_children_reads_127_steps() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = make_db(dir, A, &[B, C, B, "not-an-id", "--help"]);
        assert_eq!(subagent_children(&path), vec![id(B), id(C)]);
        assert!(subagent_children(&dir.join("missing.db")).is_empty());
        std::fs::write(dir.join("garbage.db"), b"not sqlite at all").unwrap();
        assert!(subagent_children(&dir.join("garbage.db")).is_empty());
        let empty = dir.join("empty.db");
        Connection::open(&empty).unwrap();
        assert!(subagent_children(&empty).is_empty());
    }

    #[test]
    fn subagent_filter_binds_the_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        make_db(dir, A, &[B]);
        make_db(dir, B, &[]);
        assert_eq!(
            decide(dir, &before, None).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::SubagentFilter
            }
        );
    }

    #[test]
    fn subagent_filter_matches_ids_case_insensitively() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        make_db(dir, A, &[&B.to_ascii_uppercase()]);
        make_db(dir, B, &[]);
        assert_eq!(
            decide(dir, &before, None).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::SubagentFilter
            }
        );
    }

    #[test]
    fn subagent_filter_binds_the_root_of_a_chain() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        // Created child-first, so id order and creation order both disagree
        // with the answer.
        make_db(dir, C, &[]);
        make_db(dir, B, &[C]);
        make_db(dir, A, &[B]);
        assert_eq!(
            decide(dir, &before, None).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::SubagentFilter
            }
        );
    }

    #[test]
    fn grandchildren_are_dropped_through_an_old_database() {
        // B was there before the snapshot (an older conversation now resumed
        // as a subagent); A -> B -> C still makes C a descendant of A.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        make_db(dir, B, &[C]);
        let before = snapshot(dir).unwrap();
        make_db(dir, A, &[B]);
        make_db(dir, C, &[]);
        assert_eq!(
            decide(dir, &before, None).unwrap(),
            Binding::Bound {
                id: id(A),
                how: BindMethod::SubagentFilter
            }
        );
    }

    #[test]
    fn unrelated_databases_are_ambiguous() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        make_db(dir, A, &[]);
        make_db(dir, B, &[]);
        assert_eq!(
            decide(dir, &before, None).unwrap(),
            Binding::Ambiguous {
                candidates: vec![id(A), id(B)]
            }
        );
    }

    #[test]
    fn a_subagent_cycle_is_ambiguous() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let before = snapshot(dir).unwrap();
        make_db(dir, A, &[B]);
        make_db(dir, B, &[A]);
        assert_eq!(
            decide(dir, &before, None).unwrap(),
            Binding::Ambiguous {
                candidates: vec![id(A), id(B)]
            }
        );
    }

    #[test]
    fn zero_new_databases_is_waiting() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        make_db(dir, A, &[]);
        let before = snapshot(dir).unwrap();
        assert_eq!(decide(dir, &before, None).unwrap(), Binding::Waiting);
        assert_eq!(
            decide(dir, &before, Some(std::process::id())).unwrap(),
            Binding::Waiting
        );
    }
}
