//! A tool call as the gate reads it: one reading or none.
//!
//! agy is written in Go, whose JSON decoding matches object keys without
//! case (Unicode simple folding: `K` the Kelvin sign is `k`, `ſ` is `s`),
//! and whose last duplicate wins. A payload with `CommandLine` and
//! `commandline` may run the second while a gate that read the first passes
//! it. So the gate refuses every payload that holds two keys equal but for
//! case (or equal) in any object ([`parse_unambiguous`], [`ambiguity`]),
//! looks keys up by the same folding
//! ([`agy_format::text::same_key`]), and refuses a value of
//! the wrong type where it reads one: what it cannot read one way it does
//! not pass.

use crate::follow::subject::{COMMAND_KEYS, FILE_KEYS, WHERE_KEYS};
use agy_format::text::{fold_key, same_key};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Keys naming the directory a command runs in.
const CWD_KEYS: &[&str] = &["Cwd"];
/// Keys naming places a tool searches below, beside where a search looks
/// ([`WHERE_KEYS`]): together, the roots. Every other key ending in
/// `Directory`, `Directories`, `Dir` or `Dirs` is one too.
const MORE_ROOT_KEYS: &[&str] = &["TargetDirectories"];
/// Endings of keys naming a root (the root keys aside).
const ROOT_ENDINGS: &[&str] = &["directory", "directories", "dir", "dirs"];
/// Endings of keys naming a file (`AbsolutePath`, `TargetFile`, ...).
const FILE_ENDINGS: &[&str] = &["path", "paths", "file", "files"];

/// JSON text as a value, refused when any object in it holds two keys
/// that are the same key to agy (equal, or equal but for case).
pub(crate) fn parse_unambiguous(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Strict
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| e.to_string())?;
    Ok(value)
}

/// The first pair of keys in `value` (at any depth) that are the same key
/// to agy, as a sentence.
pub(crate) fn ambiguity(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) => duplicate_in(map.keys()).or_else(|| map.values().find_map(ambiguity)),
        Value::Array(items) => items.iter().find_map(ambiguity),
        _ => None,
    }
}

/// The first two of `keys` that are the same key, as a sentence.
fn duplicate_in<'a>(keys: impl Iterator<Item = &'a String>) -> Option<String> {
    let mut seen: Vec<(String, &str)> = Vec::new();
    for key in keys {
        let folded = fold_key(key);
        if let Some((_, first)) = seen.iter().find(|(f, _)| *f == folded) {
            return Some(ambiguous_keys(first, key));
        }
        seen.push((folded, key));
    }
    None
}

fn ambiguous_keys(first: &str, second: &str) -> String {
    format!("it holds the keys {first:?} and {second:?}, which agy reads as one key (Go matches JSON keys without case); agy-bridge does not guess which one agy uses")
}

/// What a path argument names for the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathKind {
    /// One file (or the directory a tool acts on as a whole).
    File,
    /// A place listed or searched below: it touches all it holds.
    Root,
    /// Where a command runs.
    Cwd,
}

/// One path the call names, as agy wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathArg {
    pub key: String,
    pub kind: PathKind,
    pub raw: String,
}

/// What the gate reads of a call's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CallArgs {
    /// `run_command`'s command line.
    pub command: Option<String>,
    /// Every path the call names (its `Cwd` included).
    pub paths: Vec<PathArg>,
    /// Every string in the arguments, keys included, at any depth: what a
    /// mention of a private directory is looked for in.
    pub texts: Vec<String>,
}

/// Read the arguments (`toolCall.args`): `Err` says why they cannot be
/// read one way (two keys agy reads as one, a value of the wrong type).
pub(crate) fn read_args(args: &Value) -> Result<CallArgs, String> {
    if let Some(why) = ambiguity(args) {
        return Err(why);
    }
    let map = match args {
        Value::Object(map) => map,
        Value::Null => return Ok(CallArgs::default()),
        other => {
            return Err(format!(
                "its arguments are {}, not an object",
                kind_of(other)
            ))
        }
    };
    let mut call = CallArgs::default();
    collect_texts(args, &mut call.texts);
    for (key, value) in map {
        if COMMAND_KEYS.iter().any(|k| same_key(k, key)) {
            call.command = Some(string_value(key, value, "a command line")?);
        } else if let Some(kind) = path_kind(key) {
            // The keys agy's tools use: their value must be text (or a
            // list of it). Other keys with a path's ending are read as
            // paths when they hold text, passed over when not
            // (`EmptyFile: true`).
            let known = [CWD_KEYS, WHERE_KEYS, MORE_ROOT_KEYS, FILE_KEYS]
                .iter()
                .any(|keys| keys.iter().any(|k| same_key(k, key)));
            let values = match path_values(key, value) {
                Ok(values) => values,
                Err(why) if known => return Err(why),
                Err(_) => texts_in(value),
            };
            for raw in values {
                call.paths.push(PathArg {
                    key: key.clone(),
                    kind,
                    raw,
                });
            }
        }
    }
    Ok(call)
}

/// The kind of path a key names, if it names one.
fn path_kind(key: &str) -> Option<PathKind> {
    let folded = fold_key(key);
    if CWD_KEYS.iter().any(|k| same_key(k, key)) {
        Some(PathKind::Cwd)
    } else if WHERE_KEYS
        .iter()
        .chain(MORE_ROOT_KEYS)
        .any(|k| same_key(k, key))
        || ROOT_ENDINGS.iter().any(|e| folded.ends_with(e))
    {
        Some(PathKind::Root)
    } else if FILE_ENDINGS.iter().any(|e| folded.ends_with(e)) {
        Some(PathKind::File)
    } else {
        None
    }
}

/// A path argument's paths: a string, or a list of strings.
fn path_values(key: &str, value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|item| string_value(key, item, "a list of paths"))
            .collect(),
        Value::Null => Ok(Vec::new()),
        other => Err(wrong_type(key, other, "a path")),
    }
}

/// The strings of a value that is not a path's shape, where a key only
/// looks like a path's.
fn texts_in(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().flat_map(texts_in).collect(),
        _ => Vec::new(),
    }
}

fn string_value(key: &str, value: &Value, what: &str) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| wrong_type(key, value, what))
}

fn wrong_type(key: &str, value: &Value, what: &str) -> String {
    format!(
        "its argument {key:?} is {}, where agy-bridge reads {what}",
        kind_of(value)
    )
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn collect_texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_texts(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                collect_texts(v, out);
            }
        }
        _ => {}
    }
}

/// The ways agy may read one path argument: as written, and as the JSON
/// string it may hold (agy's transcripts carry values JSON-encoded,
/// `"\"src\""`); a `file://` address as its path; `~` as `home`. Every
/// reading must pass. `None` for a reading that cannot be placed (`~user`,
/// or `~` with no home known).
pub(crate) fn readings(raw: &str, home: Option<&std::path::Path>) -> Vec<Option<String>> {
    let mut out = vec![raw.to_string()];
    if let Ok(inner) = serde_json::from_str::<String>(raw.trim()) {
        out.push(inner);
    }
    let stripped: Vec<String> = out
        .iter()
        .filter_map(|r| r.strip_prefix("file://").map(str::to_string))
        .collect();
    out.extend(stripped);
    let mut placed: Vec<Option<String>> = out.iter().cloned().map(Some).collect();
    for reading in out.iter().filter(|r| r.starts_with('~')) {
        let rest = &reading[1..];
        placed.push(match home {
            Some(home) if rest.is_empty() || rest.starts_with('/') => {
                Some(format!("{}{rest}", home.display()))
            }
            _ => None,
        });
    }
    placed
}

/// Builds a [`Value`] from JSON, refusing an object with two keys that are
/// the same key to agy.
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        let mut seen: Vec<(String, String)> = Vec::new();
        while let Some(key) = access.next_key::<String>()? {
            let f = fold_key(&key);
            if let Some((_, first)) = seen.iter().find(|(folded, _)| *folded == f) {
                return Err(de::Error::custom(ambiguous_keys(first, &key)));
            }
            seen.push((f, key.clone()));
            let value = access.next_value_seed(Strict)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_agy_reads_as_one_are_refused_at_any_depth() {
        for text in [
            r#"{"CommandLine":"cargo test","commandline":"touch x"}"#,
            r#"{"CommandLine":"cargo test","CommandLine":"touch x"}"#,
            r#"{"a":[{"Path":"x","PATH":"y"}]}"#,
            "{\"AbsolutePath\":\"a\",\"Ab\u{17F}olutePath\":\"b\"}",
            "{\"k\":1,\"\u{212A}\":2}",
        ] {
            let err = parse_unambiguous(text).expect_err(text);
            assert!(err.contains("agy reads as one key"), "{text}: {err}");
        }
        let ok = parse_unambiguous(r#"{"a":{"b":1},"c":{"b":[1.5,null,true]}}"#).expect("fine");
        assert_eq!(ok, json!({"a":{"b":1},"c":{"b":[1.5,null,true]}}));
        assert!(parse_unambiguous("{} x").is_err(), "trailing text");
        assert!(ambiguity(&json!({"x":{"Cwd":"a","cWD":"b"}})).is_some());
        assert_eq!(ambiguity(&json!({"x":{"Cwd":"a","Cmd":"b"}})), None);
    }

    #[test]
    fn arguments_are_read_by_folded_key_and_typed() {
        let call = read_args(&json!({
            "CommandLine": "ls",
            "cwd": "/w",
            "Ab\u{17F}olutePath": "/etc/shadow",
            "SearchPath": "/",
            "TargetDirectories": ["/a", "/b"],
            "WaitMsBeforeAsync": 100,
        }))
        .expect("reads");
        assert_eq!(call.command.as_deref(), Some("ls"));
        let kinds: Vec<(&str, PathKind)> = call
            .paths
            .iter()
            .map(|p| (p.raw.as_str(), p.kind))
            .collect();
        assert!(kinds.contains(&("/w", PathKind::Cwd)));
        assert!(
            kinds.contains(&("/etc/shadow", PathKind::File)),
            "{kinds:?}"
        );
        assert!(kinds.contains(&("/", PathKind::Root)));
        assert!(kinds.contains(&("/b", PathKind::Root)));
        for (args, why) in [
            (json!({"CommandLine": ["rm", "-rf"]}), "is a list"),
            (json!({"AbsolutePath": 7}), "is a number"),
            (json!({"Cwd": {"a": 1}}), "is an object"),
            (json!({"SearchDirectory": false}), "is a boolean"),
            (json!({"TargetDirectories": ["/a", {}]}), "is an object"),
            (json!("view"), "not an object"),
        ] {
            let err = read_args(&args).expect_err(why);
            assert!(err.contains(why), "{err}");
        }
        assert_eq!(read_args(&Value::Null), Ok(CallArgs::default()));
        // A key that only looks like a path's: its text is a path, the
        // rest passed over.
        let write =
            read_args(&json!({"TargetFile": "a", "EmptyFile": true, "SomeFiles": ["b", 1]}))
                .expect("reads");
        let mut raws: Vec<&str> = write.paths.iter().map(|p| p.raw.as_str()).collect();
        raws.sort_unstable();
        assert_eq!(raws, ["a", "b"]);
    }

    #[test]
    fn a_path_is_read_every_way_agy_may_read_it() {
        let home = std::path::Path::new("/h");
        let r = |raw: &str| -> Vec<Option<String>> { readings(raw, Some(home)) };
        let some = |all: &[&str]| -> Vec<Option<String>> {
            all.iter().map(|s| Some(s.to_string())).collect()
        };
        assert_eq!(r("/a"), some(&["/a"]));
        assert_eq!(r("\"/etc/x\""), some(&["\"/etc/x\"", "/etc/x"]));
        assert_eq!(r("file:///etc/x"), some(&["file:///etc/x", "/etc/x"]));
        assert_eq!(
            r("~/.ssh/id_rsa"),
            some(&["~/.ssh/id_rsa", "/h/.ssh/id_rsa"])
        );
        assert_eq!(r("~root/x"), vec![Some("~root/x".to_string()), None]);
        assert_eq!(readings("~", None), vec![Some("~".to_string()), None]);
    }
}
