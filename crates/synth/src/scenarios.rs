//! The corpus's recordings, one function each: what agy writes for a
//! greeting, thinking, tools, a resumed conversation, unicode, errors,
//! subagents, unknown steps and the other cases [`crate::maintain`] lists.

use crate::builder::{blob, call, row_write, Builder};
use crate::bulk::chunks;
use crate::{stable_uuid, MODELS_FORMAT_1, MODELS_FORMAT_2, WORKSPACE};
use agy_corpus::db::step_write;
use agy_corpus::recording::{Gate, Provenance, Recording, SqlValue, Write};
use agy_format::steps::{
    Body, DirEntry, ErrorDetails, GenericTool, GrepHit, GrepResult, ListDirResult, Metadata,
    ModelError, PlannerResponse, ReadUrlResult, RunCommandResult, SearchWebResult, Step,
    StepStatus, StepType, Subagent, UserInput, ViewFileResult,
};
use agy_format::wire::Encoder;

const HELLO: &str = "Hello! I'm agy, running in print mode. I can read and edit files in this workspace, run commands, and search the web. What would you like to work on?";

pub(crate) fn hello() -> Recording {
    let mut b = Builder::new(
        "hello",
        "One answer that grows in place over six commits.",
        "Say hello",
        HELLO,
    );
    b.open_turn(0, "Say hello", "Greeting the user", true);
    b.planner(2, &[], &chunks(HELLO, 6), vec![], 180);
    b.finish()
}

const THINK_TEXT: &str = "The capital of Australia is **Canberra**, not Sydney. It was purpose-built as a compromise between Sydney and Melbourne and became the seat of government in 1927.";
const THINK_THOUGHT: &str = "The user wants the capital of Australia. Common misconception: Sydney. The correct answer is Canberra, chosen in 1908 as a compromise; parliament moved there in 1927.";

pub(crate) fn thinking() -> Recording {
    let mut b = Builder::new(
        "thinking",
        "Thinking (20.3) grows first, then the answer (20.1), in one type-15 step.",
        "What is the capital of Australia?",
        THINK_TEXT,
    );
    b.open_turn(
        0,
        "What is the capital of Australia?",
        "Answering a geography question",
        true,
    );
    b.planner(
        2,
        &chunks(THINK_THOUGHT, 3),
        &chunks(THINK_TEXT, 4),
        vec![],
        160,
    );
    b.finish()
}

const TOOLS_FINAL: &str = "I fixed the off-by-one in `src/lib.rs`: `sum_to` now includes `n`. `cargo test` failed before the fix (1 failing test); the `deploy` step could not run because `deploy.sh` does not exist.";

pub(crate) fn tools() -> Recording {
    tools_in(WORKSPACE)
}

/// `tools` as agy would write it running in `ws`: every path its tools
/// name is under `ws` (so a test can run it on a real directory).
pub(crate) fn tools_in(ws: &str) -> Recording {
    let mut b = Builder::new(
        "tools",
        "One turn with view_file, grep_search, list_directory, run_command (exit 1), a file edit and a failing tool.",
        "Fix the failing test",
        TOOLS_FINAL,
    );
    b.in_workspace(ws);
    b.open_turn(0, "Fix the failing test", "Fixing a failing test", true);
    tools_inspect(&mut b, ws);
    tools_fix(&mut b, ws);
    b.finish()
}

/// What `src/lib.rs` of the `tools` workspace holds before the fix (its
/// view_file shows it; the edit replaces its `(0..n)`).
pub const TOOLS_LIB_RS: &str = "pub fn sum_to(n: u32) -> u32 {\n    (0..n).sum()\n}\n";

/// `tools`, first half: view_file, grep_search and list_directory.
fn tools_inspect(b: &mut Builder, ws: &str) {
    let view = call(
        "call-view-1",
        "view_file",
        serde_json::json!({"AbsolutePath": format!("{ws}/src/lib.rs"), "StartLine": 1, "EndLine": 20, "toolAction": "Viewing", "toolSummary": "src/lib.rs"}),
    );
    let grep = call(
        "call-grep-1",
        "grep_search",
        serde_json::json!({"Query": "sum_to", "SearchPath": ws, "Includes": ["*.rs"], "toolAction": "Searching", "toolSummary": "sum_to"}),
    );
    let list = call(
        "call-list-1",
        "list_dir",
        serde_json::json!({"DirectoryPath": ws, "toolAction": "Listing", "toolSummary": "project"}),
    );
    b.planner(
        2,
        &["Let me look at the code and the tests first."],
        &["I'll inspect the project."],
        vec![view.clone(), grep.clone(), list.clone()],
        150,
    );
    b.tool(
        3,
        StepType::ViewFile,
        view,
        Some(Body::ViewFile(ViewFileResult {
            uri: format!("file://{ws}/src/lib.rs"),
            start: Some(1),
            end: Some(5),
            content: TOOLS_LIB_RS.into(),
            next_line: None,
            total: Some(5),
        })),
        StepStatus::Done,
        120,
    );
    b.tool(
        4,
        StepType::GrepSearch,
        grep,
        Some(Body::Grep(GrepResult {
            query: "sum_to".into(),
            include: Some("*.rs".into()),
            output: "src/lib.rs:1:pub fn sum_to(n: u32) -> u32 {\ntests/sum.rs:4:    assert_eq!(sum_to(3), 6);\n".into(),
            hits: vec![
                GrepHit {
                    path: "src/lib.rs".into(),
                    line: 1,
                    text: "pub fn sum_to(n: u32) -> u32 {".into(),
                    abs_path: Some(format!("{ws}/src/lib.rs")),
                },
                GrepHit {
                    path: "tests/sum.rs".into(),
                    line: 4,
                    text: "    assert_eq!(sum_to(3), 6);".into(),
                    abs_path: Some(format!("{ws}/tests/sum.rs")),
                },
            ],
            command: Some("rg --line-number sum_to".into()),
            cwd: Some(format!("file://{ws}")),
        })),
        StepStatus::Done,
        140,
    );
    b.tool(
        5,
        StepType::ListDirectory,
        list,
        Some(Body::ListDirectory(ListDirResult {
            dir: format!("file://{ws}"),
            entries: vec![
                DirEntry {
                    name: "Cargo.toml".into(),
                    is_dir: false,
                    size: Some(212),
                },
                DirEntry {
                    name: "src".into(),
                    is_dir: true,
                    size: None,
                },
                DirEntry {
                    name: "tests".into(),
                    is_dir: true,
                    size: None,
                },
            ],
        })),
        StepStatus::Done,
        90,
    );
}

/// `tools`, second half: a failing test run, the fix, a failing tool and the
/// answer.
fn tools_fix(b: &mut Builder, ws: &str) {
    let test = call(
        "call-run-1",
        "run_command",
        serde_json::json!({"CommandLine": "cargo test", "Cwd": ws, "toolAction": "Running", "toolSummary": "cargo test"}),
    );
    b.planner(
        6,
        &[],
        &["Running the tests to see the failure."],
        vec![test.clone()],
        150,
    );
    b.tool(
        7,
        StepType::RunCommand,
        test,
        Some(Body::RunCommand(RunCommandResult {
            cwd: Some(ws.into()),
            exit_code: Some(101),
            output: "running 1 test\ntest sum_three ... FAILED\n\nassertion `left == right` failed\n  left: 3\n right: 6\n\ntest result: FAILED. 0 passed; 1 failed\n".into(),
            command: Some("cargo test".into()),
        })),
        StepStatus::Done,
        400,
    );
    let edit = call(
        "call-edit-1",
        "replace_file_content",
        serde_json::json!({"TargetFile": format!("{ws}/src/lib.rs"), "ReplacementContent": "    (0..=n).sum()", "TargetContent": "    (0..n).sum()", "toolAction": "Editing", "toolSummary": "include n in the range"}),
    );
    b.planner(
        8,
        &[],
        &["The range excludes `n`; fixing it."],
        vec![edit.clone()],
        150,
    );
    b.tool(
        9,
        StepType::FileEdit,
        edit,
        Some(Body::Write {
            summary: "Edited src/lib.rs: (0..n) -> (0..=n)".into(),
        }),
        StepStatus::Done,
        110,
    );
    let deploy = call(
        "call-run-2",
        "run_command",
        serde_json::json!({"CommandLine": "./deploy.sh", "Cwd": ws, "toolAction": "Running", "toolSummary": "deploy"}),
    );
    b.planner(10, &[], &["Now deploying."], vec![deploy.clone()], 150);
    let mut failed =
        Step::new(11, StepType::RunCommand, StepStatus::Running).with_tool_call(deploy);
    b.step(60, failed.clone());
    failed.status = StepStatus::Error;
    failed.errors.push(ErrorDetails {
        message: "run_command failed: ./deploy.sh: No such file or directory".into(),
        detail: Some("exec: \"./deploy.sh\": stat ./deploy.sh: no such file or directory".into()),
        stack: None,
    });
    b.step(80, failed);
    b.planner(12, &[], &chunks(TOOLS_FINAL, 3), vec![], 170);
}

const RESUME_FIRST: &str = "Your project is a small Rust library with one function, `sum_to`.";
const RESUME_SECOND: &str = "Yes: add a doc comment and a property test for `sum_to`. I'd start with `proptest` comparing it against `n * (n + 1) / 2`.";

pub(crate) fn resume() -> Recording {
    let mut b = Builder::new(
        "resume",
        "A second turn on an existing conversation: `pre` commits hold turn one; the run writes turn two (idx continues).",
        "Any suggestions?",
        RESUME_SECOND,
    );
    b.pre(true);
    b.open_turn(0, "What is this project?", "Describing the project", true);
    b.planner(2, &[], &[RESUME_FIRST], vec![], 100);
    b.pre(false);
    b.open_turn(3, "Any suggestions?", "Suggesting improvements", false);
    b.planner(
        5,
        &["They want next steps."],
        &chunks(RESUME_SECOND, 4),
        vec![],
        170,
    );
    b.finish()
}

const TWO_TURNS_FIRST: &str = "The workspace is a small Rust library: `src/lib.rs` defines `sum_to`, and `tests/sum.rs` tests it.";
const TWO_TURNS_SECOND: &str =
    "Add a doc comment to `sum_to` and a test for `n = 0`; both are one-line changes.";

/// Two turns on stdin in one process (`--input-format stream-json`): one
/// conversation, the second turn's step indexes continue the first's, a
/// `result` per turn (docs/agy-format.md, "Input: --input-format
/// stream-json").
pub(crate) fn stdin_two_turns() -> Recording {
    let mut b = Builder::new(
        "stdin-two-turns",
        "Two stdin turns in one process and one conversation; turn 1's commits count from when its line arrived.",
        "What is this project?",
        // `stdout` is what `-p` prints: the first turn's answer.
        TWO_TURNS_FIRST,
    );
    let h = b.header();
    h.agy_version = "1.2.7".into();
    h.version_output = "1.2.7\n".into();
    if let Provenance::Synthesized { follows, .. } = &mut h.provenance {
        *follows = Some("simv/crt capture crt-1.2.7-win-loop-two-turns".into());
    }
    b.open_turn(0, "What is this project?", "Describing the project", true);
    b.planner(2, &[], &chunks(TWO_TURNS_FIRST, 3), vec![], 150);
    b.next_turn();
    b.open_turn(3, "Any suggestions?", "Suggesting improvements", false);
    b.planner(5, &[], &chunks(TWO_TURNS_SECOND, 3), vec![], 150);
    b.finish()
}

/// Split points chosen inside user-perceived characters: between a base
/// letter and its combining mark, inside a ZWJ emoji sequence, between the two
/// regional indicators of a flag, and inside CJK runs.
const UNICODE_PIECES: &[&str] = &[
    "Café au lait: cafe\u{0301}",
    "\u{0301} (combining accent split from its e). Family: \u{1F469}\u{200D}",
    "\u{1F469}\u{200D}\u{1F467}\u{200D}\u{1F466}. Flag: \u{1F1EF}",
    "\u{1F1F5} Japan. 日本語の",
    "テキスト、中文字符，한국어. Done \u{2705}",
];

pub(crate) fn unicode() -> Recording {
    let text: String = UNICODE_PIECES.concat();
    let mut b = Builder::new(
        "unicode",
        "Emoji (ZWJ sequences, flags), CJK and combining marks, with growth commits split inside grapheme clusters.",
        "Show me some Unicode",
        &text,
    );
    b.open_turn(0, "Show me some Unicode", "Showing Unicode text", true);
    b.planner(2, &["Mixing scripts 🙂"], UNICODE_PIECES, vec![], 150);
    b.finish()
}

const QUOTA_MESSAGE: &str =
    "You have exhausted your capacity on this model. Your quota will reset after 2h13m.";

pub(crate) fn quota_error() -> Recording {
    let mut b = Builder::new(
        "quota-error",
        "A 429 quota error: a type-17 step carrying field 24, exit code 1 and agy's stderr.",
        "Refactor the parser",
        "",
    );
    {
        let h = b.header();
        h.exit_code = 1;
        h.stderr = format!("Error: {QUOTA_MESSAGE} (429 RESOURCE_EXHAUSTED)\n");
    }
    b.open_turn(0, "Refactor the parser", "Refactoring the parser", true);
    let mut placeholder = Step::new(2, StepType::PlannerResponse, StepStatus::Generating)
        .with_body(Body::Planner(PlannerResponse::default()));
    placeholder.metadata = Some(Metadata {
        source: Some(2),
        ..Metadata::default()
    });
    b.step(200, placeholder.clone());
    placeholder.status = StepStatus::Error;
    b.step(600, placeholder);
    let err = Step::new(3, StepType::ErrorMessage, StepStatus::Done).with_body(Body::ModelError(
        ModelError {
            summary: Some("RESOURCE_EXHAUSTED (code 429): quota exceeded".into()),
            diagnostic: Some("model=gemini-3.7-flash-medium tier=free".into()),
            response_json: Some(
                r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#
                    .into(),
            ),
            id: Some("err-429-7f3a".into()),
            user_message: Some(QUOTA_MESSAGE.into()),
        },
    ));
    b.step(30, err);
    b.finish()
}

fn long_text() -> String {
    let mut s = String::from("# A long report\n\n");
    let mut n = 0;
    while s.len() < 210_000 {
        n += 1;
        s.push_str(&format!(
            "Section {n}. The quick brown fox jumps over the lazy dog while the build cache warms; line {n} keeps the answer growing steadily past two hundred kilobytes.\n"
        ));
    }
    s.push_str("End of report.");
    s
}

pub(crate) fn long_answer() -> Recording {
    let text = long_text();
    let mut b = Builder::new(
        "long-answer",
        "An answer over 200 KB, growing in four commits.",
        "Write a long report",
        &text,
    );
    b.open_turn(0, "Write a long report", "Writing a long report", true);
    b.planner(2, &[], &chunks(&text, 4), vec![], 250);
    b.finish()
}

const SUB_PARENT: &str = "The researcher subagent found two callers of `parse_config`; both pass a path, so the signature change is safe.";
const SUB_CHILD: &str =
    "`parse_config` is called from src/main.rs:12 and src/cli.rs:40, both with a &Path.";

pub(crate) fn subagent() -> Recording {
    let mut b = Builder::new(
        "subagent",
        "A type-127 invoke_subagent step; the child conversation's database is written at the same time by a child process.",
        "Is changing parse_config safe?",
        SUB_PARENT,
    );
    let root = b.root();
    let child = stable_uuid("subagent:child");
    b.open_turn(
        0,
        "Is changing parse_config safe?",
        "Checking parse_config callers",
        true,
    );
    let invoke = call(
        "call-sub-1",
        "invoke_subagent",
        serde_json::json!({"Role": "researcher", "Task": "find callers of parse_config", "toolAction": "Delegating", "toolSummary": "researcher"}),
    );
    b.planner(
        2,
        &["I'll delegate the search."],
        &["Asking a researcher subagent."],
        vec![invoke.clone()],
        150,
    );
    let mut sub = Step::new(3, StepType::InvokeSubagent, StepStatus::Running)
        .with_tool_call(invoke)
        .with_body(Body::Subagent(Subagent {
            child_conversation_id: child.clone(),
            log_uri: Some(format!(
                "file:///home/dev/.gemini/antigravity-cli/brain/{child}/transcript.jsonl"
            )),
            role: Some("researcher".into()),
            kind: Some("research".into()),
        }));
    b.step(80, sub.clone());
    // The child conversation: its own database, written by a child process.
    b.writing_to_db(&child);
    let mut rows = b.conversation_rows(&child, Some(&root));
    let user =
        Step::new(0, StepType::UserInput, StepStatus::Done).with_body(Body::UserInput(UserInput {
            text: "find callers of parse_config".into(),
            workspace_uri: None,
        }));
    rows.push(step_write(&user));
    b.commit(100, rows);
    b.planner(1, &[], &chunks(SUB_CHILD, 3), vec![], 140);
    b.writing_to_db(&root);
    sub.status = StepStatus::Done;
    b.step(120, sub);
    b.planner(4, &[], &chunks(SUB_PARENT, 4), vec![], 160);
    b.finish()
}

const UNKNOWN_TEXT: &str =
    "Done. (This run mixed in step types and fields this decoder has never seen.)";

pub(crate) fn unknown_steps() -> Recording {
    let mut b = Builder::new(
        "unknown-steps",
        "Unknown step types (250, 77) and unknown fields of every wire type, mixed in with known steps.",
        "Do the thing",
        UNKNOWN_TEXT,
    );
    b.open_turn(0, "Do the thing", "Doing the thing", true);
    // An ephemeral message (known type 90, no body we decode).
    let mut eph = Encoder::new();
    eph.varint(1, 90).varint(4, 3).message(88, |m| {
        m.string(1, "ephemeral: workspace indexed");
    });
    b.commit(100, vec![raw_step(2, 90, 3, eph.finish())]);
    // A brand-new step type with a body in a brand-new field.
    let mut novel = Encoder::new();
    novel
        .varint(1, 250)
        .varint(4, 3)
        .message(250, |m| {
            m.string(1, "future feature")
                .varint(2, 42)
                .fixed32(3, 7)
                .fixed64(4, 9);
        })
        .fixed64(251, 0xdead_beef);
    b.commit(120, vec![raw_step(3, 250, 3, novel.finish())]);
    // A known planner step with unknown fields at several depths.
    let mut mixed = Encoder::new();
    mixed
        .varint(1, 15)
        .fixed32(2, 0x0102_0304)
        .varint(4, 3)
        .message(5, |m| {
            m.varint(3, 2).string(77, "new metadata field");
        })
        .message(20, |p| {
            p.fixed64(2, 99)
                .string(1, UNKNOWN_TEXT)
                .varint(40, 1)
                .message(41, |x| {
                    x.string(1, "nested unknown");
                })
                .fixed32(42, 5);
        })
        .varint(9999, 1);
    b.commit(150, vec![raw_step(4, 15, 3, mixed.finish())]);
    // Another unknown type with an empty payload.
    b.commit(80, vec![raw_step(5, 77, 3, Vec::new())]);
    b.finish()
}

fn raw_step(idx: i64, step_type: i64, status: i64, payload: Vec<u8>) -> Write {
    row_write(
        "steps",
        ("idx", SqlValue::Integer(idx)),
        vec![
            ("step_type", SqlValue::Integer(step_type)),
            ("status", SqlValue::Integer(status)),
            ("has_subtrajectory", SqlValue::Integer(0)),
            ("step_payload", blob(payload)),
            ("step_format", SqlValue::Integer(1)),
        ],
    )
}

const PLACEHOLDER_TEXT: &str = "Here is the summary you asked for: three modules, no cycles.";

pub(crate) fn placeholder() -> Recording {
    let mut b = Builder::new(
        "placeholder",
        "An empty type-15 placeholder (GENERATING, no text) committed well before generation starts.",
        "Summarise the modules",
        PLACEHOLDER_TEXT,
    );
    b.open_turn(0, "Summarise the modules", "Summarising modules", true);
    let mut empty = Step::new(2, StepType::PlannerResponse, StepStatus::Generating)
        .with_body(Body::Planner(PlannerResponse::default()));
    empty.metadata = Some(Metadata {
        source: Some(2),
        ..Metadata::default()
    });
    b.step(100, empty);
    b.planner(2, &[], &chunks(PLACEHOLDER_TEXT, 3), vec![], 600);
    b.finish()
}

pub(crate) fn equal_rewrite() -> Recording {
    let final_text = "The answer is 42. Checked twice.";
    let mut b = Builder::new(
        "equal-rewrite",
        "An in-place rewrite to text of the same length (41 -> 42) while generating; a length-keyed cache would miss it.",
        "What is six times seven?",
        final_text,
    );
    b.open_turn(0, "What is six times seven?", "Multiplying", true);
    let mk = |b: &Builder, text: &str, status| {
        b.planner_step(
            2,
            status,
            PlannerResponse {
                text: text.into(),
                ..PlannerResponse::default()
            },
        )
    };
    let s = mk(&b, "The answer is", StepStatus::Generating);
    b.step(150, s);
    let s = mk(&b, "The answer is 41.", StepStatus::Generating);
    b.step(150, s);
    let s = mk(&b, "The answer is 42.", StepStatus::Generating);
    b.step(150, s);
    let s = mk(&b, final_text, StepStatus::Done);
    b.step(150, s);
    b.finish()
}

const PERMISSION_TEXT: &str = "All 12 tests pass.";

pub(crate) fn permission() -> Recording {
    let mut b = Builder::new(
        "permission",
        "An agy before 1.1.7 (1.1.4): a run_command that needs permission; without --dangerously-skip-permissions agy writes a WAITING step and stalls, as its print mode did (later versions auto-deny: outcomes/denied-*).",
        "Run the tests",
        PERMISSION_TEXT,
    );
    {
        let h = b.header();
        h.agy_version = "1.1.4".into();
        h.version_output = "1.1.4\n".into();
        h.models_output = MODELS_FORMAT_1.into();
    }
    b.open_turn(0, "Run the tests", "Running tests", true);
    let run = call(
        "call-run-perm",
        "run_command",
        serde_json::json!({"CommandLine": "npm test", "Cwd": WORKSPACE, "toolAction": "Running", "toolSummary": "npm test"}),
    );
    b.planner(2, &[], &["Running the test suite."], vec![run.clone()], 150);
    let mut waiting =
        Step::new(3, StepType::RunCommand, StepStatus::Waiting).with_tool_call(run.clone());
    waiting
        .metadata
        .get_or_insert_with(Metadata::default)
        .source = Some(2);
    let mut write = step_write(&waiting);
    let mut perm = Encoder::new();
    perm.message(2, |r| {
        r.message(1, |i| {
            i.string(1, "command").string(2, "npm test");
        });
    });
    write
        .values
        .insert("permissions".into(), blob(perm.finish()));
    b.commit_gated(80, vec![write], Some(Gate::Permission));
    b.tool(
        3,
        StepType::RunCommand,
        run,
        Some(Body::RunCommand(RunCommandResult {
            cwd: Some(WORKSPACE.into()),
            exit_code: Some(0),
            output: "> test\n> jest\n\nTests: 12 passed, 12 total\n".into(),
            command: Some("npm test".into()),
        })),
        StepStatus::Done,
        300,
    );
    b.planner(4, &[], &[PERMISSION_TEXT], vec![], 150);
    b.finish()
}

const WEB_TEXT: &str =
    "Rust 1.95 stabilised `if let` chains in match guards; see the release notes.";

pub(crate) fn web_tools() -> Recording {
    let mut b = Builder::new(
        "web-tools",
        "search_web (33/42) and read_url_content (31/40).",
        "What's new in Rust 1.95?",
        WEB_TEXT,
    );
    b.open_turn(0, "What's new in Rust 1.95?", "Looking up Rust news", true);
    let search = call(
        "call-web-1",
        "search_web",
        serde_json::json!({"query": "Rust 1.95 release notes"}),
    );
    b.planner(2, &[], &["Searching."], vec![search.clone()], 120);
    b.tool(
        3,
        StepType::SearchWeb,
        search,
        Some(Body::SearchWeb(SearchWebResult {
            query: "Rust 1.95 release notes".into(),
            summary: Some("Rust 1.95.0 was released with if-let chains in match guards.".into()),
        })),
        StepStatus::Done,
        300,
    );
    let read = call(
        "call-web-2",
        "read_url_content",
        serde_json::json!({"Url": "https://blog.rust-lang.org/releases/1.95.0"}),
    );
    b.planner(
        4,
        &[],
        &["Reading the announcement."],
        vec![read.clone()],
        120,
    );
    b.tool(
        5,
        StepType::ReadUrl,
        read,
        Some(Body::ReadUrl(ReadUrlResult {
            url: "https://blog.rust-lang.org/releases/1.95.0".into(),
            title: Some("Announcing Rust 1.95.0".into()),
            description: Some(
                "The Rust team is happy to announce a new version of Rust, 1.95.0.".into(),
            ),
            content_path: Some("/home/dev/.gemini/antigravity-cli/brain/web/1.md".into()),
        })),
        StepStatus::Done,
        250,
    );
    b.planner(6, &[], &chunks(WEB_TEXT, 2), vec![], 150);
    b.finish()
}

const ORCH_TEXT: &str = "Task created and the team notified.";

pub(crate) fn orchestration() -> Recording {
    let mut b = Builder::new(
        "orchestration",
        "Generic orchestration tools (type 132, field 140), a system message (101, field 114) and a conversation-history step (98).",
        "Create a task for the release",
        ORCH_TEXT,
    );
    b.open_turn(
        0,
        "Create a task for the release",
        "Creating a release task",
        true,
    );
    let mut history = Encoder::new();
    history.varint(1, 98).varint(4, 3).message(98, |h| {
        h.string(1, "earlier context elided");
    });
    b.commit(60, vec![raw_step(2, 98, 3, history.finish())]);
    let manage = call(
        "call-task-1",
        "manage_task",
        serde_json::json!({"action": "create", "title": "Release 2.0"}),
    );
    b.planner(3, &[], &["Creating the task."], vec![manage.clone()], 120);
    b.tool(
        4,
        StepType::GenericTool,
        manage,
        Some(Body::Generic(GenericTool {
            args: vec![
                ("action".into(), "create".into()),
                ("title".into(), "Release 2.0".into()),
            ],
            result: Some("task t-17 created".into()),
        })),
        StepStatus::Done,
        150,
    );
    let note =
        Step::new(5, StepType::SystemMessage, StepStatus::Done).with_body(Body::SystemMessage {
            message: "Task t-17 created: Release 2.0".into(),
        });
    b.step(50, note);
    b.planner(6, &[], &[ORCH_TEXT], vec![], 140);
    b.finish()
}

fn simple_answer(
    name: &str,
    description: &str,
    version: &str,
    models: &str,
    text: &str,
) -> Recording {
    let prompt = format!("Say hi briefly, agy {version}");
    let mut b = Builder::new(name, description, &prompt, text);
    {
        let h = b.header();
        h.agy_version = version.into();
        h.version_output = format!("{version}\n");
        h.models_output = models.into();
    }
    b.open_turn(0, &prompt, "Greeting", true);
    b.planner(2, &[], &chunks(text, 2), vec![], 200);
    b.finish()
}

pub(crate) fn models_v1() -> Recording {
    simple_answer(
        "models-v1",
        "An older agy (1.1.4): `agy models` prints display names (format 1), no stream-json.",
        "1.1.4",
        MODELS_FORMAT_1,
        "Hi there!",
    )
}

pub(crate) fn models_v2() -> Recording {
    simple_answer(
        "models-v2",
        "agy 1.1.14: `agy models` prints one slug per line (format 2).",
        "1.1.14",
        MODELS_FORMAT_2,
        "Hello, friend.",
    )
}
