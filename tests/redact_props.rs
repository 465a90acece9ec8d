//! Properties of the redactor (`agy-bridge record --redact`): whatever bytes
//! a blob column holds, redaction never panics, and a payload that decoded
//! before still decodes after, with the same field paths; a step built the
//! way agy writes it keeps its body while the user's home disappears.

use agy_corpus::redact::{RedactOptions, Redactor};
use agy_format::steps::{
    self, Body, Known, PlannerResponse, Step, StepRow, StepStatus, StepType, ToolCall,
};
use agy_format::wire::Encoder;
use proptest::collection::vec;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn alice() -> RedactOptions {
    RedactOptions {
        home: Some("/home/alice".into()),
        user: Some("alice".into()),
        workspaces: vec!["/home/alice/proj".into()],
    }
}

/// The known-field trees of every blob column of `steps`, and none (a
/// column the decoder does not describe).
fn trees() -> Vec<(&'static str, Option<&'static [Known]>)> {
    let mut out = vec![("step_payload", Some(steps::STEP)), ("render_info", None)];
    out.extend(steps::SIDE_COLUMNS.iter().map(|(c, t)| (*c, Some(*t))));
    out
}

/// The field paths of `buf` under `tree`, or `None` when it does not walk.
fn paths(buf: &[u8], tree: &[Known]) -> Option<BTreeSet<(String, String)>> {
    let mut seen = BTreeSet::new();
    steps::walk_paths(buf, tree, "", &mut |p| {
        seen.insert((p.path, p.wire_type.name().to_string()));
    })
    .ok()?;
    Some(seen)
}

fn row(step_type: i64, payload: Vec<u8>) -> StepRow {
    StepRow {
        idx: 3,
        step_type,
        status: 3,
        payload: Some(payload),
        ..StepRow::default()
    }
}

/// Text that mixes the user's paths and name with ordinary words.
fn texty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("/home/alice/proj/src/main.rs".to_string()),
        Just("/home/alice/.ssh/id_ed25519".to_string()),
        Just("alice".to_string()),
        Just(" ".to_string()),
        Just("é✓\n".to_string()),
        "[a-z ]{0,12}",
    ];
    vec(piece, 0..8).prop_map(|v| v.concat())
}

/// A protobuf field, as a tree: enough structure that most generated
/// payloads walk, so the "decodable after" properties are exercised.
#[derive(Debug, Clone)]
enum Node {
    Varint(u32, u64),
    Fixed64(u32, u64),
    Text(u32, String),
    Message(u32, Vec<Node>),
}

fn encode(nodes: &[Node]) -> Vec<u8> {
    let mut e = Encoder::new();
    for n in nodes {
        match n {
            Node::Varint(f, v) => e.varint(*f, *v),
            Node::Fixed64(f, v) => e.fixed64(*f, *v),
            Node::Text(f, t) => e.string(*f, t),
            Node::Message(f, inner) => e.bytes(*f, &encode(inner)),
        };
    }
    e.finish()
}

/// Field numbers the known-field trees use (20 planner, 28 run_command,
/// 5 metadata, 127 subagent, ...) and a few they do not.
fn number() -> impl Strategy<Value = u32> {
    prop_oneof![
        1u32..=12,
        Just(19),
        Just(20),
        Just(21),
        Just(24),
        Just(28),
        Just(30),
        Just(127),
        Just(140),
        Just(147),
        13u32..2000,
    ]
}

fn nodes() -> impl Strategy<Value = Vec<Node>> {
    let leaf = prop_oneof![
        (number(), any::<u64>()).prop_map(|(f, v)| Node::Varint(f, v)),
        (number(), any::<u64>()).prop_map(|(f, v)| Node::Fixed64(f, v)),
        (number(), texty()).prop_map(|(f, t)| Node::Text(f, t)),
    ];
    let node = leaf.prop_recursive(3, 48, 6, |inner| {
        (number(), vec(inner, 0..6)).prop_map(|(f, v)| Node::Message(f, v))
    });
    vec(node, 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes, under every column's tree: no panic, and bytes that
    /// walked cleanly walk cleanly afterwards with the same field paths.
    #[test]
    fn arbitrary_blobs_never_panic_and_stay_decodable(
        bytes in prop_oneof![vec(any::<u8>(), 0..512), nodes().prop_map(|n| encode(&n))],
    ) {
        for (column, tree) in trees() {
            let mut r = Redactor::new(&alice());
            let out = r.blob(&bytes, tree);
            let tree = tree.unwrap_or(&[]);
            if let Some(before) = paths(&bytes, tree) {
                let after = paths(&out, tree);
                prop_assert_eq!(after.as_ref(), Some(&before), "{}", column);
            }
        }
    }

    /// Bytes that are a step payload (as arbitrary step types read them):
    /// decodable before means decodable after, as the same kind of body.
    #[test]
    fn payloads_that_decode_still_decode(
        bytes in prop_oneof![vec(any::<u8>(), 0..512), nodes().prop_map(|n| encode(&n))],
        step_type in prop_oneof![Just(8i64), Just(14), Just(15), Just(17), Just(21), Just(23), Just(127), 0i64..200],
    ) {
        let before = steps::decode(&row(step_type, bytes.clone()));
        let out = Redactor::new(&alice()).blob(&bytes, Some(steps::STEP));
        let after = steps::decode(&row(step_type, out));
        if before.decode_error.is_none() {
            prop_assert_eq!(after.decode_error, None);
            prop_assert_eq!(
                before.body.as_ref().map(std::mem::discriminant),
                after.body.as_ref().map(std::mem::discriminant)
            );
        }
    }

    /// A planner response as agy writes it: after redaction it decodes to
    /// the same shape (text, thinking, the tool call), and the home directory
    /// is gone from every string.
    #[test]
    fn planner_steps_keep_their_shape_and_lose_the_home(
        text in texty(),
        thinking in texty(),
        args in texty(),
    ) {
        let call = ToolCall {
            id: "call-1".into(),
            name: "view_file".into(),
            arguments: serde_json::json!({ "AbsolutePath": args }).to_string(),
        };
        let step = Step::new(2, StepType::PlannerResponse, StepStatus::Done).with_body(
            Body::Planner(PlannerResponse {
                text,
                thinking,
                tool_calls: vec![call],
                ..PlannerResponse::default()
            }),
        );
        let row = step.to_row();
        let payload = row.payload.clone().expect("payload");
        let out = Redactor::new(&alice()).blob(&payload, Some(steps::STEP));
        let after = steps::decode(&StepRow { payload: Some(out), ..row });
        prop_assert_eq!(&after.decode_error, &None);
        prop_assert!(after.unknown_fields.is_empty(), "{:?}", after.unknown_fields);
        let Some(Body::Planner(p)) = &after.body else {
            return Err(TestCaseError::fail(format!("not a planner: {:?}", after.body)));
        };
        prop_assert_eq!(p.tool_calls.len(), 1);
        prop_assert_eq!(&p.tool_calls[0].name, "view_file");
        let args: serde_json::Value = serde_json::from_str(&p.tool_calls[0].arguments)
            .map_err(|e| TestCaseError::fail(format!("arguments no longer JSON: {e}")))?;
        prop_assert!(args["AbsolutePath"].is_string());
        for s in [&p.text, &p.thinking, &p.tool_calls[0].arguments] {
            prop_assert!(!s.contains("/home/alice"), "{}", s);
        }
    }
}
