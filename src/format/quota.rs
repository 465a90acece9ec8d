//! agy's quota as `/usage` reports it (docs/agy-format.md, "Quota"), as
//! data: the reader for all three forms agy prints it in, and the writer
//! fake-agy prints through.
//!
//! `agy -p /usage` (1.1.11+) answers without a model turn and without
//! spending quota, so it is the one cheap way to tell the user how much is
//! left. Its data is `{"groups":[{"buckets":[{id, name, window,
//! remaining_fraction, reset_time}]}]}`, found under `command.data` of the
//! `--output-format json` result, of stream-json's `command_result` event,
//! or in text mode as one tab-separated line per bucket. Reading is total:
//! unknown fields are ignored, anything else is a [`QuotaError`], never a
//! panic. No real capture exists yet, so the reader is lenient where the
//! published descriptions are vague (a bare `data` object, a number as the
//! window, a percentage in the text form).

use crate::format::stream_json::{CommandData, Line, SlashCommand, TurnResult};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The slash command's name, without its slash.
pub const COMMAND: &str = "usage";

/// One quota bucket (`gemini-weekly`, `gemini-5h`, `3p-weekly`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    pub id: String,
    #[serde(default)]
    pub name: String,
    /// The bucket's window as agy words it (`5h`, `weekly`); a number is
    /// kept as its decimal text.
    #[serde(default, deserialize_with = "text_or_number")]
    pub window: String,
    /// 0.0 (nothing left) to 1.0 (untouched).
    pub remaining_fraction: f64,
    /// When the bucket refills, as agy gives it (RFC 3339 in the published
    /// descriptions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_time: Option<String>,
    /// The name of the group the bucket came in (our bookkeeping, so a
    /// written answer keeps agy's grouping; not one of agy's bucket fields).
    #[serde(skip)]
    pub group: String,
}

/// agy's quota: every bucket of every group, in agy's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quota {
    pub buckets: Vec<Bucket>,
}

/// Why a `/usage` answer could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuotaError {
    #[error("the answer is empty")]
    Empty,
    #[error("the answer is not JSON: {0}")]
    NotJson(String),
    /// agy answered with a failed result (its `error`, else its response).
    #[error("agy answered with an error: {0}")]
    AgyError(String),
    #[error("the answer has no /usage data (no command.data.groups)")]
    NoData,
    #[error("a quota bucket is malformed: {0}")]
    BadBucket(String),
    #[error("bucket {id:?} has remaining_fraction {value}, not a number from 0 to 1")]
    BadFraction { id: String, value: String },
    #[error(
        "line {line} of the text answer is not `id<TAB>name<TAB>window<TAB>remaining<TAB>reset`"
    )]
    BadTextLine { line: usize },
}

fn text_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[derive(Deserialize)]
struct Group {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    buckets: Vec<Value>,
}

impl Quota {
    /// Read any of the three forms: the `--output-format json` result (or
    /// a bare `data` object), stream-json lines, or text lines.
    pub fn parse(text: &str) -> Result<Quota, QuotaError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(QuotaError::Empty);
        }
        if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(trimmed) {
            // One stream-json line is a JSON object too.
            if value.get("event").is_none() {
                return Quota::from_value(&value);
            }
        }
        if trimmed.starts_with('{') {
            return Quota::from_stream_json(trimmed);
        }
        Quota::from_text(trimmed)
    }

    /// The `--output-format json` answer: a result with `command.data`, a
    /// `command_result` event, or the `data` object itself.
    pub fn from_json(text: &str) -> Result<Quota, QuotaError> {
        let value: Value =
            serde_json::from_str(text.trim()).map_err(|e| QuotaError::NotJson(e.to_string()))?;
        Quota::from_value(&value)
    }

    fn from_value(value: &Value) -> Result<Quota, QuotaError> {
        if value.get("status").and_then(Value::as_str) == Some("ERROR") {
            return Err(QuotaError::AgyError(failed_words(value)));
        }
        let data = value
            .get("command")
            .and_then(|c| c.get("data"))
            .unwrap_or(value);
        Quota::from_data(data)
    }

    /// stream-json lines: the `command_result` event's data; else the
    /// result's `command`; a failed result is agy's error.
    pub fn from_stream_json(text: &str) -> Result<Quota, QuotaError> {
        let mut from_result = None;
        for raw in text.lines().filter(|l| !l.trim().is_empty()) {
            match Line::parse(raw) {
                Line::CommandResult(c) => return Quota::from_command(&c),
                Line::Result(r) => from_result = Some(r),
                _ => {}
            }
        }
        match from_result {
            Some(r) if r.status == "ERROR" => Err(QuotaError::AgyError(result_words(&r))),
            Some(TurnResult {
                command: Some(c), ..
            }) => Quota::from_command(&c),
            _ => Err(QuotaError::NoData),
        }
    }

    fn from_command(command: &SlashCommand) -> Result<Quota, QuotaError> {
        match &command.data {
            Some(CommandData::Other(data)) => Quota::from_data(data),
            _ => Err(QuotaError::NoData),
        }
    }

    /// The command's `data`: `{"groups":[{"buckets":[...]}]}`.
    pub fn from_data(data: &Value) -> Result<Quota, QuotaError> {
        let groups = data
            .get("groups")
            .filter(|g| g.is_array())
            .ok_or(QuotaError::NoData)?;
        let groups: Vec<Group> =
            serde_json::from_value(groups.clone()).map_err(|_| QuotaError::NoData)?;
        let mut buckets = Vec::new();
        for group in groups {
            let group_name = group.name.or(group.id).unwrap_or_default();
            for raw in group.buckets {
                let mut bucket: Bucket = serde_json::from_value(raw)
                    .map_err(|e| QuotaError::BadBucket(e.to_string()))?;
                bucket.group = group_name.clone();
                check_fraction(&bucket.id, bucket.remaining_fraction)?;
                buckets.push(bucket);
            }
        }
        Ok(Quota { buckets })
    }

    /// Text mode: one line per bucket, `id<TAB>name<TAB>window<TAB>remaining
    /// <TAB>reset_time`, remaining as a fraction or a percentage, the reset
    /// time optional. Blank lines are skipped.
    pub fn from_text(text: &str) -> Result<Quota, QuotaError> {
        let mut buckets = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = || QuotaError::BadTextLine { line: n + 1 };
            let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
            if cells.len() < 4 || cells[0].is_empty() {
                return Err(bad());
            }
            let remaining = fraction_of(cells[3]).ok_or_else(bad)?;
            check_fraction(cells[0], remaining)?;
            buckets.push(Bucket {
                id: cells[0].to_string(),
                name: cells[1].to_string(),
                window: cells[2].to_string(),
                remaining_fraction: remaining,
                reset_time: cells
                    .get(4)
                    .filter(|s| !s.is_empty())
                    .map(|s| s.to_string()),
                group: String::new(),
            });
        }
        if buckets.is_empty() {
            return Err(QuotaError::NoData);
        }
        Ok(Quota { buckets })
    }

    /// The bucket with the least left (the first of equals): the one that
    /// will stop agy first.
    pub fn lowest(&self) -> Option<&Bucket> {
        self.buckets
            .iter()
            .fold(None, |low: Option<&Bucket>, b| match low {
                Some(l) if l.remaining_fraction <= b.remaining_fraction => Some(l),
                _ => Some(b),
            })
    }

    /// The command's `data` in agy's shape, buckets grouped as they came.
    pub fn to_data(&self) -> Value {
        let mut groups: Vec<(String, Vec<Value>)> = Vec::new();
        for b in &self.buckets {
            let value = serde_json::to_value(b).unwrap_or(Value::Null);
            match groups.last_mut() {
                Some((name, list)) if *name == b.group => list.push(value),
                _ => groups.push((b.group.clone(), vec![value])),
            }
        }
        let groups: Vec<Value> = groups
            .into_iter()
            .map(|(name, buckets)| {
                let mut g = Map::new();
                if !name.is_empty() {
                    g.insert("name".into(), Value::String(name));
                }
                g.insert("buckets".into(), Value::Array(buckets));
                Value::Object(g)
            })
            .collect();
        serde_json::json!({ "groups": groups })
    }

    /// The slash command as `command_result` and the result carry it.
    pub fn to_command(&self) -> SlashCommand {
        SlashCommand {
            name: COMMAND.into(),
            data: Some(CommandData::Other(self.to_data())),
            extra: Map::new(),
        }
    }

    /// The text form: one tab-separated line per bucket.
    pub fn to_text(&self) -> String {
        self.buckets
            .iter()
            .map(|b| {
                format!(
                    "{}\t{}\t{}\t{}\t{}\n",
                    b.id,
                    b.name,
                    b.window,
                    b.remaining_fraction,
                    b.reset_time.as_deref().unwrap_or("")
                )
            })
            .collect()
    }
}

impl Bucket {
    /// `Gemini 5h 42% left, resets 2026-12-01T23:10:00Z`: the name (else
    /// the id), what is left, when it refills.
    pub fn words(&self) -> String {
        let name = if self.name.trim().is_empty() {
            &self.id
        } else {
            &self.name
        };
        let pct = self.remaining_fraction * 100.0;
        let left = if pct > 0.0 && pct < 0.5 {
            "<1%".to_string()
        } else {
            format!("{:.0}%", pct)
        };
        match &self.reset_time {
            Some(t) if !t.trim().is_empty() => format!("{name} {left} left, resets {t}"),
            _ => format!("{name} {left} left"),
        }
    }
}

fn check_fraction(id: &str, value: f64) -> Result<(), QuotaError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(QuotaError::BadFraction {
            id: id.to_string(),
            value: value.to_string(),
        })
    }
}

/// `0.42` or `42%`.
fn fraction_of(cell: &str) -> Option<f64> {
    match cell.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().ok().map(|p| p / 100.0),
        None => cell.parse::<f64>().ok(),
    }
}

fn failed_words(value: &Value) -> String {
    ["error", "response"]
        .iter()
        .filter_map(|k| value.get(*k).and_then(Value::as_str))
        .map(str::trim)
        .find(|s| !s.is_empty())
        .unwrap_or("status ERROR")
        .to_string()
}

fn result_words(r: &TurnResult) -> String {
    r.error
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .or(Some(r.response.trim()).filter(|s| !s.is_empty()))
        .unwrap_or("status ERROR")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Our values, in the shape section "Quota" of docs/agy-format.md
    // describes (no real capture exists).
    const DATA: &str = r#"{"groups":[{"name":"Gemini","buckets":[{"id":"gemini-weekly","name":"Gemini weekly","window":"weekly","remaining_fraction":0.8,"reset_time":"2026-12-07T00:00:00Z","extra":1},{"id":"gemini-5h","name":"Gemini 5h","window":"5h","remaining_fraction":0.42,"reset_time":"2026-12-01T23:10:00Z"}]},{"name":"Third-party","buckets":[{"id":"3p-weekly","name":"Third-party weekly","window":"weekly","remaining_fraction":1.0}]}]}"#;

    fn json_result() -> String {
        format!(
            r#"{{"conversation_id":"","status":"SUCCESS","response":"","num_turns":0,"command":{{"name":"usage","data":{DATA}}},"new_field":true}}"#
        )
    }

    #[test]
    fn the_json_form_reads_every_bucket_and_ignores_unknown_fields() {
        let q = Quota::parse(&json_result()).unwrap();
        let ids: Vec<&str> = q.buckets.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["gemini-weekly", "gemini-5h", "3p-weekly"]);
        assert_eq!(q.buckets[1].remaining_fraction, 0.42);
        assert_eq!(q.buckets[2].reset_time, None);
        assert_eq!(q.buckets[2].group, "Third-party");
        assert_eq!(Quota::from_json(&json_result()), Ok(q));
    }

    #[test]
    fn the_stream_json_form_reads_the_command_result() {
        let q = Quota::from_json(&json_result()).unwrap();
        let text = format!(
            "{}\n{}\n",
            Line::CommandResult(q.to_command()).to_json(),
            r#"{"event":"result","result":{"conversation_id":"","status":"SUCCESS","num_turns":0}}"#
        );
        assert_eq!(Quota::parse(&text), Ok(q.clone()));
        // Only the result, carrying the command.
        let only_result = format!(
            r#"{{"event":"result","result":{}}}"#,
            serde_json::to_string(&TurnResult {
                status: "SUCCESS".into(),
                command: Some(q.to_command()),
                ..TurnResult::default()
            })
            .unwrap()
        );
        assert_eq!(Quota::from_stream_json(&only_result), Ok(q));
    }

    #[test]
    fn the_text_form_round_trips_and_takes_percentages() {
        let q = Quota::from_json(&json_result()).unwrap();
        let back = Quota::parse(&q.to_text()).unwrap();
        assert_eq!(back.buckets.len(), 3);
        assert_eq!(back.buckets[1].remaining_fraction, 0.42);
        assert_eq!(back.buckets[2].reset_time, None);
        let pct = Quota::from_text("gemini-5h\tGemini 5h\t5h\t42%\n").unwrap();
        assert_eq!(pct.buckets[0].remaining_fraction, 0.42);
    }

    #[test]
    fn data_written_reads_back_the_same() {
        let q = Quota::from_json(&json_result()).unwrap();
        assert_eq!(Quota::from_data(&q.to_data()), Ok(q));
    }

    #[test]
    fn lowest_and_words() {
        let q = Quota::parse(DATA).unwrap();
        let low = q.lowest().unwrap();
        assert_eq!(low.id, "gemini-5h");
        assert_eq!(
            low.words(),
            "Gemini 5h 42% left, resets 2026-12-01T23:10:00Z"
        );
        assert_eq!(q.buckets[2].words(), "Third-party weekly 100% left");
        let mut tiny = q.buckets[2].clone();
        tiny.name.clear();
        tiny.remaining_fraction = 0.001;
        assert_eq!(tiny.words(), "3p-weekly <1% left");
        assert_eq!(Quota::default().lowest(), None);
    }

    #[test]
    fn bad_answers_are_typed_errors() {
        assert_eq!(Quota::parse("  \n"), Err(QuotaError::Empty));
        assert!(matches!(
            Quota::from_json("{nope"),
            Err(QuotaError::NotJson(_))
        ));
        assert_eq!(
            Quota::parse(r#"{"status":"SUCCESS"}"#),
            Err(QuotaError::NoData)
        );
        assert_eq!(
            Quota::parse(r#"{"status":"ERROR","error":"Please sign in"}"#),
            Err(QuotaError::AgyError("Please sign in".into()))
        );
        assert!(matches!(
            Quota::parse(r#"{"groups":[{"buckets":[{"name":"x"}]}]}"#),
            Err(QuotaError::BadBucket(_))
        ));
        assert!(matches!(
            Quota::parse(r#"{"groups":[{"buckets":[{"id":"x","remaining_fraction":3}]}]}"#),
            Err(QuotaError::BadFraction { .. })
        ));
        assert_eq!(
            Quota::parse("just some words"),
            Err(QuotaError::BadTextLine { line: 1 })
        );
        assert_eq!(
            Quota::parse(r#"{"event":"result","result":{"status":"ERROR","error":"boom"}}"#),
            Err(QuotaError::AgyError("boom".into()))
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC*") {
            let _ = Quota::parse(&s);
            let _ = Quota::from_text(&s);
            let _ = Quota::from_stream_json(&s);
        }

        #[test]
        fn json_looking_text_never_panics(s in r#"[{}\[\]":,a-z0-9_.\t\n -]{0,200}"#) {
            let _ = Quota::parse(&s);
        }
    }
}
