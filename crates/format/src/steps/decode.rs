//! Decoding a `steps` row: total, lenient, every unknown path kept.

use super::known::PathError;
use super::*;

impl<'a> Message<'a> {
    /// Lenient: keeps the fields that parsed before any error.
    fn parse(buf: &'a [u8]) -> Message<'a> {
        Message {
            fields: wire::fields(buf).map_while(Result::ok).collect(),
        }
    }

    fn lens(&self, n: u32) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.fields.iter().filter_map(move |f| match f.value {
            Value::Len(b) if f.number == n => Some(b),
            _ => None,
        })
    }

    fn len(&self, n: u32) -> Option<&'a [u8]> {
        self.fields.iter().rev().find_map(|f| match f.value {
            Value::Len(b) if f.number == n => Some(b),
            _ => None,
        })
    }

    /// Invalid UTF-8 is replaced, not refused. Valid text (all of agy's) is
    /// checked by `str::from_utf8`, which goes a word at a time through
    /// ASCII where the lossy scan goes a byte at a time: on a 50 MB answer
    /// rewritten whole at every commit, a tenth of a second.
    fn string(&self, n: u32) -> Option<String> {
        self.len(n).map(|b| match std::str::from_utf8(b) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        })
    }

    fn text(&self, n: u32) -> String {
        self.string(n).unwrap_or_default()
    }

    fn varint(&self, n: u32) -> Option<u64> {
        self.fields.iter().rev().find_map(|f| match f.value {
            Value::Varint(v) if f.number == n => Some(v),
            _ => None,
        })
    }

    fn msg(&self, n: u32) -> Option<Message<'a>> {
        self.len(n).map(Message::parse)
    }

    fn msgs(&self, n: u32) -> impl Iterator<Item = Message<'a>> + '_ {
        self.lens(n).map(Message::parse)
    }
}

fn decode_tool_call(m: &Message<'_>) -> ToolCall {
    ToolCall {
        id: m.text(1),
        name: m
            .string(2)
            .filter(|s| !s.is_empty())
            .or_else(|| m.string(9))
            .unwrap_or_default(),
        arguments: m.text(3),
    }
}

fn decode_usage(m: &Message<'_>) -> Usage {
    let v = |n| m.varint(n).unwrap_or(0);
    Usage {
        model: v(1),
        input_tokens: v(2),
        output_tokens: v(3),
        cache_write_tokens: v(4),
        cache_read_tokens: v(5),
        thinking_tokens: v(9),
        response_tokens: v(10),
    }
}

/// Decode a `CortexStepMetadata` message (payload field 5, or the
/// `steps.metadata` column).
pub(crate) fn decode_metadata(buf: &[u8]) -> Metadata {
    let m = Message::parse(buf);
    let timestamp = |t: Message<'_>| (t.varint(1).unwrap_or(0), t.varint(2).unwrap_or(0));
    Metadata {
        created_at: m.msg(1).map(timestamp),
        completed_at: m.msg(8).map(timestamp),
        source: m.varint(3),
        tool_call: m.msg(4).map(|t| decode_tool_call(&t)),
        usage: m.msg(9).map(|u| decode_usage(&u)),
        generator_model: m.varint(11),
        // An enum; tolerated as a message whose field 1 is the enum.
        requested_model: m.varint(13).or_else(|| m.msg(13).and_then(|r| r.varint(1))),
        model_info: m.msg(24).map(|i| ModelInfo {
            name: i.text(1),
            display_name: i.string(2),
        }),
        execution_id: m.string(12),
    }
}

/// The permission request inside a requested interaction (56.21), if that
/// is what agy asked for.
fn decode_permission_request(buf: &[u8]) -> Option<PermissionRequest> {
    let p = Message::parse(buf).msg(21)?;
    let target = p.msg(1);
    Some(PermissionRequest {
        action: target.as_ref().map(|t| t.text(1)).unwrap_or_default(),
        target: target.as_ref().map(|t| t.text(2)).unwrap_or_default(),
        reason: p.string(4),
        action_description: p.string(5),
    })
}

fn decode_answer(buf: &[u8]) -> InteractionAnswer {
    let m = Message::parse(buf);
    InteractionAnswer {
        allow: m.varint(1).unwrap_or(0) != 0,
        scope: m.varint(2),
        timed_out: m.varint(3).unwrap_or(0) != 0,
    }
}

fn decode_error_details(buf: &[u8]) -> ErrorDetails {
    let m = Message::parse(buf);
    ErrorDetails {
        message: m.text(1),
        detail: m.string(2),
        stack: m.string(3),
    }
}

/// Decode the body carried by `Step` field `number` (None for a field that
/// carries no body).
fn decode_body(number: u32, buf: &[u8]) -> Option<Body> {
    let m = Message::parse(buf);
    Some(match number {
        20 => Body::Planner(PlannerResponse {
            text: m.text(1),
            thinking: m.text(3),
            thinking_redacted: m.varint(5).unwrap_or(0) != 0,
            tool_calls: m.msgs(7).map(|t| decode_tool_call(&t)).collect(),
            modified_response: m.string(8),
            raw_thinking: m.string(16),
            stop_reason: m.varint(12),
        }),
        19 => Body::UserInput(UserInput {
            text: m
                .string(2)
                .filter(|s| !s.is_empty())
                .or_else(|| {
                    let parts: Vec<String> = m.msgs(3).filter_map(|i| i.string(1)).collect();
                    (!parts.is_empty()).then(|| parts.join("\n"))
                })
                .unwrap_or_default(),
            workspace_uri: m.msg(12).and_then(|c| c.string(12)),
        }),
        24 => {
            let inner = m.msg(3).unwrap_or(Message { fields: Vec::new() });
            Body::ModelError(ModelError {
                summary: inner.string(2),
                diagnostic: inner.string(3),
                response_json: inner.string(5),
                id: inner.string(6),
                user_message: inner.string(9),
            })
        }
        30 => Body::Checkpoint { title: m.text(4) },
        114 => Body::SystemMessage { message: m.text(1) },
        127 => Body::Subagent(Subagent {
            child_conversation_id: m.text(1),
            log_uri: m.string(2),
            role: m.string(3),
            kind: m.string(4),
        }),
        _ => return decode_tool_body(number, &m),
    })
}

/// The bodies tools write: their results.
fn decode_tool_body(number: u32, m: &Message<'_>) -> Option<Body> {
    Some(match number {
        10 => Body::Write {
            summary: m.text(26),
        },
        13 => Body::Grep(GrepResult {
            query: m.text(1),
            include: m.string(2),
            output: m.text(3),
            hits: m
                .msgs(4)
                .map(|h| GrepHit {
                    path: h.text(1),
                    line: h.varint(2).unwrap_or(0),
                    text: h.text(3),
                    abs_path: h.string(4),
                })
                .collect(),
            command: m.string(10),
            cwd: m.string(11),
        }),
        14 => Body::ViewFile(ViewFileResult {
            uri: m.text(1),
            start: m.varint(2),
            end: m.varint(3),
            content: m.text(4),
            next_line: m.varint(11),
            total: m.varint(12),
        }),
        15 => Body::ListDirectory(ListDirResult {
            dir: m.text(1),
            entries: m
                .msgs(3)
                .map(|e| DirEntry {
                    name: e.text(1),
                    is_dir: e.varint(2).unwrap_or(0) != 0,
                    size: e.varint(4),
                })
                .collect(),
        }),
        28 => Body::RunCommand(RunCommandResult {
            cwd: m.string(2),
            exit_code: m.varint(6).map(|v| v as i64),
            // The full output, else what agy kept of it.
            output: m
                .msg(21)
                .and_then(|o| {
                    o.string(1)
                        .filter(|s| !s.is_empty())
                        .or_else(|| o.string(2))
                })
                .unwrap_or_default(),
            command: m.string(23).or_else(|| m.string(25)),
        }),
        40 => {
            let doc = m.msg(2);
            Body::ReadUrl(ReadUrlResult {
                url: m.string(1).or_else(|| m.string(3)).unwrap_or_default(),
                title: doc.as_ref().and_then(|d| d.string(4)),
                description: doc.as_ref().and_then(|d| d.string(7)),
                content_path: m.string(6),
            })
        }
        42 => Body::SearchWeb(SearchWebResult {
            query: m.text(1),
            summary: m.string(5),
        }),
        47 => Body::McpTool(McpToolResult {
            server: m.text(1),
            call: m.msg(2).map(|c| decode_tool_call(&c)),
            result: m.string(3),
            user_rejected: m.varint(7).unwrap_or(0) != 0,
        }),
        140 => Body::Generic(GenericTool {
            args: m.msgs(1).map(|a| (a.text(1), a.text(2))).collect(),
            result: m.msg(2).and_then(|r| r.string(1)),
        }),
        _ => return None,
    })
}

/// Collect unknown paths of one blob into `out`, returning a walk error.
/// Same walk as [`walk_paths`], but a path string is built only for unknown
/// fields and for messages it descends into: this runs on every decode.
fn collect_unknown(
    buf: &[u8],
    schema: &[Known],
    prefix: &str,
    out: &mut Vec<FieldPath>,
) -> Result<(), PathError> {
    let join = |n: u32| {
        if prefix.is_empty() {
            n.to_string()
        } else {
            format!("{prefix}.{n}")
        }
    };
    for field in wire::fields(buf) {
        let field = field.map_err(|source| PathError {
            path: prefix.to_string(),
            source,
        })?;
        let wt = field.value.wire_type();
        match schema.iter().find(|kf| kf.number == field.number) {
            Some(kf) if kf.kind.wire_type() == wt => {
                if let (Kind::Msg(sub), Value::Len(bytes)) = (kf.kind, field.value) {
                    collect_unknown(bytes, sub, &join(field.number), out)?;
                }
            }
            _ => {
                let p = FieldPath {
                    path: join(field.number),
                    wire_type: wt,
                    known: false,
                };
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    Ok(())
}

/// Decode one row. Total: malformed payloads give `decode_error`, never a panic.
pub fn decode(row: &StepRow) -> Step {
    decode_row(row.borrowed())
}

/// [`decode`] of a borrowed row.
pub fn decode_row(row: StepRowRef<'_>) -> Step {
    let mut step = Step {
        idx: row.idx,
        step_type: StepType::from_raw(row.step_type),
        status: StepStatus::from_raw(row.status),
        body: None,
        metadata: None,
        errors: Vec::new(),
        permission_request: None,
        answers: Vec::new(),
        unknown_fields: Vec::new(),
        decode_error: None,
    };
    let mut problems: Vec<String> = Vec::new();

    if let Some(payload) = row.payload {
        if let Err(e) = collect_unknown(payload, STEP, "", &mut step.unknown_fields) {
            problems.push(format!("step_payload: {e}"));
        }
        let top = Message::parse(payload);
        for field in &top.fields {
            match (field.number, field.value) {
                (5, Value::Len(b)) => step.metadata = Some(decode_metadata(b)),
                (31, Value::Len(b)) => step.errors.push(decode_error_details(b)),
                (56, Value::Len(b)) => step.permission_request = decode_permission_request(b),
                (147, Value::Len(b)) => step.answers.push(decode_answer(b)),
                (n, Value::Len(b)) => {
                    if let Some(body) = decode_body(n, b) {
                        step.body = Some(body);
                    }
                }
                _ => {}
            }
        }
    }
    // The side columns repeat or extend the payload; decode them when present.
    if step.metadata.is_none() {
        if let Some(meta) = row.metadata {
            step.metadata = Some(decode_metadata(meta));
        }
    }
    for (column, blob, schema) in row.side_columns() {
        if let Err(e) = collect_unknown(blob, schema, column, &mut step.unknown_fields) {
            problems.push(format!("{column}: {e}"));
        }
    }
    if let Some(details) = row.error_details {
        let details = decode_error_details(details);
        if !details.message.is_empty() && !step.errors.contains(&details) {
            step.errors.push(details);
        }
    }
    if !problems.is_empty() {
        step.decode_error = Some(problems.join("; "));
    }
    step
}
