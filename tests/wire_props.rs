//! Properties of the wire decoder and the step decoder built on it:
//! arbitrary bytes never panic or loop, encoding then decoding returns the
//! same fields, typed bodies round-trip, and unknown fields of every wire type
//! between known ones are skipped and reported without changing the body.

use agy_bridge::follow::events::Tracker;
use agy_format::steps::{
    self, Body, DirEntry, GenericTool, GrepHit, GrepResult, ListDirResult, McpToolResult, Metadata,
    ModelError, ModelInfo, PlannerResponse, ReadUrlResult, RunCommandResult, SearchWebResult, Step,
    StepRow, StepStatus, StepType, Subagent, ToolCall, Usage, UserInput, ViewFileResult,
};
use agy_format::wire::{self, Encoder, Field, Value, WireError, WireType};
use proptest::collection::vec;
use proptest::prelude::*;
use std::collections::BTreeSet;

const MAX_FIELD: u32 = (1 << 29) - 1;

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum OwnedValue {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(Vec<u8>),
}

impl OwnedValue {
    fn encode(&self, e: &mut Encoder, number: u32) {
        match self {
            OwnedValue::Varint(v) => e.varint(number, *v),
            OwnedValue::Fixed64(v) => e.fixed64(number, *v),
            OwnedValue::Fixed32(v) => e.fixed32(number, *v),
            OwnedValue::Bytes(b) => e.bytes(number, b),
        };
    }

    fn wire_type(&self) -> WireType {
        match self {
            OwnedValue::Varint(_) => WireType::Varint,
            OwnedValue::Fixed64(_) => WireType::Fixed64,
            OwnedValue::Fixed32(_) => WireType::Fixed32,
            OwnedValue::Bytes(_) => WireType::Len,
        }
    }

    fn of(v: &Value<'_>) -> OwnedValue {
        match *v {
            Value::Varint(x) => OwnedValue::Varint(x),
            Value::Fixed64(x) => OwnedValue::Fixed64(x),
            Value::Fixed32(x) => OwnedValue::Fixed32(x),
            Value::Len(b) => OwnedValue::Bytes(b.to_vec()),
        }
    }
}

/// Varints biased towards the edges (0, 7/14/.../63-bit boundaries, max).
fn varint_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        (0u32..64).prop_map(|bits| 1u64 << bits),
        (0u32..64).prop_map(|bits| (1u64 << bits).wrapping_sub(1)),
        Just(u64::MAX),
        Just(0u64),
    ]
}

fn owned_value() -> impl Strategy<Value = OwnedValue> {
    prop_oneof![
        varint_value().prop_map(OwnedValue::Varint),
        any::<u64>().prop_map(OwnedValue::Fixed64),
        any::<u32>().prop_map(OwnedValue::Fixed32),
        vec(any::<u8>(), 0..200).prop_map(OwnedValue::Bytes),
    ]
}

fn field_number() -> impl Strategy<Value = u32> {
    prop_oneof![
        1u32..=MAX_FIELD,
        1u32..=200,
        Just(1u32),
        Just(15u32),
        Just(16u32),
        Just(2047u32),
        Just(2048u32),
        Just(MAX_FIELD),
    ]
}

/// Field numbers agy uses somewhere, so random messages hit real decoders.
fn interesting_number() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => prop::sample::select(vec![
            1u32, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20, 21, 23, 24, 25,
            26, 28, 30, 31, 40, 42, 56, 114, 127, 140, 147,
        ]),
        1 => 1u32..=MAX_FIELD,
    ]
}

/// Protobuf-shaped bytes: valid messages whose length-delimited values are
/// random bytes, text or nested messages, so random input reaches deep into
/// the step decoder instead of failing at the first byte.
fn message_bytes() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        vec(any::<u8>(), 0..24),
        "\\PC{0,24}".prop_map(String::into_bytes),
    ];
    leaf.prop_recursive(4, 96, 8, |inner| {
        vec(
            (
                interesting_number(),
                prop_oneof![
                    varint_value().prop_map(OwnedValue::Varint),
                    any::<u64>().prop_map(OwnedValue::Fixed64),
                    any::<u32>().prop_map(OwnedValue::Fixed32),
                    inner.prop_map(OwnedValue::Bytes),
                ],
            ),
            0..8,
        )
        .prop_map(|fields| {
            let mut e = Encoder::new();
            for (n, v) in &fields {
                v.encode(&mut e, *n);
            }
            e.finish()
        })
    })
}

/// Field numbers that carry a step body, and the interaction fields 56 and
/// 147 (docs/agy-format.md, "Step bodies").
const BODY_FIELDS: &[u32] = &[
    10, 13, 14, 15, 19, 20, 24, 28, 30, 40, 42, 47, 56, 114, 127, 140, 147,
];

/// Step-shaped payloads: type, status, metadata and one or more bodies whose
/// contents are random messages, so every body decoder sees odd input.
fn step_payload() -> impl Strategy<Value = Vec<u8>> {
    (
        varint_value(),
        varint_value(),
        prop::option::of(message_bytes()),
        vec((prop::sample::select(BODY_FIELDS), message_bytes()), 0..3),
        prop::option::of(message_bytes()),
    )
        .prop_map(|(step_type, status, metadata, bodies, errors)| {
            let mut e = Encoder::new();
            e.varint(1, step_type).varint(4, status);
            if let Some(m) = metadata {
                e.bytes(5, &m);
            }
            for (n, b) in bodies {
                e.bytes(n, &b);
            }
            if let Some(m) = errors {
                e.bytes(31, &m);
            }
            e.finish()
        })
}

/// Protobuf-shaped bytes, sometimes damaged: a byte flipped, cut short, or
/// random junk appended.
fn blob() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => message_bytes(),
        3 => step_payload(),
        1 => vec(any::<u8>(), 0..256),
        2 => (step_payload(), any::<prop::sample::Index>(), any::<u8>()).prop_map(
            |(mut b, at, x)| {
                if !b.is_empty() {
                    let i = at.index(b.len());
                    b[i] ^= x | 1;
                }
                b
            }
        ),
        1 => (message_bytes(), any::<prop::sample::Index>()).prop_map(|(mut b, at)| {
            let len = at.index(b.len() + 1);
            b.truncate(len);
            b
        }),
        1 => (message_bytes(), vec(any::<u8>(), 1..16)).prop_map(|(mut b, junk)| {
            b.extend(junk);
            b
        }),
    ]
}

fn opt_blob() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::weighted(0.7, blob())
}

/// Side columns are usually absent or well-formed, so that a damaged side
/// column does not hide what the payload decoder did.
fn opt_side_blob() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        3 => Just(None),
        2 => message_bytes().prop_map(Some),
        1 => opt_blob(),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        "[a-z ]{0,20}",
        Just(String::new()),
        Just("héllo 🌍 世界 e\u{301}".to_string()),
    ]
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(text())
}

fn tool_call() -> impl Strategy<Value = ToolCall> {
    (text(), text(), text()).prop_map(|(id, name, arguments)| ToolCall {
        id,
        name,
        arguments,
    })
}

fn planner() -> impl Strategy<Value = PlannerResponse> {
    (
        text(),
        text(),
        any::<bool>(),
        vec(tool_call(), 0..4),
        opt_text(),
        opt_text(),
        prop::option::of(varint_value()),
    )
        .prop_map(
            |(text, thinking, thinking_redacted, tool_calls, modified, raw, stop)| {
                PlannerResponse {
                    text,
                    thinking,
                    thinking_redacted,
                    tool_calls,
                    modified_response: modified,
                    raw_thinking: raw,
                    stop_reason: stop,
                }
            },
        )
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        4 => planner().prop_map(Body::Planner),
        1 => (text(), opt_text()).prop_map(|(text, workspace_uri)| Body::UserInput(UserInput {
            text,
            workspace_uri,
        })),
        1 => text().prop_map(|summary| Body::Write { summary }),
        1 => (
            text(),
            opt_text(),
            text(),
            vec(
                (text(), varint_value(), text(), opt_text()).prop_map(|(path, line, text, abs_path)| {
                    GrepHit { path, line, text, abs_path }
                }),
                0..4
            ),
            opt_text(),
            opt_text()
        )
            .prop_map(|(query, include, output, hits, command, cwd)| Body::Grep(GrepResult {
                query,
                include,
                output,
                hits,
                command,
                cwd,
            })),
        1 => (
            text(),
            prop::option::of(varint_value()),
            prop::option::of(varint_value()),
            text(),
            prop::option::of(varint_value()),
            prop::option::of(varint_value())
        )
            .prop_map(|(uri, start, end, content, next_line, total)| {
                Body::ViewFile(ViewFileResult { uri, start, end, content, next_line, total })
            }),
        1 => (
            text(),
            vec(
                (text(), any::<bool>(), prop::option::of(varint_value()))
                    .prop_map(|(name, is_dir, size)| DirEntry { name, is_dir, size }),
                0..4
            )
        )
            .prop_map(|(dir, entries)| Body::ListDirectory(ListDirResult { dir, entries })),
        1 => (opt_text(), opt_text(), opt_text(), opt_text(), opt_text()).prop_map(
            |(summary, diagnostic, response_json, id, user_message)| {
                Body::ModelError(ModelError { summary, diagnostic, response_json, id, user_message })
            }
        ),
        1 => (opt_text(), prop::option::of(any::<i64>()), text(), opt_text()).prop_map(
            |(cwd, exit_code, output, command)| {
                Body::RunCommand(RunCommandResult { cwd, exit_code, output, command })
            }
        ),
        1 => text().prop_map(|title| Body::Checkpoint { title }),
        1 => (text(), opt_text(), opt_text(), opt_text()).prop_map(
            |(url, title, description, content_path)| {
                Body::ReadUrl(ReadUrlResult { url, title, description, content_path })
            }
        ),
        1 => (text(), opt_text())
            .prop_map(|(query, summary)| Body::SearchWeb(SearchWebResult { query, summary })),
        1 => (text(), prop::option::of(tool_call()), opt_text(), any::<bool>()).prop_map(
            |(server, call, result, user_rejected)| {
                Body::McpTool(McpToolResult { server, call, result, user_rejected })
            }
        ),
        1 => text().prop_map(|message| Body::SystemMessage { message }),
        1 => (text(), opt_text(), opt_text(), opt_text()).prop_map(
            |(child_conversation_id, log_uri, role, kind)| {
                Body::Subagent(Subagent { child_conversation_id, log_uri, role, kind })
            }
        ),
        1 => (vec((text(), text()), 0..4), opt_text())
            .prop_map(|(args, result)| Body::Generic(GenericTool { args, result })),
    ]
}

fn metadata() -> impl Strategy<Value = Option<Metadata>> {
    prop::option::of(
        (
            prop::option::of((varint_value(), varint_value())),
            prop::option::of(varint_value()),
            prop::option::of(tool_call()),
            prop::option::of(vec(varint_value(), 7)),
            prop::option::of(varint_value()),
            opt_text(),
            prop::option::of((varint_value(), varint_value())),
            prop::option::of(varint_value()),
            prop::option::of((text(), opt_text())),
        )
            .prop_map(
                |(
                    created_at,
                    source,
                    tool_call,
                    usage,
                    generator_model,
                    execution_id,
                    completed_at,
                    requested_model,
                    model_info,
                )| Metadata {
                    created_at,
                    completed_at,
                    requested_model,
                    model_info: model_info
                        .map(|(name, display_name)| ModelInfo { name, display_name }),
                    source,
                    tool_call,
                    usage: usage.map(|u| Usage {
                        model: u[0],
                        input_tokens: u[1],
                        output_tokens: u[2],
                        cache_write_tokens: u[3],
                        cache_read_tokens: u[4],
                        thinking_tokens: u[5],
                        response_tokens: u[6],
                    }),
                    generator_model,
                    execution_id,
                },
            ),
    )
}

/// Known field numbers of the planner response (field 20), docs/agy-format.md, "Step bodies".
const PLANNER_KNOWN: &[u32] = &[1, 3, 5, 7, 8, 12, 16];

fn unknown_top_number() -> impl Strategy<Value = u32> {
    prop_oneof![2u32..=400, 1u32..=MAX_FIELD].prop_filter("known at top level", |n| {
        !steps::STEP.iter().any(|k| k.number == *n)
    })
}

fn unknown_planner_number() -> impl Strategy<Value = u32> {
    prop_oneof![2u32..=64, 1u32..=MAX_FIELD]
        .prop_filter("known in 20", |n| !PLANNER_KNOWN.contains(n))
}

/// Re-encode `buf` with `extra` fields inserted before the field at each
/// given position (positions past the end append).
fn interleave(buf: &[u8], extra: &[(usize, u32, OwnedValue)]) -> Vec<u8> {
    let fields: Vec<Field<'_>> = wire::fields(buf)
        .collect::<Result<_, _>>()
        .expect("encoder output parses");
    let mut e = Encoder::new();
    for at in 0..=fields.len() {
        for (pos, n, v) in extra {
            if (*pos).min(fields.len()) == at {
                v.encode(&mut e, *n);
            }
        }
        if let Some(f) = fields.get(at) {
            e.value(f.number, &f.value);
        }
    }
    e.finish()
}

fn unknown_paths(step: &Step) -> BTreeSet<(String, WireType)> {
    step.unknown_fields
        .iter()
        .map(|p| (p.path.clone(), p.wire_type))
        .collect()
}

// ---------------------------------------------------------------------------
// (a) Arbitrary input never panics and never loops.
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_in_the_walker(bytes in prop_oneof![vec(any::<u8>(), 0..512), blob()]) {
        let mut count = 0usize;
        let mut errors = 0usize;
        for field in wire::fields(&bytes) {
            count += 1;
            prop_assert!(count <= bytes.len() + 1, "walk does not terminate");
            if field.is_err() {
                errors += 1;
            }
        }
        prop_assert!(errors <= 1, "at most one error, then the walk stops");
        prop_assert_eq!(wire::validate(&bytes).is_ok(), errors == 0);
        // Nested values too, as the step decoder walks them.
        for field in wire::fields(&bytes).flatten() {
            if let Value::Len(inner) = field.value {
                prop_assert!(wire::fields(inner).count() <= inner.len() + 1);
                let _ = wire::validate(inner);
            }
        }
    }

    #[test]
    fn arbitrary_rows_never_panic_in_decode_or_the_tracker(
        idx in any::<i64>(),
        step_type in prop_oneof![any::<i64>(), 0i64..200],
        status in prop_oneof![any::<i64>(), 0i64..14],
        payload in opt_blob(),
        metadata in opt_side_blob(),
        error_details in opt_side_blob(),
        permissions in opt_side_blob(),
        task_details in opt_side_blob(),
    ) {
        let row = StepRow { idx, step_type, status, payload, metadata, error_details, permissions, task_details };
        let step = steps::decode(&row);
        prop_assert_eq!(step.idx, idx);
        prop_assert_eq!(step.step_type.raw(), step_type);
        prop_assert_eq!(step.status.raw(), status);
        let mut tracker = Tracker::new();
        tracker.observe(&step);
        // A second view of the same step emits nothing new.
        prop_assert_eq!(tracker.observe(&step), vec![]);
        // Re-encoding whatever was decoded must itself decode.
        let again = steps::decode(&step.to_row());
        prop_assert_eq!(again.decode_error, None);
    }
}

// ---------------------------------------------------------------------------
// (b) Encode then decode returns the same fields, in order, with repeats.
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn encode_then_decode_returns_the_same_fields(
        fields in vec((field_number(), owned_value()), 0..40),
        repeat in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut fields = fields;
        if let (Some(at), false) = (repeat, fields.is_empty()) {
            let f = fields[at.index(fields.len())].clone();
            fields.push(f);
        }
        let mut e = Encoder::new();
        for (n, v) in &fields {
            v.encode(&mut e, *n);
        }
        let buf = e.finish();
        let decoded: Vec<(u32, OwnedValue)> = wire::fields(&buf)
            .map(|f| f.map(|f| (f.number, OwnedValue::of(&f.value))))
            .collect::<Result<_, WireError>>()
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(&decoded, &fields);
        prop_assert!(wire::validate(&buf).is_ok());
        // Re-encoding the walker's borrowed values gives the same bytes.
        let mut again = Encoder::new();
        for f in wire::fields(&buf).flatten() {
            again.value(f.number, &f.value);
        }
        prop_assert_eq!(again.finish(), buf);
    }

    #[test]
    fn every_proper_prefix_of_a_field_is_a_typed_error(
        n in field_number(),
        v in owned_value(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut e = Encoder::new();
        v.encode(&mut e, n);
        let buf = e.finish();
        let len = cut.index(buf.len()); // 0..len-1: always a proper prefix
        let prefix = &buf[..len];
        if len > 0 {
            match wire::validate(prefix) {
                Err(WireError::Truncated { .. }) | Err(WireError::LengthOverrun { .. }) => {}
                other => prop_assert!(false, "prefix {len}/{}: {other:?}", buf.len()),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// (c) Typed bodies round-trip, and unknown fields are skipped and reported.
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn typed_steps_round_trip(
        idx in 0i64..10_000,
        step_type in 0i64..200,
        status in 0i64..13,
        body in body(),
        meta in metadata(),
    ) {
        let mut step = Step::new(idx, StepType::from_raw(step_type), StepStatus::from_raw(status))
            .with_body(body.clone());
        step.metadata = meta.clone();
        let decoded = steps::decode(&step.to_row());
        prop_assert_eq!(decoded.decode_error, None);
        prop_assert_eq!(decoded.body, Some(body));
        prop_assert_eq!(decoded.metadata, meta);
        prop_assert_eq!(decoded.step_type, step.step_type);
        prop_assert_eq!(decoded.status, step.status);
        prop_assert!(decoded.unknown_fields.is_empty(), "{:?}", decoded.unknown_fields);
    }

    #[test]
    fn unknown_fields_are_skipped_and_reported(
        planner in planner(),
        meta in metadata(),
        top in vec((any::<prop::sample::Index>(), unknown_top_number(), owned_value()), 0..6),
        inner in vec((any::<prop::sample::Index>(), unknown_planner_number(), owned_value()), 0..6),
    ) {
        let mut step = Step::new(3, StepType::PlannerResponse, StepStatus::Done)
            .with_body(Body::Planner(planner.clone()));
        step.metadata = meta.clone();
        let row = step.to_row();
        let payload = row.payload.clone().expect("payload");

        // Insert unknowns inside field 20, then around the top-level fields.
        let top_fields: Vec<Field<'_>> = wire::fields(&payload).flatten().collect();
        let planner_bytes = top_fields
            .iter()
            .find_map(|f| match f.value {
                Value::Len(b) if f.number == 20 => Some(b),
                _ => None,
            })
            .expect("field 20");
        let planner_fields = wire::fields(planner_bytes).count();
        let inner: Vec<(usize, u32, OwnedValue)> = inner
            .into_iter()
            .map(|(at, n, v)| (at.index(planner_fields + 1), n, v))
            .collect();
        let new_planner = interleave(planner_bytes, &inner);
        let mut rebuilt = Encoder::new();
        for f in &top_fields {
            if f.number == 20 {
                rebuilt.bytes(20, &new_planner);
            } else {
                rebuilt.value(f.number, &f.value);
            }
        }
        let rebuilt = rebuilt.finish();
        let top: Vec<(usize, u32, OwnedValue)> = top
            .into_iter()
            .map(|(at, n, v)| (at.index(top_fields.len() + 1), n, v))
            .collect();
        let mangled = interleave(&rebuilt, &top);

        let decoded = steps::decode(&StepRow { payload: Some(mangled), ..row });
        prop_assert_eq!(&decoded.decode_error, &None);
        prop_assert_eq!(&decoded.body, &Some(Body::Planner(planner)));
        prop_assert_eq!(&decoded.metadata, &meta);

        let mut want: BTreeSet<(String, WireType)> = BTreeSet::new();
        for (_, n, v) in &top {
            want.insert((n.to_string(), v.wire_type()));
        }
        for (_, n, v) in &inner {
            want.insert((format!("20.{n}"), v.wire_type()));
        }
        prop_assert_eq!(unknown_paths(&decoded), want);
        prop_assert!(decoded.unknown_fields.iter().all(|p| !p.known));
        // Reported once per path and wire type.
        prop_assert_eq!(decoded.unknown_fields.len(), unknown_paths(&decoded).len());
    }
}

// ---------------------------------------------------------------------------
// Deterministic cases.
// ---------------------------------------------------------------------------

fn planner_row(payload: Vec<u8>) -> StepRow {
    StepRow {
        idx: 0,
        step_type: 15,
        status: 3,
        payload: Some(payload),
        ..StepRow::default()
    }
}

fn planner_of(step: &Step) -> &PlannerResponse {
    match &step.body {
        Some(Body::Planner(p)) => p,
        other => panic!("not a planner response: {other:?}"),
    }
}

#[test]
fn fields_may_come_in_any_order() {
    let mut in_order = Encoder::new();
    in_order.varint(1, 15).varint(4, 3);
    in_order.message(5, |m| {
        m.message(4, |t| {
            t.string(1, "id").string(2, "view_file").string(3, "{}");
        });
    });
    in_order.message(20, |m| {
        m.string(1, "answer")
            .string(3, "thought")
            .message(7, |t| {
                t.string(1, "c1")
                    .string(2, "grep_search")
                    .string(3, "{\"q\":1}");
            })
            .varint(12, 2);
    });

    let mut reversed = Encoder::new();
    reversed.message(20, |m| {
        m.varint(12, 2)
            .message(7, |t| {
                t.string(3, "{\"q\":1}")
                    .string(2, "grep_search")
                    .string(1, "c1");
            })
            .string(3, "thought")
            .string(1, "answer");
    });
    reversed.message(5, |m| {
        m.message(4, |t| {
            t.string(3, "{}").string(2, "view_file").string(1, "id");
        });
    });
    reversed.varint(4, 3).varint(1, 15);

    let a = steps::decode(&planner_row(in_order.finish()));
    let b = steps::decode(&planner_row(reversed.finish()));
    assert_eq!(a.body, b.body);
    assert_eq!(a.metadata, b.metadata);
    assert!(a.unknown_fields.is_empty() && b.unknown_fields.is_empty());
    let p = planner_of(&a);
    assert_eq!(p.text, "answer");
    assert_eq!(p.thinking, "thought");
    assert_eq!(p.tool_calls[0].name, "grep_search");
    assert_eq!(p.stop_reason, Some(2));
    assert_eq!(a.tool_call().map(|c| c.name.as_str()), Some("view_file"));
}

#[test]
fn repeated_singular_strings_last_wins_and_repeated_tool_calls_are_all_kept() {
    let mut e = Encoder::new();
    e.varint(1, 15);
    e.message(20, |m| {
        m.string(1, "first")
            .message(7, |t| {
                t.string(1, "a").string(2, "view_file").string(3, "{}");
            })
            .string(3, "think 1")
            .message(7, |t| {
                t.string(1, "b").string(2, "grep_search").string(3, "{}");
            })
            .string(1, "second")
            .string(3, "think 2")
            .message(7, |t| {
                // Same call again: repeated fields keep every entry.
                t.string(1, "a").string(2, "view_file").string(3, "{}");
            });
    });
    let step = steps::decode(&planner_row(e.finish()));
    let p = planner_of(&step);
    assert_eq!(p.text, "second");
    assert_eq!(p.thinking, "think 2");
    let ids: Vec<&str> = p.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "a"]);
    let names: Vec<&str> = p.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["view_file", "grep_search", "view_file"]);
    // Events: the tracker emits each distinct call once.
    let events = Tracker::new().observe(&step);
    let calls = events
        .iter()
        .filter(|e| matches!(e, agy_bridge::follow::events::Event::ToolCall { .. }))
        .count();
    assert_eq!(calls, 2);
}

#[test]
fn a_repeated_body_field_last_wins() {
    let mut e = Encoder::new();
    e.message(20, |m| {
        m.string(1, "old");
    });
    e.message(20, |m| {
        m.string(1, "new");
    });
    let step = steps::decode(&planner_row(e.finish()));
    assert_eq!(planner_of(&step).text, "new");
}

#[test]
fn unknown_fields_of_every_wire_type_between_known_ones() {
    let mut e = Encoder::new();
    e.varint(1, 15)
        .varint(900, u64::MAX)
        .varint(4, 3)
        .fixed32(901, 0xdead_beef)
        .message(20, |m| {
            m.fixed64(99, 1)
                .string(1, "text")
                .string(98, "junk")
                .string(3, "thinking")
                .varint(97, 5)
                .fixed32(96, 1);
        })
        .fixed64(902, 7)
        .bytes(903, &[0xff, 0xff]); // not a message: never descended into
    let step = steps::decode(&planner_row(e.finish()));
    assert_eq!(step.decode_error, None);
    let p = planner_of(&step);
    assert_eq!((p.text.as_str(), p.thinking.as_str()), ("text", "thinking"));
    let got: Vec<String> = step
        .unknown_fields
        .iter()
        .map(|f| format!("{} {}", f.path, f.wire_type))
        .collect();
    assert_eq!(
        got,
        [
            "900 varint",
            "901 i32",
            "20.99 i64",
            "20.98 len",
            "20.97 varint",
            "20.96 i32",
            "902 i64",
            "903 len"
        ]
    );
}

#[test]
fn malformed_inputs_are_typed_errors() {
    // Truncated varint.
    assert!(matches!(
        wire::validate(&[0x08, 0x80]),
        Err(WireError::Truncated { .. })
    ));
    // Length past the end.
    assert!(matches!(
        wire::validate(&[0x0a, 0x03, 1]),
        Err(WireError::LengthOverrun { .. })
    ));
    // Overlong varint (11 bytes).
    let mut overlong = vec![0x08];
    overlong.extend([0x80; 10]);
    overlong.push(0);
    assert!(matches!(
        wire::validate(&overlong),
        Err(WireError::OverlongVarint { .. })
    ));
    // Groups and wire types 6/7.
    for tag in [0x0b, 0x0c] {
        assert!(matches!(
            wire::validate(&[tag]),
            Err(WireError::Group { .. })
        ));
    }
    for tag in [0x0e, 0x0f] {
        assert!(matches!(
            wire::validate(&[tag]),
            Err(WireError::InvalidWireType { .. })
        ));
    }
    // Field number 0.
    assert!(matches!(
        wire::validate(&[0x00, 0x00]),
        Err(WireError::InvalidFieldNumber { .. })
    ));
    // A huge length that would overflow usize arithmetic.
    let mut huge = vec![0x0a];
    huge.extend([0xff; 9]);
    huge.push(0x01);
    assert!(matches!(
        wire::validate(&huge),
        Err(WireError::LengthOverrun { .. })
    ));
}

#[test]
fn the_largest_field_number_and_value_survive() {
    let mut e = Encoder::new();
    e.varint(MAX_FIELD, u64::MAX)
        .fixed64(MAX_FIELD, u64::MAX)
        .fixed32(MAX_FIELD, u32::MAX)
        .bytes(MAX_FIELD, b"");
    let buf = e.finish();
    let got: Vec<_> = wire::fields(&buf).collect::<Result<_, _>>().unwrap();
    assert_eq!(
        got.iter().map(|f| f.value).collect::<Vec<_>>(),
        [
            Value::Varint(u64::MAX),
            Value::Fixed64(u64::MAX),
            Value::Fixed32(u32::MAX),
            Value::Len(b"")
        ]
    );
    assert!(got.iter().all(|f| f.number == MAX_FIELD));
    // One past the largest field number is rejected.
    let mut too_big = Vec::new();
    let tag: u64 = (u64::from(MAX_FIELD) + 1) << 3;
    let mut v = tag;
    while v >= 0x80 {
        too_big.push((v as u8) | 0x80);
        v >>= 7;
    }
    too_big.push(v as u8);
    too_big.push(0);
    assert!(matches!(
        wire::validate(&too_big),
        Err(WireError::InvalidFieldNumber { .. })
    ));
}
