//! Decoder throughput (MB/s of step payload) on realistic agy payloads:
//! `steps::decode` on a planner response, a 200 KB answer, a 64 KB view_file
//! result and a 50-hit grep result, plus the bare `wire::fields` walk.
//!
//! `cargo bench --bench decode` (add `-- --quick` for a fast look).

use agy_format::steps::{
    self, Body, GrepHit, GrepResult, Metadata, PlannerResponse, Step, StepRow, StepStatus,
    StepType, ToolCall, Usage, ViewFileResult,
};
use agy_format::wire;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;

/// Deterministic prose of about `bytes` bytes, with some non-ASCII.
fn prose(bytes: usize, seed: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "decoder",
        "walks",
        "every",
        "field",
        "of",
        "agy's",
        "step",
        "payload,",
        "skipping",
        "unknown",
        "ones;",
        "naïve",
        "readers",
        "break",
        "when",
        "a",
        "new",
        "build",
        "adds",
        "fields.",
        "Große",
        "données",
        "—",
        "日本語",
        "🙂",
        "\n\n",
    ];
    let mut out = String::with_capacity(bytes + 16);
    let mut i = seed;
    while out.len() < bytes {
        out.push_str(WORDS[i % WORDS.len()]);
        out.push(' ');
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    out
}

fn metadata(call: Option<ToolCall>) -> Metadata {
    Metadata {
        created_at: Some((1_767_225_600, 123_456_789)),
        source: Some(2),
        tool_call: call,
        usage: Some(Usage {
            model: 1042,
            input_tokens: 48_213,
            output_tokens: 1_377,
            cache_write_tokens: 0,
            cache_read_tokens: 41_000,
            thinking_tokens: 812,
            response_tokens: 565,
        }),
        generator_model: Some(1026),
        execution_id: Some("exec-7f1c2a9e-3b1d-4f7e-9c55-0b6f2d1e8a44".into()),
        ..Metadata::default()
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn planner_row() -> StepRow {
    let mut step = Step::new(4, StepType::PlannerResponse, StepStatus::Done).with_body(
        Body::Planner(PlannerResponse {
            text: prose(4096, 1),
            thinking: prose(1536, 2),
            tool_calls: vec![
                call(
                    "toolu_01",
                    "view_file",
                    r#"{"AbsolutePath":"/home/dev/project/src/lib.rs","StartLine":1,"EndLine":200,"toolAction":"Viewing","toolSummary":"src/lib.rs"}"#,
                ),
                call(
                    "toolu_02",
                    "grep_search",
                    r#"{"Query":"fn decode","SearchPath":"/home/dev/project","Includes":["*.rs"],"toolAction":"Searching","toolSummary":"fn decode"}"#,
                ),
                call(
                    "toolu_03",
                    "run_command",
                    r#"{"CommandLine":"cargo test --workspace","Cwd":"/home/dev/project","toolAction":"Running","toolSummary":"cargo test"}"#,
                ),
            ],
            stop_reason: Some(2),
            ..Default::default()
        }),
    );
    step.metadata = Some(metadata(None));
    step.to_row()
}

fn long_answer_row() -> StepRow {
    let mut step = Step::new(2, StepType::PlannerResponse, StepStatus::Done).with_body(
        Body::Planner(PlannerResponse {
            text: prose(200 * 1024, 3),
            stop_reason: Some(2),
            ..Default::default()
        }),
    );
    step.metadata = Some(metadata(None));
    step.to_row()
}

fn view_file_row() -> StepRow {
    let content: String = (1..)
        .map(|n| {
            format!(
                "{n:>5}: let value_{n} = compute(&input[{n}..], {n} * 2); // {}\n",
                n % 7
            )
        })
        .scan(0usize, |len, line| {
            *len += line.len();
            (*len <= 64 * 1024).then_some(line)
        })
        .collect();
    let mut step = Step::new(5, StepType::ViewFile, StepStatus::Done).with_body(Body::ViewFile(
        ViewFileResult {
            uri: "file:///home/dev/project/src/lib.rs".into(),
            start: Some(1),
            end: Some(content.lines().count() as u64),
            content,
            next_line: None,
            total: Some(2400),
        },
    ));
    step.metadata = Some(metadata(Some(call(
        "toolu_01",
        "view_file",
        r#"{"AbsolutePath":"/home/dev/project/src/lib.rs","StartLine":1,"EndLine":2000}"#,
    ))));
    step.to_row()
}

fn grep_row() -> StepRow {
    let hits: Vec<GrepHit> = (0..50)
        .map(|i| GrepHit {
            path: format!("src/module_{}/file_{i}.rs", i % 6),
            line: 10 + i * 37,
            text: format!("    pub fn decode_{i}(buf: &[u8]) -> Result<Step, WireError> {{"),
            abs_path: Some(format!(
                "/home/dev/project/src/module_{}/file_{i}.rs",
                i % 6
            )),
        })
        .collect();
    let output = hits
        .iter()
        .map(|h| format!("{}:{}:{}", h.path, h.line, h.text))
        .collect::<Vec<_>>()
        .join("\n");
    let mut step =
        Step::new(6, StepType::GrepSearch, StepStatus::Done).with_body(Body::Grep(GrepResult {
            query: "fn decode".into(),
            include: Some("*.rs".into()),
            output,
            hits,
            command: Some("rg --line-number 'fn decode' --glob '*.rs'".into()),
            cwd: Some("file:///home/dev/project".into()),
        }));
    step.metadata = Some(metadata(Some(call(
        "toolu_02",
        "grep_search",
        r#"{"Query":"fn decode","Includes":["*.rs"]}"#,
    ))));
    step.to_row()
}

/// Row bytes a decode reads: the payload plus the side columns.
fn row_bytes(row: &StepRow) -> u64 {
    [
        &row.payload,
        &row.metadata,
        &row.error_details,
        &row.permissions,
        &row.task_details,
    ]
    .iter()
    .map(|b| b.as_ref().map_or(0, Vec::len) as u64)
    .sum()
}

/// Walk every field, descending into every length-delimited value that
/// itself parses as a message (what a schema-less fingerprint does).
fn walk(buf: &[u8], depth: u32) -> usize {
    let mut n = 0;
    for field in wire::fields(buf) {
        let Ok(field) = field else { break };
        n += 1;
        if let wire::Value::Len(inner) = field.value {
            if depth < 6 && wire::validate(inner).is_ok() {
                n += walk(inner, depth + 1);
            }
        }
    }
    n
}

/// About `bytes` bytes of small fields of every wire type, with nested
/// usage-like messages: the walker's per-field cost, not memcpy speed.
fn dense_message(bytes: usize) -> Vec<u8> {
    let mut e = wire::Encoder::new();
    let mut i: u64 = 0;
    while e.as_bytes().len() < bytes {
        e.varint(1, i)
            .varint(2, i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .fixed32(3, i as u32)
            .fixed64(4, i << 20)
            .string(5, "toolu_01")
            .message(9, |u| {
                u.varint(2, 48_213 + i).varint(3, 1_377).varint(5, 41_000);
            });
        i += 1;
    }
    e.finish()
}

fn bench_decode(c: &mut Criterion) {
    let cases = [
        ("planner_4k_thinking_tools_usage", planner_row()),
        ("long_answer_200k", long_answer_row()),
        ("view_file_64k", view_file_row()),
        ("grep_50_hits", grep_row()),
    ];
    for (_, row) in &cases {
        // A bench of a decoder that fails would measure the wrong thing.
        let step = steps::decode(row);
        assert!(step.decode_error.is_none() && step.unknown_fields.is_empty());
        assert!(step.body.is_some());
    }

    let mut group = c.benchmark_group("steps::decode");
    for (name, row) in &cases {
        group.throughput(Throughput::Bytes(row_bytes(row)));
        group.bench_function(*name, |b| b.iter(|| steps::decode(black_box(row))));
    }
    group.finish();

    // The bare walk. Skipping a large length-delimited value is O(1), so the
    // interesting numbers are the nested walks (every message descended into,
    // as a schema-less fingerprint does) and a dense message of small fields.
    let dense = dense_message(64 * 1024);
    let mut group = c.benchmark_group("wire::fields");
    group.throughput(Throughput::Bytes(dense.len() as u64));
    group.bench_function("dense_64k/top_level", |b| {
        b.iter(|| wire::fields(black_box(&dense)).count())
    });
    group.bench_function("dense_64k/nested", |b| {
        b.iter(|| walk(black_box(&dense), 0))
    });
    for (name, row) in &cases {
        let payload = row.payload.as_deref().unwrap_or_default();
        group.throughput(Throughput::Bytes(payload.len() as u64));
        group.bench_function(format!("{name}/nested"), |b| {
            b.iter(|| walk(black_box(payload), 0))
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_decode
}
criterion_main!(benches);
