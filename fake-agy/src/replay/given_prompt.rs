//! `FAKE_AGY_GIVEN_PROMPT`: the user-input step records the prompt this run
//! was given, as agy does, instead of the recording's.
//!
//! agy writes the user's message into its conversation (payload fields 19.2
//! and 19.3.1, docs/agy-format.md, "USER_INPUT"). The bridge gives an agy
//! without stream-json input a note pointing at a private file instead of
//! the message, so a real agy records that note, unique to the turn: what
//! the bridge's last-resort binding (the one candidate whose first user
//! input is its prompt) relies on once agy has exited. A replay that kept
//! the recording's prompt could never show that binding. Off by default:
//! most tests compare a run's transcript with the recording's, user input
//! included.

use agy_corpus::recording::{Commit, SqlValue};
use agy_format::wire;

/// The user-input payload field (step type 14) and, inside it, where its
/// text is: 19.2, and 19.3's field 1.
const USER_INPUT: u32 = 19;
const TEXT: u32 = 2;
const ITEMS: u32 = 3;
const ITEM_TEXT: u32 = 1;

/// Which user-input step takes the given prompt: the first this run writes
/// (a turn opens with the user's message; later ones are agy's own).
#[derive(Debug, Default)]
pub(super) struct GivenPrompt {
    step: Option<SqlValue>,
}

impl GivenPrompt {
    /// `commit` with its user-input step's text made `prompt`, or `None`
    /// when it writes no such step (or the payload does not walk: left as
    /// recorded).
    pub(super) fn rewrite(&mut self, commit: &Commit, prompt: &str) -> Option<Commit> {
        let mut rewritten = None;
        for (i, w) in commit.writes.iter().enumerate() {
            if w.table != "steps" {
                continue;
            }
            let Some(SqlValue::Blob(payload)) = w.values.get("step_payload") else {
                continue;
            };
            let key = w.key.get("idx");
            if self.step.is_some() && self.step.as_ref() != key {
                continue;
            }
            let Some(payload) = with_user_text(payload, prompt) else {
                continue;
            };
            self.step = key.cloned();
            let commit = rewritten.get_or_insert_with(|| commit.clone());
            commit.writes[i]
                .values
                .insert("step_payload".into(), SqlValue::Blob(payload));
        }
        rewritten
    }
}

/// `payload` with its user-input text replaced by `text`, every other field
/// as it was; `None` when it holds no user input or does not walk.
fn with_user_text(payload: &[u8], text: &str) -> Option<Vec<u8>> {
    let mut found = false;
    let out = wire::rewrite(payload, |out, number, value| match (number, value) {
        (USER_INPUT, wire::Value::Len(inner)) => {
            out.bytes(USER_INPUT, &user_input(inner, text)?);
            found = true;
            Some(true)
        }
        _ => Some(false),
    })?;
    found.then_some(out)
}

/// The user-input message with its text made `text`: 19.2, and the first
/// item's text in 19.3 (a later item's text is dropped, since the decoder
/// joins the items' texts when 19.2 is empty).
fn user_input(inner: &[u8], text: &str) -> Option<Vec<u8>> {
    let mut first_item = true;
    wire::rewrite(inner, |out, number, value| match (number, value) {
        (TEXT, wire::Value::Len(_)) => {
            out.string(TEXT, text);
            Some(true)
        }
        (ITEMS, wire::Value::Len(item)) => {
            let first = std::mem::replace(&mut first_item, false);
            let item = wire::rewrite(item, |out, number, value| match (number, value) {
                (ITEM_TEXT, wire::Value::Len(_)) => {
                    if first {
                        out.string(ITEM_TEXT, text);
                    }
                    Some(true)
                }
                _ => Some(false),
            })?;
            out.bytes(ITEMS, &item);
            Some(true)
        }
        _ => Some(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agy_format::steps::{self, Body, StepRow};
    use agy_format::wire::Encoder;

    fn user_step(text: &str) -> Vec<u8> {
        let mut e = Encoder::new();
        e.varint(1, 14).message(USER_INPUT, |m| {
            m.string(TEXT, text)
                .message(ITEMS, |i| {
                    i.string(ITEM_TEXT, text).varint(9, 7);
                })
                .varint(40, 1);
        });
        e.varint(4, 3);
        e.finish()
    }

    fn step_write(idx: i64, payload: Vec<u8>) -> agy_corpus::recording::Write {
        agy_corpus::recording::Write {
            table: "steps".into(),
            op: Default::default(),
            key: [("idx".to_string(), SqlValue::Integer(idx))].into(),
            values: [("step_payload".to_string(), SqlValue::Blob(payload))].into(),
            stream_error: None,
        }
    }

    fn commit(writes: Vec<agy_corpus::recording::Write>) -> Commit {
        Commit {
            t_ms: 0,
            db: "root".into(),
            pre: false,
            gate: None,
            mcp_call: None,
            turn: 0,
            writes,
        }
    }

    fn text_of(payload: &[u8]) -> Option<String> {
        let row = StepRow {
            step_type: 14,
            payload: Some(payload.to_vec()),
            ..StepRow::default()
        };
        match steps::decode(&row).body {
            Some(Body::UserInput(u)) => Some(u.text),
            _ => None,
        }
    }

    fn payload(c: &Commit, i: usize) -> &[u8] {
        match c.writes[i].values.get("step_payload") {
            Some(SqlValue::Blob(b)) => b,
            _ => panic!("no payload"),
        }
    }

    #[test]
    fn the_first_user_input_takes_the_given_prompt_and_keeps_its_other_fields() {
        let recorded = user_step("What is six times seven?");
        let mut given = GivenPrompt::default();
        let c = given
            .rewrite(&commit(vec![step_write(0, recorded.clone())]), "[a note]")
            .expect("rewritten");
        let new = payload(&c, 0);
        assert_eq!(text_of(new).as_deref(), Some("[a note]"));
        assert_eq!(new, user_step("[a note]").as_slice());
        // A later write of the same step is rewritten too; another user
        // input (agy's own, later in the turn) is not.
        assert!(given
            .rewrite(&commit(vec![step_write(0, recorded.clone())]), "[a note]")
            .is_some());
        assert!(given
            .rewrite(&commit(vec![step_write(5, recorded)]), "[a note]")
            .is_none());
    }

    #[test]
    fn a_message_in_several_items_becomes_the_given_prompt_once() {
        let mut e = Encoder::new();
        e.message(USER_INPUT, |m| {
            m.message(ITEMS, |i| {
                i.string(ITEM_TEXT, "first part");
            })
            .message(ITEMS, |i| {
                i.string(ITEM_TEXT, "second part").varint(9, 7);
            });
        });
        let recorded = e.finish();
        assert_eq!(
            text_of(&recorded).as_deref(),
            Some("first part\nsecond part")
        );
        let c = GivenPrompt::default()
            .rewrite(&commit(vec![step_write(0, recorded)]), "the note")
            .expect("rewritten");
        assert_eq!(text_of(payload(&c, 0)).as_deref(), Some("the note"));
    }

    #[test]
    fn a_commit_without_user_input_or_a_payload_that_does_not_walk_is_left_alone() {
        let mut answer = Encoder::new();
        answer.varint(1, 15).message(20, |p| {
            p.string(1, "42");
        });
        let mut given = GivenPrompt::default();
        assert!(given
            .rewrite(&commit(vec![step_write(1, answer.finish())]), "x")
            .is_none());
        assert!(given
            .rewrite(&commit(vec![step_write(0, vec![0x9a, 0x01, 0xff])]), "x")
            .is_none());
        assert!(given.step.is_none());
    }
}
