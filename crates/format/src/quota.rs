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

use crate::stream_json::{CommandData, Line, SlashCommand, TurnResult};
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
    pub(crate) fn from_stream_json(text: &str) -> Result<Quota, QuotaError> {
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
    pub(crate) fn from_text(text: &str) -> Result<Quota, QuotaError> {
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
    /// `Gemini Models: Weekly Limit Remaining 42% left, resets in 2 d 3 h
    /// (Mon 09:00 UTC)`, seen from `now` (Unix seconds): the group (unless
    /// the name says it; agy names two buckets alike in two groups), the
    /// name (else the id), what is left, when it refills or was due to.
    pub fn words(&self, now: i64) -> String {
        let left = self.left_words();
        let name = self.full_name();
        match self.reset_time.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => match parse_rfc3339(t) {
                Some(at) if at > now => format!(
                    "{name} {left} left, resets in {} ({})",
                    span_words(at - now),
                    weekday_time(at, now)
                ),
                Some(at) => format!(
                    "{name} {left} left, its reset was due {} ({} ago)",
                    weekday_time(at, now),
                    span_words(now - at)
                ),
                None => format!("{name} {left} left, resets {t}"),
            },
            _ => format!("{name} {left} left"),
        }
    }

    /// `Gemini Models: Weekly Limit Remaining`: the bucket's name with its
    /// group's before it, unless the name already holds the group's.
    pub fn full_name(&self) -> String {
        let (group, name) = (self.group.trim(), self.display_name());
        if group.is_empty() || name.to_lowercase().contains(&group.to_lowercase()) {
            name.to_string()
        } else {
            format!("{group}: {name}")
        }
    }
}

/// `Mon 09:00 UTC`, with the date when it is a week or more from `now`
/// (`Mon 2026-12-14 09:00 UTC`).
fn weekday_time(at: i64, now: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let day = DAYS[at.div_euclid(86_400).rem_euclid(7) as usize];
    let (date, time) = utc_date_and_time(at);
    if (at - now).abs() >= 7 * 86_400 {
        format!("{day} {date} {time} UTC")
    } else {
        format!("{day} {time} UTC")
    }
}

impl Quota {
    /// The buckets a quota failure is about: every bucket with nothing left
    /// (`true`), else the one with the least left (`false`).
    pub fn culprits(&self) -> (Vec<&Bucket>, bool) {
        let empty: Vec<&Bucket> = self
            .buckets
            .iter()
            .filter(|b| b.remaining_fraction <= 0.0)
            .collect();
        if empty.is_empty() {
            (self.lowest().into_iter().collect(), false)
        } else {
            (empty, true)
        }
    }

    /// What a turn that failed on agy's quota ends with, at `now` (Unix
    /// seconds): each empty bucket and when it refills (`Gemini 5-hour
    /// quota is used up (0% left); it resets at 14:05 UTC (in 2 h 10
    /// min).`), else the lowest bucket, said not to be empty.
    pub fn failure_words(&self, now: i64) -> String {
        match self.culprits() {
            (buckets, true) => buckets
                .iter()
                .map(|b| {
                    format!(
                        "{} is used up (0% left); {}.",
                        b.quota_name(),
                        b.reset_words(now)
                    )
                })
                .collect::<Vec<_>>()
                .join(" "),
            (buckets, false) => match buckets.first() {
                Some(b) => format!(
                    "None of agy's quota buckets is empty; the lowest is {} ({} left); {}.",
                    b.quota_name(),
                    b.left_words(),
                    b.reset_words(now)
                ),
                None => "agy reports no quota buckets.".to_string(),
            },
        }
    }
}

impl Bucket {
    /// `Gemini 5-hour quota`: the name (else the id, with its group's as
    /// [`Bucket::full_name`]), with "quota" unless the name says it already.
    pub(crate) fn quota_name(&self) -> String {
        let name = self.full_name();
        if name.to_ascii_lowercase().contains("quota") {
            name
        } else {
            format!("{name} quota")
        }
    }

    fn display_name(&self) -> &str {
        if self.name.trim().is_empty() {
            &self.id
        } else {
            self.name.trim()
        }
    }

    /// `42%`, `<1%`, `0%`.
    fn left_words(&self) -> String {
        let pct = self.remaining_fraction * 100.0;
        if pct > 0.0 && pct < 0.5 {
            "<1%".to_string()
        } else {
            format!("{:.0}%", pct)
        }
    }

    /// When the bucket refills, seen from `now` (Unix seconds): `it resets
    /// at 14:05 UTC (in 2 h 10 min)`, `it resets on 2026-12-07 at 00:00 UTC
    /// (in 5 d 3 h)`, `it was due to reset at 13:55 UTC (10 min ago), so
    /// it may work again now`, or `agy gives no reset time`. A time that is
    /// not RFC 3339 is given as agy wrote it.
    pub(crate) fn reset_words(&self, now: i64) -> String {
        let raw = match self.reset_time.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => t,
            _ => return "agy gives no reset time".to_string(),
        };
        let Some(at) = parse_rfc3339(raw) else {
            return format!("it resets at {raw}");
        };
        let (date, time) = utc_date_and_time(at);
        let when = if (at - now).abs() < 86_400 {
            format!("at {time} UTC")
        } else {
            format!("on {date} at {time} UTC")
        };
        if at > now {
            format!("it resets {when} (in {})", span_words(at - now))
        } else {
            format!(
                "it was due to reset {when} ({} ago), so it may work again now",
                span_words(now - at)
            )
        }
    }
}

/// `less than a minute`, `45 min`, `2 h 10 min`, `5 d 3 h` (rounded down).
pub(crate) fn span_words(secs: i64) -> String {
    let secs = secs.max(0);
    let (days, hours, mins) = (secs / 86_400, secs % 86_400 / 3600, secs % 3600 / 60);
    match (days, hours, mins) {
        (0, 0, 0) => "less than a minute".to_string(),
        (0, 0, m) => format!("{m} min"),
        (0, h, 0) => format!("{h} h"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, 0, _) => format!("{d} d"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

/// Unix seconds of an RFC 3339 time (`2026-12-01T23:10:00Z`, with or
/// without fractions, `Z` or a `±HH:MM` offset); `None` for anything else.
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = s.get(19..)?;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = frac.get(digits..)?;
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let ob = rest.as_bytes();
            if ob.len() != 6 || ob[3] != b':' {
                return None;
            }
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + min * 60 + sec - offset)
}

/// The RFC 3339 UTC text of Unix seconds (`2026-12-01T23:10:00Z`).
pub fn rfc3339(secs: i64) -> String {
    let (date, time) = utc_date_and_time(secs);
    format!("{date}T{time}:{:02}Z", secs.rem_euclid(60))
}

/// `("2026-12-01", "23:10")`: the UTC date and time of day (to the minute)
/// of Unix seconds.
fn utc_date_and_time(secs: i64) -> (String, String) {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    (
        format!("{y:04}-{m:02}-{d:02}"),
        format!("{:02}:{:02}", rem / 3600, rem % 3600 / 60),
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
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
        // 2026-12-01T21:00:00Z, a Tuesday, two hours ten before the reset.
        let now = parse_rfc3339("2026-12-01T21:00:00Z").unwrap();
        assert_eq!(
            low.words(now),
            "Gemini 5h 42% left, resets in 2 h 10 min (Tue 23:10 UTC)"
        );
        assert_eq!(
            low.words(now + 3 * 3600),
            "Gemini 5h 42% left, its reset was due Tue 23:10 UTC (50 min ago)"
        );
        assert_eq!(q.buckets[2].words(now), "Third-party weekly 100% left");
        let mut tiny = q.buckets[2].clone();
        tiny.name.clear();
        tiny.remaining_fraction = 0.001;
        assert_eq!(tiny.words(now), "Third-party: 3p-weekly <1% left");
        tiny.group.clear();
        assert_eq!(tiny.words(now), "3p-weekly <1% left");
        assert_eq!(Quota::default().lowest(), None);
        let far = Bucket {
            reset_time: Some("2026-12-14T09:00:00Z".into()),
            ..q.buckets[0].clone()
        };
        assert_eq!(
            far.words(now),
            "Gemini weekly 80% left, resets in 12 d 12 h (Mon 2026-12-14 09:00 UTC)"
        );
    }

    /// agy names two buckets alike in two groups ("Weekly Limit Remaining"
    /// in "Gemini Models" and in "Claude and GPT models"): each is said
    /// with its group, so a person can tell them apart.
    #[test]
    fn buckets_named_alike_are_told_apart_by_their_group() {
        let data = r#"{"groups":[{"name":"Gemini Models","buckets":[{"id":"gemini-weekly","name":"Weekly Limit Remaining","window":"weekly","remaining_fraction":0.6,"reset_time":"2026-12-07T09:00:00Z"}]},{"name":"Claude and GPT models","buckets":[{"id":"3p-weekly","name":"Weekly Limit Remaining","window":"weekly","remaining_fraction":0.25,"reset_time":"2026-12-05T09:00:00Z"}]}]}"#;
        let q = Quota::parse(data).unwrap();
        let now = parse_rfc3339("2026-12-05T06:00:00Z").unwrap();
        let words: Vec<String> = q.buckets.iter().map(|b| b.words(now)).collect();
        assert_eq!(
            words,
            [
                "Gemini Models: Weekly Limit Remaining 60% left, resets in 2 d 3 h (Mon 09:00 UTC)",
                "Claude and GPT models: Weekly Limit Remaining 25% left, resets in 3 h (Sat 09:00 UTC)",
            ]
        );
        assert!(q
            .lowest()
            .unwrap()
            .words(now)
            .starts_with("Claude and GPT models:"));
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

    fn bucket(name: &str, left: f64, reset: Option<&str>) -> Bucket {
        Bucket {
            id: name.to_ascii_lowercase().replace(' ', "-"),
            name: name.into(),
            window: String::new(),
            remaining_fraction: left,
            reset_time: reset.map(str::to_string),
            group: String::new(),
        }
    }

    /// 2026-12-01T11:55:00Z.
    const NOW: i64 = 1_796_126_100;

    #[test]
    fn rfc3339_reads_and_writes() {
        assert_eq!(rfc3339(NOW), "2026-12-01T11:55:00Z");
        assert_eq!(parse_rfc3339("2026-12-01T11:55:00Z"), Some(NOW));
        assert_eq!(parse_rfc3339("2026-12-01T11:55:00.123456Z"), Some(NOW));
        assert_eq!(parse_rfc3339("2026-12-01T13:55:00+02:00"), Some(NOW));
        assert_eq!(parse_rfc3339("2026-12-01T06:25:00-05:30"), Some(NOW));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        for bad in [
            "",
            "tomorrow",
            "2026-13-01T00:00:00Z",
            "2026-12-01T11:55:00",
            "2026-12-01T11:55:00+0200",
            "2026-12-01T11:55:00.Z",
            "2026-12-01T1é:55:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn spans_in_words() {
        assert_eq!(span_words(30), "less than a minute");
        assert_eq!(span_words(45 * 60 + 59), "45 min");
        assert_eq!(span_words(2 * 3600), "2 h");
        assert_eq!(span_words(2 * 3600 + 10 * 60 + 30), "2 h 10 min");
        assert_eq!(span_words(86_400 + 59), "1 d");
        assert_eq!(span_words(5 * 86_400 + 3 * 3600 + 600), "5 d 3 h");
        assert_eq!(span_words(-5), "less than a minute");
    }

    #[test]
    fn an_empty_bucket_is_named_with_its_reset() {
        let q = Quota {
            buckets: vec![
                bucket("Gemini weekly", 0.3, Some("2026-12-07T00:00:00Z")),
                bucket("Gemini 5-hour", 0.0, Some("2026-12-01T14:05:00Z")),
            ],
        };
        assert_eq!(
            q.failure_words(NOW),
            "Gemini 5-hour quota is used up (0% left); it resets at 14:05 UTC (in 2 h 10 min)."
        );
    }

    #[test]
    fn several_empty_buckets_are_each_named() {
        let q = Quota {
            buckets: vec![
                bucket("Gemini 5-hour", 0.0, Some("2026-12-01T14:05:00Z")),
                bucket("Third-party weekly", 0.5, None),
                bucket("Gemini weekly quota", 0.0, Some("2026-12-07T00:00:00Z")),
            ],
        };
        assert_eq!(
            q.failure_words(NOW),
            "Gemini 5-hour quota is used up (0% left); it resets at 14:05 UTC (in 2 h 10 min). \
             Gemini weekly quota is used up (0% left); it resets on 2026-12-07 at 00:00 UTC (in 5 d 12 h)."
        );
    }

    #[test]
    fn a_reset_in_the_past_or_missing_or_odd_is_said_so() {
        let past = bucket("Gemini 5-hour", 0.0, Some("2026-12-01T11:45:00Z"));
        assert_eq!(
            past.reset_words(NOW),
            "it was due to reset at 11:45 UTC (10 min ago), so it may work again now"
        );
        let long_ago = bucket("Gemini weekly", 0.0, Some("2026-11-20T08:00:00Z"));
        assert_eq!(
            long_ago.reset_words(NOW),
            "it was due to reset on 2026-11-20 at 08:00 UTC (11 d 3 h ago), so it may work again now"
        );
        let none = Quota {
            buckets: vec![bucket("Gemini 5-hour", 0.0, None)],
        };
        assert_eq!(
            none.failure_words(NOW),
            "Gemini 5-hour quota is used up (0% left); agy gives no reset time."
        );
        let mut nameless = bucket("Gemini 5-hour", 0.0, Some("2026-12-01T14:05:00Z"));
        nameless.name.clear();
        assert_eq!(nameless.quota_name(), "gemini-5-hour quota");
        let odd = bucket("Gemini 5-hour", 0.0, Some("in a while"));
        assert_eq!(odd.reset_words(NOW), "it resets at in a while");
    }

    #[test]
    fn without_an_empty_bucket_the_lowest_is_named_as_not_empty() {
        let q = Quota {
            buckets: vec![
                bucket("Gemini weekly", 0.3, Some("2026-12-07T00:00:00Z")),
                bucket("Gemini 5-hour", 0.004, Some("2026-12-01T14:05:00Z")),
            ],
        };
        assert_eq!(
            q.failure_words(NOW),
            "None of agy's quota buckets is empty; the lowest is Gemini 5-hour quota (<1% left); it resets at 14:05 UTC (in 2 h 10 min)."
        );
        assert_eq!(
            Quota::default().failure_words(NOW),
            "agy reports no quota buckets."
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC*") {
            let _ = Quota::parse(&s);
            let _ = Quota::from_text(&s);
            let _ = Quota::from_stream_json(&s);
            let _ = parse_rfc3339(&s);
        }

        #[test]
        fn json_looking_text_never_panics(s in r#"[{}\[\]":,a-z0-9_.\t\n -]{0,200}"#) {
            let _ = Quota::parse(&s);
        }
    }
}
