//! What a stream of events amounts to: adjacent deltas joined ([`merge`],
//! the form snapshots take so that poll timing cannot change them) and the
//! [`Transcript`], every delta and rewrite applied. Tests, `decode` and the
//! recorder compare runs by these.

use super::events::{Channel, Event};
use serde::Serialize;
use std::collections::BTreeMap;

/// Join adjacent text and thinking deltas of the same step. Snapshots use
/// this form so that poll timing cannot change them.
pub fn merge(events: impl IntoIterator<Item = Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for event in events {
        match (out.last_mut(), &event) {
            (Some(Event::Text { idx: a, text }), Event::Text { idx: b, text: more })
            | (Some(Event::Thinking { idx: a, text }), Event::Thinking { idx: b, text: more })
                if a == b =>
            {
                text.push_str(more);
            }
            _ => out.push(event),
        }
    }
    out
}

/// What a stream amounts to once every delta and rewrite is applied: per
/// step, its items in order, with each channel's final content in the place it
/// first appeared. A live stream and a one-shot decode of the final rows have
/// equal transcripts whenever agy only ever grew its content.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Transcript {
    /// Each step's items by idx, in the order they first appeared.
    pub steps: BTreeMap<i64, Vec<Event>>,
}

impl Transcript {
    /// The transcript a stream of events amounts to.
    pub fn from_events(events: impl IntoIterator<Item = Event>) -> Transcript {
        let mut t = Transcript::default();
        for event in events {
            let items = t.steps.entry(event.idx()).or_default();
            let channel = match &event {
                Event::Text { .. } => Some(Channel::Text),
                Event::Thinking { .. } => Some(Channel::Thinking),
                Event::Rewrite { channel, .. } => Some(*channel),
                _ => None,
            };
            let Some(channel) = channel else {
                items.push(event);
                continue;
            };
            let (idx, piece, replace) = match event {
                Event::Text { idx, text } | Event::Thinking { idx, text } => (idx, text, false),
                Event::Rewrite { idx, text, .. } => (idx, text, true),
                _ => continue,
            };
            let slot = items.iter_mut().find_map(|e| match (e, channel) {
                (Event::Text { text, .. }, Channel::Text)
                | (Event::Thinking { text, .. }, Channel::Thinking) => Some(text),
                _ => None,
            });
            match slot {
                Some(text) if replace => *text = piece,
                Some(text) => text.push_str(&piece),
                None => items.push(match channel {
                    Channel::Text => Event::Text { idx, text: piece },
                    Channel::Thinking => Event::Thinking { idx, text: piece },
                }),
            }
        }
        t
    }

    /// All answer text, steps in order.
    pub fn text(&self) -> String {
        self.steps
            .values()
            .flatten()
            .filter_map(|e| match e {
                Event::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The final answer as agy prints it: the text of the last step whose
    /// answer text is not blank.
    pub(crate) fn last_answer(&self) -> Option<&str> {
        self.steps.values().rev().find_map(|items| {
            items.iter().find_map(|e| match e {
                Event::Text { text, .. } if !text.trim().is_empty() => Some(text.as_str()),
                _ => None,
            })
        })
    }
}
