//! Encoding: the inverse of decoding, for fake-agy, the synthesiser and
//! tests.

use super::*;

// ---------------------------------------------------------------------------
// Encoding: the inverse of `decode`, for fake-agy, the synthesiser and tests.
// ---------------------------------------------------------------------------

fn encode_tool_call(e: &mut Encoder, call: &ToolCall) {
    if !call.id.is_empty() {
        e.string(1, &call.id);
    }
    e.string(2, &call.name);
    e.string(3, &call.arguments);
}

/// Encode a metadata message (payload field 5 / `steps.metadata`).
pub(crate) fn encode_metadata(meta: &Metadata) -> Vec<u8> {
    let mut e = Encoder::new();
    if let Some((s, ns)) = meta.created_at {
        e.message(1, |t| {
            t.varint(1, s).varint(2, ns);
        });
    }
    if let Some(source) = meta.source {
        e.varint(3, source);
    }
    if let Some(call) = &meta.tool_call {
        e.message(4, |t| encode_tool_call(t, call));
    }
    if let Some((s, ns)) = meta.completed_at {
        e.message(8, |t| {
            t.varint(1, s).varint(2, ns);
        });
    }
    if let Some(u) = &meta.usage {
        e.message(9, |t| {
            t.varint(1, u.model)
                .varint(2, u.input_tokens)
                .varint(3, u.output_tokens)
                .varint(4, u.cache_write_tokens)
                .varint(5, u.cache_read_tokens)
                .varint(9, u.thinking_tokens)
                .varint(10, u.response_tokens);
        });
    }
    opt_varint(&mut e, 11, meta.generator_model);
    opt_str(&mut e, 12, &meta.execution_id);
    opt_varint(&mut e, 13, meta.requested_model);
    if let Some(info) = &meta.model_info {
        e.message(24, |i| {
            i.string(1, &info.name);
            opt_str(i, 2, &info.display_name);
        });
    }
    e.finish()
}

fn opt_str(e: &mut Encoder, n: u32, v: &Option<String>) {
    if let Some(v) = v {
        e.string(n, v);
    }
}

fn opt_varint(e: &mut Encoder, n: u32, v: Option<u64>) {
    if let Some(v) = v {
        e.varint(n, v);
    }
}

/// Encode a body as the field of `Step` that carries it.
pub fn encode_body(e: &mut Encoder, body: &Body) {
    match body {
        Body::Planner(p) => e.message(20, |m| {
            if !p.text.is_empty() {
                m.string(1, &p.text);
            }
            if !p.thinking.is_empty() {
                m.string(3, &p.thinking);
            }
            if p.thinking_redacted {
                m.varint(5, 1);
            }
            for call in &p.tool_calls {
                m.message(7, |t| encode_tool_call(t, call));
            }
            opt_str(m, 8, &p.modified_response);
            opt_varint(m, 12, p.stop_reason);
            opt_str(m, 16, &p.raw_thinking);
        }),
        Body::UserInput(u) => e.message(19, |m| {
            m.string(2, &u.text);
            m.message(3, |i| {
                i.string(1, &u.text);
            });
            if let Some(uri) = &u.workspace_uri {
                m.message(12, |c| {
                    c.string(12, uri);
                });
            }
        }),
        Body::ModelError(err) => e.message(24, |m| {
            m.message(3, |i| {
                opt_str(i, 2, &err.summary);
                opt_str(i, 3, &err.diagnostic);
                opt_str(i, 5, &err.response_json);
                opt_str(i, 6, &err.id);
                opt_str(i, 9, &err.user_message);
            });
        }),
        Body::Checkpoint { title } => e.message(30, |m| {
            m.string(4, title);
        }),
        Body::SystemMessage { message } => e.message(114, |m| {
            m.string(1, message);
        }),
        Body::Subagent(s) => e.message(127, |m| {
            m.string(1, &s.child_conversation_id);
            opt_str(m, 2, &s.log_uri);
            opt_str(m, 3, &s.role);
            opt_str(m, 4, &s.kind);
        }),
        tool => {
            encode_tool_body(e, tool);
            e
        }
    };
}

/// Encode a tool's result body; other bodies are [`encode_body`]'s.
fn encode_tool_body(e: &mut Encoder, body: &Body) {
    match body {
        Body::Write { summary } => e.message(10, |m| {
            m.string(26, summary);
        }),
        Body::Grep(g) => e.message(13, |m| {
            m.string(1, &g.query);
            opt_str(m, 2, &g.include);
            m.string(3, &g.output);
            for h in &g.hits {
                m.message(4, |hm| {
                    hm.string(1, &h.path).varint(2, h.line).string(3, &h.text);
                    opt_str(hm, 4, &h.abs_path);
                });
            }
            opt_str(m, 10, &g.command);
            opt_str(m, 11, &g.cwd);
        }),
        Body::ViewFile(v) => e.message(14, |m| {
            m.string(1, &v.uri);
            opt_varint(m, 2, v.start);
            opt_varint(m, 3, v.end);
            m.string(4, &v.content);
            opt_varint(m, 11, v.next_line);
            opt_varint(m, 12, v.total);
        }),
        Body::ListDirectory(l) => e.message(15, |m| {
            m.string(1, &l.dir);
            for entry in &l.entries {
                m.message(3, |em| {
                    em.string(1, &entry.name).varint(2, entry.is_dir as u64);
                    opt_varint(em, 4, entry.size);
                });
            }
        }),
        Body::RunCommand(r) => e.message(28, |m| {
            opt_str(m, 2, &r.cwd);
            if let Some(code) = r.exit_code {
                m.varint(6, code as u64);
            }
            m.message(21, |o| {
                o.string(1, &r.output);
            });
            opt_str(m, 23, &r.command);
        }),
        Body::ReadUrl(r) => e.message(40, |m| {
            m.string(1, &r.url);
            if r.title.is_some() || r.description.is_some() {
                m.message(2, |d| {
                    opt_str(d, 4, &r.title);
                    opt_str(d, 7, &r.description);
                });
            }
            opt_str(m, 6, &r.content_path);
        }),
        Body::SearchWeb(s) => e.message(42, |m| {
            m.string(1, &s.query);
            opt_str(m, 5, &s.summary);
        }),
        Body::McpTool(t) => e.message(47, |m| {
            m.string(1, &t.server);
            if let Some(call) = &t.call {
                m.message(2, |c| encode_tool_call(c, call));
            }
            opt_str(m, 3, &t.result);
            if t.user_rejected {
                m.varint(7, 1);
            }
        }),
        Body::Generic(g) => e.message(140, |m| {
            for (key, value) in &g.args {
                m.message(1, |a| {
                    a.string(1, key).string(2, value);
                });
            }
            if let Some(result) = &g.result {
                m.message(2, |r| {
                    r.string(1, result);
                });
            }
        }),
        _ => e,
    };
}

/// Encode a whole step payload: type, status, metadata, body and errors.
pub fn encode_step(step: &Step) -> Vec<u8> {
    let mut e = Encoder::new();
    e.varint(1, step.step_type.raw() as u64);
    e.varint(4, step.status.raw() as u64);
    if let Some(meta) = &step.metadata {
        e.bytes(5, &encode_metadata(meta));
    }
    if let Some(body) = &step.body {
        encode_body(&mut e, body);
    }
    for err in &step.errors {
        e.message(31, |m| {
            m.string(1, &err.message);
            opt_str(m, 2, &err.detail);
            opt_str(m, 3, &err.stack);
        });
    }
    if let Some(p) = &step.permission_request {
        e.message(56, |i| {
            i.message(21, |r| {
                r.message(1, |t| {
                    t.string(1, &p.action).string(2, &p.target);
                });
                opt_str(r, 4, &p.reason);
                opt_str(r, 5, &p.action_description);
            });
        });
    }
    for a in &step.answers {
        e.message(147, |m| {
            if a.allow {
                m.varint(1, 1);
            }
            opt_varint(m, 2, a.scope);
            if a.timed_out {
                m.varint(3, 1);
            }
        });
    }
    e.finish()
}

impl Step {
    /// A step with no body, for building.
    pub fn new(idx: i64, step_type: StepType, status: StepStatus) -> Step {
        Step {
            idx,
            step_type,
            status,
            body: None,
            metadata: None,
            errors: Vec::new(),
            permission_request: None,
            answers: Vec::new(),
            unknown_fields: Vec::new(),
            decode_error: None,
        }
    }

    pub fn with_body(mut self, body: Body) -> Step {
        self.body = Some(body);
        self
    }

    pub fn with_tool_call(mut self, call: ToolCall) -> Step {
        self.metadata
            .get_or_insert_with(Metadata::default)
            .tool_call = Some(call);
        self
    }

    /// The row this step would be written as (payload and metadata column).
    pub fn to_row(&self) -> StepRow {
        StepRow {
            idx: self.idx,
            step_type: self.step_type.raw(),
            status: self.status.raw(),
            payload: Some(encode_step(self)),
            metadata: self.metadata.as_ref().map(encode_metadata),
            ..StepRow::default()
        }
    }
}
