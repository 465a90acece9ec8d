//! The decoder's paths as drift sees them: every path its known-field tree
//! reads ([`known_paths`]), the load-bearing ones proto3 often omits
//! ([`ZERO_ABLE`]) and the fallbacks that carry a path's content when it is
//! absent ([`content_alternatives`]). Read by the rules, the fingerprint and
//! the report alike.

use agy_format::steps::{self, Kind, Known};
use agy_format::wire::WireType;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// A path the decoder's known-field tree lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownPath {
    /// The wire types the decoder reads it as (one, unless the tree lists a
    /// field number twice).
    pub wire: Vec<WireType>,
    /// What it is, from the tree's names: `planner response text`.
    pub label: String,
}

/// Every path the known-field tree lists (`20.1`, `metadata.4.2`), built
/// once from [`steps::STEP`] and the side-column trees.
pub fn known_paths() -> &'static BTreeMap<String, KnownPath> {
    static KNOWN: OnceLock<BTreeMap<String, KnownPath>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        fn walk(tree: &[Known], prefix: &str, label: &str, out: &mut BTreeMap<String, KnownPath>) {
            for k in tree {
                let path = if prefix.is_empty() {
                    k.number.to_string()
                } else {
                    format!("{prefix}.{}", k.number)
                };
                let name = k.name.replace('_', " ");
                let label = if label.is_empty() {
                    name
                } else {
                    format!("{label} {name}")
                };
                let entry = out.entry(path.clone()).or_insert_with(|| KnownPath {
                    wire: Vec::new(),
                    label: label.clone(),
                });
                if !entry.wire.contains(&k.kind.wire_type()) {
                    entry.wire.push(k.kind.wire_type());
                }
                if let Kind::Msg(sub) = k.kind {
                    walk(sub, &path, &label, out);
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(steps::STEP, "", "", &mut out);
        for (column, tree) in steps::SIDE_COLUMNS {
            walk(tree, column, "", &mut out);
        }
        out
    })
}

/// Load-bearing paths whose value proto3 omits in normal use, because it is
/// often empty: the answer text (a response that only calls tools), thinking,
/// a command's output (a command that printed nothing), a tool's arguments.
/// Their absence is breaking only when something unread appears in its
/// place in the same steps (see `moved_content`). A path under one of these
/// counts too (`28.21.1`).
pub const ZERO_ABLE: &[&str] = &["20.1", "20.3", "20.7.3", "28.21", "5.4.3", "metadata.4.3"];

/// Paths the decoder reads the same content from when a load-bearing path
/// is absent (its fallbacks in `steps::decode`): text or the modified
/// response, thinking or raw thinking, a tool call's name or its second name
/// field, the user's text or its items, a command or its second field, a
/// model error's user message or its summary and diagnostic.
const ALTERNATIVES: &[(&str, &[&str])] = &[
    ("20.1", &["20.8"]),
    ("20.3", &["20.16"]),
    ("20.7.2", &["20.7.9"]),
    ("5.4.2", &["5.4.9"]),
    ("metadata.4.2", &["metadata.4.9"]),
    ("19.2", &["19.3.1"]),
    ("19.3.1", &["19.2"]),
    ("28.23", &["28.25"]),
    ("28.25", &["28.23"]),
    ("24.3.9", &["24.3.2", "24.3.3"]),
    ("40.1", &["40.3"]),
];

/// The paths that carry `path`'s content for the decoder when it is absent.
pub fn content_alternatives(path: &str) -> &'static [&'static str] {
    ALTERNATIVES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, alts)| *alts)
        .unwrap_or(&[])
}

/// Whether `path` is one of [`ZERO_ABLE`] or under one.
pub(super) fn is_zero_able(path: &str) -> bool {
    ZERO_ABLE
        .iter()
        .any(|z| path == *z || path.starts_with(&format!("{z}.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alternative_and_zero_able_path_is_one_the_decoder_reads() {
        let known = known_paths();
        for (path, alts) in ALTERNATIVES {
            for p in std::iter::once(path).chain(alts.iter()) {
                assert!(known.contains_key(*p), "{p} is not in the known-field tree");
            }
        }
        for p in ZERO_ABLE {
            assert!(known.contains_key(*p), "{p} is not in the known-field tree");
        }
    }

    #[test]
    fn zero_able_covers_sub_paths() {
        assert!(is_zero_able("28.21"));
        assert!(is_zero_able("28.21.1"));
        assert!(!is_zero_able("28.2"));
        assert!(!is_zero_able("20.7.2"));
    }
}
