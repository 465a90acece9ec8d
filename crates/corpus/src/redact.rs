//! `--redact`: make a recording publishable by replacing every value that
//! identifies the user with a stable placeholder.
//!
//! Replaced, in this order, in header strings, text columns and inside
//! protobuf payloads:
//!
//! 1. e-mail addresses -> `user@example.com`;
//! 2. UUIDs (conversation, trajectory and any other ids) -> deterministic
//!    placeholder UUIDs `00000000-0000-4000-8000-000000000001`, `...02`, ...
//!    numbered in order of first appearance, so they stay 36 characters,
//!    UUID-shaped (fake-agy and the id validator accept them) and the same id
//!    maps to the same placeholder everywhere (keys, `Commit.db`, payloads);
//! 3. workspace paths -> `/workspace` (`/workspace-2`, ... for further ones),
//!    then the home directory -> `/home/user` (longest path first, only where
//!    the path ends at a path boundary);
//! 4. the user name (`$USER`, and the home directory's last component) as a
//!    whole word -> `user`.
//!
//! Payloads are walked with the known-field tree ([`steps::STEP`] for
//! `step_payload`, [`steps::METADATA`] for `metadata`, and so on): string
//! fields are redacted as text and every enclosing length is re-encoded with
//! [`Encoder`]. A length-delimited field the tree does not describe (or marks
//! as bytes) is treated as a nested message if it parses cleanly and is not
//! printable UTF-8 text (or is printable but parses into length-delimited
//! fields with small numbers: `{1: "file:///x"}` is all printable bytes),
//! else as a string if it is UTF-8; bytes that are neither (and blobs that
//! do not parse) only get a byte-level, same-length replacement of UUIDs,
//! since anything else would change their length. A blob with nothing to
//! replace is kept byte for byte.

use crate::recording::{Commit, Header, Provenance, Recording, SqlValue, Write};
use agy_format::steps::{self, Kind, Known};
use agy_format::wire::{self, Encoder, Value};
use std::collections::HashMap;

pub(crate) const HOME_PLACEHOLDER: &str = "/home/user";
pub(crate) const WORKSPACE_PLACEHOLDER: &str = "/workspace";
pub(crate) const USER_PLACEHOLDER: &str = "user";
pub(crate) const EMAIL_PLACEHOLDER: &str = "user@example.com";

/// The `n`th placeholder id (1-based).
pub fn placeholder_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// What identifies the user.
#[derive(Debug, Clone, Default)]
pub struct RedactOptions {
    pub home: Option<String>,
    pub user: Option<String>,
    /// Workspace paths (the run's cwd, added directories).
    pub workspaces: Vec<String>,
}

impl RedactOptions {
    /// `$HOME` and `$USER` (or the home directory's last component) of this
    /// process, plus `workspaces`.
    pub fn from_env(workspaces: Vec<String>) -> RedactOptions {
        let home = std::env::var("HOME")
            .ok()
            .map(|h| h.trim_end_matches('/').to_string())
            .filter(|h| h.len() > 1);
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| {
                home.as_deref()
                    .and_then(|h| h.rsplit('/').next())
                    .map(str::to_string)
            });
        RedactOptions {
            home,
            user,
            workspaces,
        }
    }
}

/// Applies one [`RedactOptions`] consistently over a whole recording.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// (path, placeholder), longest path first.
    paths: Vec<(String, String)>,
    users: Vec<String>,
    ids: HashMap<String, String>,
}

const MAX_DEPTH: usize = 64;

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether an undescribed length-delimited value is a nested message: it
/// must parse cleanly, and either not be printable UTF-8 text, or (printable
/// messages exist: a tag 0x0a is `\n`, a length 0x25 is `%`, so
/// `{1: "file:///..."}` is all printable) hold a length-delimited field and
/// only small field numbers, which real text that happens to parse does not.
fn looks_like_message(b: &[u8]) -> bool {
    if b.is_empty() || wire::validate(b).is_err() {
        return false;
    }
    let is_text = std::str::from_utf8(b).map(printable).unwrap_or(false);
    if !is_text {
        return true;
    }
    let mut has_len = false;
    for f in wire::fields(b).flatten() {
        if f.number > 1000 {
            return false;
        }
        has_len |= matches!(f.value, Value::Len(_));
    }
    has_len
}

fn printable(s: &str) -> bool {
    s.chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
}

/// Replace `from` by `to` in `s` where `from` is not followed by a
/// character in `cont` (and, when `word`, not preceded by a word character).
fn replace_bounded(s: &str, from: &str, to: &str, cont: fn(u8) -> bool, word: bool) -> String {
    if from.is_empty() || !s.contains(from) {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    let mut search = 0;
    while let Some(pos) = s[search..].find(from) {
        let start = search + pos;
        let end = start + from.len();
        let after_ok = bytes.get(end).map(|b| !cont(*b)).unwrap_or(true);
        let before_ok = !word || start == 0 || !is_word(bytes[start - 1]);
        if after_ok && before_ok {
            out.push_str(&s[last..start]);
            out.push_str(to);
            last = end;
            search = end;
        } else {
            // Step past this match's first character (keeping UTF-8 bounds).
            search = start + s[start..].chars().next().map(char::len_utf8).unwrap_or(1);
        }
        if search >= s.len() {
            break;
        }
    }
    out.push_str(&s[last..]);
    out
}

fn is_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
}

fn is_domain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')
}

/// Replace e-mail addresses (`local@domain.tld`).
fn replace_emails(s: &str) -> String {
    if !s.contains('@') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'@' {
            i += 1;
            continue;
        }
        let mut start = i;
        while start > last && is_local(b[start - 1]) {
            start -= 1;
        }
        while start < i && b[start] == b'.' {
            start += 1;
        }
        let mut end = i + 1;
        while end < b.len() && is_domain(b[end]) {
            end += 1;
        }
        while end > i + 1 && matches!(b[end - 1], b'.' | b'-') {
            end -= 1;
        }
        let domain = &s[i + 1..end];
        let tld_ok = domain
            .rsplit_once('.')
            .map(|(host, tld)| {
                !host.is_empty() && tld.len() >= 2 && tld.bytes().all(|c| c.is_ascii_alphabetic())
            })
            .unwrap_or(false);
        if start < i && tld_ok {
            out.push_str(&s[last..start]);
            out.push_str(EMAIL_PLACEHOLDER);
            last = end;
            i = end;
        } else {
            i += 1;
        }
    }
    out.push_str(&s[last..]);
    out
}

impl Redactor {
    pub fn new(opts: &RedactOptions) -> Redactor {
        let mut paths: Vec<(String, String)> = Vec::new();
        let clean = |p: &str| p.trim_end_matches('/').to_string();
        let mut n = 0;
        for w in &opts.workspaces {
            let w = clean(w);
            if w.len() > 1 && !paths.iter().any(|(p, _)| *p == w) {
                n += 1;
                let to = if n == 1 {
                    WORKSPACE_PLACEHOLDER.to_string()
                } else {
                    format!("{WORKSPACE_PLACEHOLDER}-{n}")
                };
                paths.push((w, to));
            }
        }
        if let Some(h) = &opts.home {
            let h = clean(h);
            if h.len() > 1 && !paths.iter().any(|(p, _)| *p == h) {
                paths.push((h, HOME_PLACEHOLDER.to_string()));
            }
        }
        // Longest first, so a workspace inside the home directory wins.
        paths.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        let mut users: Vec<String> = Vec::new();
        let home_user = opts
            .home
            .as_deref()
            .map(|h| h.trim_end_matches('/'))
            .and_then(|h| h.rsplit('/').next())
            .map(str::to_string);
        for u in opts.user.iter().cloned().chain(home_user) {
            if u.len() >= 2 && u != USER_PLACEHOLDER && !users.contains(&u) {
                users.push(u);
            }
        }
        Redactor {
            paths,
            users,
            ids: HashMap::new(),
        }
    }

    /// The placeholder for an id, assigned on first sight.
    fn id(&mut self, uuid: &str) -> String {
        let key = uuid.to_ascii_lowercase();
        let next = self.ids.len() as u64 + 1;
        self.ids
            .entry(key)
            .or_insert_with(|| placeholder_id(next))
            .clone()
    }

    /// The ids replaced so far: original (lower case) -> placeholder.
    pub fn id_map(&self) -> &HashMap<String, String> {
        &self.ids
    }

    fn replace_uuids(&mut self, s: &str) -> String {
        let b = s.as_bytes();
        if b.len() < 36 {
            return s.to_string();
        }
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        let mut i = 0;
        while i + 36 <= b.len() {
            let before_ok = i == 0 || !b[i - 1].is_ascii_alphanumeric();
            let after_ok = b
                .get(i + 36)
                .map(|c| !c.is_ascii_alphanumeric())
                .unwrap_or(true);
            if before_ok && after_ok && agy_format::ids::is_uuid_text(&b[i..i + 36]) {
                out.push_str(&s[last..i]);
                let p = self.id(&s[i..i + 36]);
                out.push_str(&p);
                i += 36;
                last = i;
            } else {
                i += 1;
            }
        }
        out.push_str(&s[last..]);
        out
    }

    /// Redact a piece of text.
    pub fn text(&mut self, s: &str) -> String {
        let mut out = replace_emails(s);
        out = self.replace_uuids(&out);
        for (from, to) in &self.paths {
            out = replace_bounded(&out, from, to, is_path_char, false);
        }
        for u in &self.users {
            out = replace_bounded(&out, u, USER_PLACEHOLDER, is_word, true);
        }
        out
    }

    /// Same-length replacement of UUIDs in arbitrary bytes.
    pub(crate) fn bytes_same_len(&mut self, b: &[u8]) -> Vec<u8> {
        let mut out = b.to_vec();
        let mut i = 0;
        while i + 36 <= out.len() {
            let before_ok = i == 0 || !out[i - 1].is_ascii_alphanumeric();
            let after_ok = out
                .get(i + 36)
                .map(|c| !c.is_ascii_alphanumeric())
                .unwrap_or(true);
            if before_ok && after_ok && agy_format::ids::is_uuid_text(&out[i..i + 36]) {
                let id = String::from_utf8_lossy(&out[i..i + 36]).into_owned();
                let p = self.id(&id);
                out[i..i + 36].copy_from_slice(p.as_bytes());
                i += 36;
            } else {
                i += 1;
            }
        }
        out
    }

    fn string_bytes(&mut self, b: &[u8]) -> Option<Vec<u8>> {
        let new = match std::str::from_utf8(b) {
            Ok(s) => self.text(s).into_bytes(),
            Err(_) => self.bytes_same_len(b),
        };
        (new != b).then_some(new)
    }

    /// A length-delimited value the tree does not describe.
    fn unknown_len(&mut self, b: &[u8], depth: usize) -> Option<Vec<u8>> {
        if depth < MAX_DEPTH && looks_like_message(b) {
            return self.message(b, None, depth + 1);
        }
        self.string_bytes(b)
    }

    /// Redact a message; `None` when nothing in it changed.
    fn message(&mut self, b: &[u8], tree: Option<&[Known]>, depth: usize) -> Option<Vec<u8>> {
        let mut fields = Vec::new();
        for f in wire::fields(b) {
            match f {
                Ok(f) => fields.push(f),
                Err(_) => {
                    let new = self.bytes_same_len(b);
                    return (new != b).then_some(new);
                }
            }
        }
        let mut replaced: Vec<Option<Vec<u8>>> = Vec::with_capacity(fields.len());
        for f in &fields {
            let Value::Len(sub) = f.value else {
                replaced.push(None);
                continue;
            };
            let known = tree.and_then(|t| t.iter().find(|k| k.number == f.number));
            let new = match known.map(|k| k.kind) {
                Some(Kind::Msg(subtree)) if wire::validate(sub).is_ok() => {
                    self.message(sub, Some(subtree), depth + 1)
                }
                Some(Kind::Str) => self.string_bytes(sub),
                _ => self.unknown_len(sub, depth),
            };
            replaced.push(new);
        }
        if replaced.iter().all(Option::is_none) {
            return None;
        }
        let mut e = Encoder::new();
        for (f, new) in fields.iter().zip(replaced) {
            match new {
                Some(bytes) => e.bytes(f.number, &bytes),
                None => e.value(f.number, &f.value),
            };
        }
        Some(e.finish())
    }

    /// Redact one blob column value; `tree` is its known-field tree, if any.
    pub fn blob(&mut self, b: &[u8], tree: Option<&[Known]>) -> Vec<u8> {
        let new = match tree {
            Some(t) => self.message(b, Some(t), 0),
            None => self.unknown_len(b, 0),
        };
        new.unwrap_or_else(|| b.to_vec())
    }

    fn value(&mut self, table: &str, column: &str, v: &SqlValue) -> SqlValue {
        match v {
            SqlValue::Text(t) => SqlValue::Text(self.text(t)),
            SqlValue::Blob(b) => SqlValue::Blob(self.blob(b, tree_for(table, column))),
            other => other.clone(),
        }
    }

    fn write(&mut self, w: &Write) -> Write {
        let key = w
            .key
            .iter()
            .map(|(c, v)| (c.clone(), self.value(&w.table, c, v)))
            .collect();
        let mut values: std::collections::BTreeMap<String, SqlValue> = w
            .values
            .iter()
            .map(|(c, v)| (c.clone(), self.value(&w.table, c, v)))
            .collect();
        // gen_metadata.size is the length of data: keep it true.
        if w.table == "gen_metadata" {
            let old_len = w
                .values
                .get("data")
                .and_then(SqlValue::as_blob)
                .map(<[u8]>::len);
            let new_len = values
                .get("data")
                .and_then(SqlValue::as_blob)
                .map(<[u8]>::len);
            if let (Some(old), Some(new), Some(SqlValue::Integer(size))) =
                (old_len, new_len, values.get_mut("size"))
            {
                if *size == old as i64 {
                    *size = new as i64;
                }
            }
        }
        Write {
            table: w.table.clone(),
            op: w.op,
            key,
            values,
            stream_error: w.stream_error.as_deref().map(|t| self.text(t)),
        }
    }

    /// Redact a whole recording.
    pub fn recording(&mut self, rec: &Recording) -> Recording {
        let h = &rec.header;
        let root_conversation = self.text(&h.root_conversation);
        let provenance = match &h.provenance {
            Provenance::Captured { agy_version, .. } => Provenance::Captured {
                agy_version: agy_version.clone(),
                redacted: true,
            },
            other => other.clone(),
        };
        let header = Header {
            format: h.format,
            agy_version: h.agy_version.clone(),
            provenance,
            description: self.text(&h.description),
            prompt: self.text(&h.prompt),
            model: h.model.as_deref().map(|m| self.text(m)),
            workspace: h.workspace.as_deref().map(|w| self.text(w)),
            root_conversation,
            stdout: self.text(&h.stdout),
            stderr: self.text(&h.stderr),
            exit_code: h.exit_code,
            models_output: self.text(&h.models_output),
            version_output: self.text(&h.version_output),
            schema: h.schema.clone(),
            outcome: h.outcome.clone(),
        };
        let commits = rec
            .commits
            .iter()
            .map(|c| Commit {
                t_ms: c.t_ms,
                db: self.text(&c.db),
                pre: c.pre,
                gate: c.gate,
                mcp_call: c.mcp_call.clone(),
                turn: c.turn,
                writes: c.writes.iter().map(|w| self.write(w)).collect(),
            })
            .collect();
        Recording { header, commits }
    }
}

/// The known-field tree of a blob column, if the decoder has one.
pub(crate) fn tree_for(table: &str, column: &str) -> Option<&'static [Known]> {
    match table {
        "steps" => steps::column_tree(column),
        _ => None,
    }
}

/// Redact `rec` with `opts` (the recording's own workspace is added).
pub fn redact_recording(rec: &Recording, opts: &RedactOptions) -> Recording {
    let mut opts = opts.clone();
    if let Some(w) = &rec.header.workspace {
        if !opts.workspaces.contains(w) {
            opts.workspaces.push(w.clone());
        }
    }
    Redactor::new(&opts).recording(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Redactor {
        Redactor::new(&RedactOptions {
            home: Some("/home/alice".into()),
            user: Some("alice".into()),
            workspaces: vec!["/home/alice/src/proj".into()],
        })
    }

    #[test]
    fn text_placeholders() {
        let mut r = r();
        assert_eq!(
            r.text("cd /home/alice/src/proj/lib && ls /home/alice/x /home/alicex"),
            "cd /workspace/lib && ls /home/user/x /home/alicex"
        );
        assert_eq!(
            r.text("mail alice.b@corp.example.org."),
            "mail user@example.com."
        );
        assert_eq!(r.text("hi alice, malice"), "hi user, malice");
        let a =
            r.text("e3e1efd5-4283-494f-a081-314b599d31b3 x E3E1EFD5-4283-494F-A081-314B599D31B3");
        assert_eq!(
            a,
            "00000000-0000-4000-8000-000000000001 x 00000000-0000-4000-8000-000000000001"
        );
    }

    #[test]
    fn bytes_keep_length() {
        let mut r = r();
        let mut b = vec![0xff, 0x00];
        b.extend_from_slice(b"e3e1efd5-4283-494f-a081-314b599d31b3");
        b.push(0xfe);
        let out = r.bytes_same_len(&b);
        assert_eq!(out.len(), b.len());
        assert_eq!(&out[2..38], placeholder_id(1).as_bytes());
    }

    #[test]
    fn unchanged_blob_is_kept_byte_for_byte() {
        let mut r = r();
        // A non-canonical varint (0x80 0x00 for 0) must survive untouched.
        let b = vec![0x08, 0x80, 0x00, 0x12, 0x02, b'h', b'i'];
        assert_eq!(r.blob(&b, Some(steps::STEP)), b);
    }
}
