//! [`Builder`]: one recording built commit by commit, each commit shaped
//! like agy's (one row per step, rewritten in place as it grows).

use crate::{stable_uuid, MODEL, MODELS_FORMAT_3, WORKSPACE};
use agy_corpus::db::step_write;
use agy_corpus::recording::{
    Commit, Gate, Header, Provenance, Recording, SqlValue, Write, SINGLE_TURN_FORMAT,
};
use agy_format::steps::{
    Body, Metadata, PlannerResponse, Step, StepStatus, StepType, ToolCall, Usage, UserInput,
};
use agy_format::wire::Encoder;
use std::collections::BTreeMap;

/// Builds one recording commit by commit.
pub struct Builder {
    pub(crate) header: Header,
    pub(crate) commits: Vec<Commit>,
    pub(crate) t_ms: u64,
    pub(crate) db: String,
    pub(crate) pre: bool,
    pub(crate) turn: u32,
    pub(crate) created_s: u64,
    /// The directory agy runs in: the header's `workspace` and the
    /// `file://` URIs agy writes into the conversation.
    pub(crate) workspace: String,
}

pub(crate) fn blob(b: Vec<u8>) -> SqlValue {
    SqlValue::Blob(b)
}

pub(crate) fn row_write(
    table: &str,
    key: (&str, SqlValue),
    values: Vec<(&str, SqlValue)>,
) -> Write {
    let mut k = BTreeMap::new();
    k.insert(key.0.to_string(), key.1);
    Write {
        table: table.into(),
        op: Default::default(),
        key: k,
        values: values
            .into_iter()
            .map(|(c, v)| (c.to_string(), v))
            .collect(),
        stream_error: None,
    }
}

impl Builder {
    pub fn new(name: &str, description: &str, prompt: &str, answer: &str) -> Builder {
        let root = stable_uuid(name);
        Builder {
            header: Header {
                format: SINGLE_TURN_FORMAT,
                agy_version: "1.2.8".into(),
                provenance: Provenance::Synthesized {
                    from: "docs/agy-format.md, agy 1.2.x schema and field layout".into(),
                    follows: None,
                },
                description: description.into(),
                prompt: prompt.into(),
                model: Some(MODEL.into()),
                workspace: Some(WORKSPACE.into()),
                root_conversation: root.clone(),
                stdout: if answer.is_empty() {
                    String::new()
                } else {
                    format!("{answer}\n")
                },
                stderr: String::new(),
                exit_code: 0,
                models_output: MODELS_FORMAT_3.into(),
                version_output: "1.2.8\n".into(),
                schema: Vec::new(),
                outcome: None,
            },
            commits: Vec::new(),
            t_ms: 0,
            db: root,
            pre: false,
            turn: 0,
            created_s: 1_795_000_000 + (name.len() as u64) * 1000,
            workspace: WORKSPACE.into(),
        }
    }

    /// Run in `workspace` instead of the corpus's `/home/dev/project`
    /// (before the first commit: the rows written so far keep the old one).
    pub fn in_workspace(&mut self, workspace: &str) -> &mut Self {
        self.workspace = workspace.to_string();
        self.header.workspace = Some(workspace.to_string());
        self
    }

    pub fn header(&mut self) -> &mut Header {
        &mut self.header
    }

    pub fn root(&self) -> String {
        self.header.root_conversation.clone()
    }

    /// Write following commits to conversation `db` (a subagent's database).
    pub(crate) fn writing_to_db(&mut self, db: &str) -> &mut Self {
        self.db = db.to_string();
        self
    }

    /// Following commits describe state from before the run (earlier turns).
    pub fn pre(&mut self, pre: bool) -> &mut Self {
        self.pre = pre;
        self
    }

    /// Following commits are the next stdin turn of the same process; their
    /// times count from when that turn's input line arrived.
    pub fn next_turn(&mut self) -> &mut Self {
        self.turn += 1;
        self.t_ms = 0;
        self
    }

    /// Commit `writes` `dt_ms` after the previous commit.
    pub fn commit(&mut self, dt_ms: u64, writes: Vec<Write>) -> &mut Self {
        self.commit_gated(dt_ms, writes, None)
    }

    pub(crate) fn commit_gated(
        &mut self,
        dt_ms: u64,
        writes: Vec<Write>,
        gate: Option<Gate>,
    ) -> &mut Self {
        self.t_ms += dt_ms;
        self.commits.push(Commit {
            t_ms: if self.pre { 0 } else { self.t_ms },
            db: self.db.clone(),
            pre: self.pre,
            gate,
            mcp_call: None,
            turn: self.turn,
            writes,
        });
        self
    }

    /// Commit a single step row.
    pub fn step(&mut self, dt_ms: u64, step: Step) -> &mut Self {
        self.commit(dt_ms, vec![step_write(&step)])
    }

    pub(crate) fn meta(&self, idx: i64, source: u64) -> Metadata {
        Metadata {
            created_at: Some((self.created_s + idx as u64, 125_000_000)),
            source: Some(source),
            ..Metadata::default()
        }
    }

    /// The conversation's own rows agy writes when it starts.
    pub fn conversation_rows(&self, conversation: &str, parent: Option<&str>) -> Vec<Write> {
        let trajectory = stable_uuid(&format!("trajectory:{conversation}"));
        let uri = format!("file://{}", self.workspace);
        let mut blob_enc = Encoder::new();
        blob_enc
            .message(1, |w| {
                w.string(1, &uri);
            })
            .message(2, |t| {
                t.varint(1, self.created_s).varint(2, 0);
            })
            .string(6, parent.unwrap_or(conversation))
            .string(7, &uri);
        let mut writes = vec![
            row_write(
                "trajectory_meta",
                ("trajectory_id", SqlValue::Text(trajectory)),
                vec![
                    ("cascade_id", SqlValue::Text(conversation.into())),
                    (
                        "trajectory_type",
                        SqlValue::Integer(if parent.is_some() { 6 } else { 4 }),
                    ),
                    ("source", SqlValue::Integer(17)),
                ],
            ),
            row_write(
                "trajectory_metadata_blob",
                ("id", SqlValue::Text("main".into())),
                vec![("data", blob(blob_enc.finish()))],
            ),
        ];
        if let Some(parent) = parent {
            let mut e = Encoder::new();
            e.string(1, parent);
            writes.push(row_write(
                "parent_references",
                ("idx", SqlValue::Integer(0)),
                vec![("data", blob(e.finish()))],
            ));
        }
        writes
    }

    /// The opening of a turn: the user's input (type 14) and a checkpoint
    /// (type 23). On a fresh conversation the first commit also creates the
    /// conversation rows.
    pub fn open_turn(&mut self, idx: i64, prompt: &str, title: &str, fresh: bool) -> &mut Self {
        let mut writes = if fresh {
            let root = self.db.clone();
            self.conversation_rows(&root, None)
        } else {
            Vec::new()
        };
        let mut user = Step::new(idx, StepType::UserInput, StepStatus::Done).with_body(
            Body::UserInput(UserInput {
                text: prompt.into(),
                workspace_uri: Some(format!("file://{}", self.workspace)),
            }),
        );
        user.metadata = Some(self.meta(idx, 4));
        writes.push(step_write(&user));
        self.commit(140, writes);
        let mut checkpoint = Step::new(idx + 1, StepType::Checkpoint, StepStatus::Done).with_body(
            Body::Checkpoint {
                title: format!("{title}\n\nThe user asked: {prompt}"),
            },
        );
        checkpoint.metadata = Some(self.meta(idx + 1, 2));
        self.step(90, checkpoint)
    }

    pub(crate) fn planner_step(&self, idx: i64, status: StepStatus, p: PlannerResponse) -> Step {
        let mut s = Step::new(idx, StepType::PlannerResponse, status).with_body(Body::Planner(p));
        s.metadata = Some(self.meta(idx, 2));
        s
    }

    /// A planner response whose thinking, then text, grows in place: one
    /// commit per chunk, GENERATING until the last commit marks it DONE.
    pub fn planner(
        &mut self,
        idx: i64,
        thinking: &[&str],
        text: &[&str],
        calls: Vec<ToolCall>,
        gap_ms: u64,
    ) -> &mut Self {
        let mut p = PlannerResponse::default();
        for chunk in thinking {
            p.thinking.push_str(chunk);
            let s = self.planner_step(idx, StepStatus::Generating, p.clone());
            self.step(gap_ms, s);
        }
        for chunk in text {
            p.text.push_str(chunk);
            let s = self.planner_step(idx, StepStatus::Generating, p.clone());
            self.step(gap_ms, s);
        }
        p.tool_calls = calls;
        p.stop_reason = Some(2);
        let mut done = self.planner_step(idx, StepStatus::Done, p);
        if let Some(meta) = done.metadata.as_mut() {
            meta.usage = Some(Usage {
                model: 1018,
                input_tokens: 5_432,
                output_tokens: 321,
                cache_read_tokens: 4_096,
                thinking_tokens: 128,
                response_tokens: 193,
                ..Usage::default()
            });
        }
        let gen = self.gen_metadata(idx);
        self.commit(gap_ms, vec![step_write(&done), gen])
    }

    pub(crate) fn gen_metadata(&self, idx: i64) -> Write {
        let mut e = Encoder::new();
        e.message(1, |g| {
            g.message(4, |u| {
                u.varint(1, 1018)
                    .varint(2, 5_432)
                    .varint(3, 321)
                    .varint(5, 4_096);
            })
            .string(19, MODEL)
            .string(21, "Gemini 3.7 Flash (Medium)");
        });
        e.packed_varints(2, &[idx as u64]);
        let data = e.finish();
        let size = data.len() as i64;
        row_write(
            "gen_metadata",
            ("idx", SqlValue::Integer(idx)),
            vec![("data", blob(data)), ("size", SqlValue::Integer(size))],
        )
    }

    /// A tool step: announced RUNNING with its call, then DONE (or `final_status`)
    /// with its result body.
    pub fn tool(
        &mut self,
        idx: i64,
        step_type: StepType,
        call: ToolCall,
        result: Option<Body>,
        final_status: StepStatus,
        run_ms: u64,
    ) -> &mut Self {
        let mut running =
            Step::new(idx, step_type, StepStatus::Running).with_tool_call(call.clone());
        if let Some(m) = running.metadata.as_mut() {
            m.created_at = Some((self.created_s + idx as u64, 0));
            m.source = Some(2);
        }
        self.step(60, running.clone());
        let mut done = running;
        done.status = final_status;
        done.body = result;
        self.step(run_ms, done)
    }

    pub fn finish(self) -> Recording {
        let mut rec = Recording {
            header: self.header,
            commits: self.commits,
        };
        rec.header.format = rec.header.format.max(rec.min_format());
        rec
    }
}

/// A planner tool call with `args` as its JSON arguments.
pub(crate) fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}
