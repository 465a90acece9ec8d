//! The environment as [`Settings`](super::Settings) resolves it: a snapshot
//! of variable names and values, taken once from the process
//! ([`Env::process`], the binary's `main`) or built outright (tests), so
//! nothing after resolution depends on the process environment.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// A snapshot of environment variables. Values are kept as the OS gave
/// them (a path may be any bytes); each reader says how it takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<OsString, OsString>,
}

impl Env {
    /// The process's environment, now. The one place the library reads it.
    pub fn process() -> Env {
        Env::from_vars(std::env::vars_os())
    }

    /// The variables `vars` (a later name replaces an earlier one).
    pub fn from_vars<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Env
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Env {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The value of `name` as it is, set or not (empty included).
    pub fn get_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// The value of `name` as text, unless unset, not UTF-8 or blank: how
    /// every word and number variable of the bridge is taken (a blank one
    /// counts as unset).
    pub fn text(&self, name: &str) -> Option<String> {
        self.get_os(name)
            .and_then(OsStr::to_str)
            .filter(|v| !v.trim().is_empty())
            .map(str::to_string)
    }

    /// The value of `name` as text whatever its bytes (lossily), unless
    /// unset or blank: the number variables, whose sentence must show a
    /// value that is not UTF-8 rather than ignore it.
    pub fn lossy(&self, name: &str) -> Option<String> {
        let text = self.get_os(name)?.to_string_lossy();
        (!text.trim().is_empty()).then(|| text.into_owned())
    }

    /// The value of `name` as a path, unless unset or empty.
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.get_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// Whether `name` is set to anything but blanks.
    pub fn is_set(&self, name: &str) -> bool {
        self.get_os(name)
            .is_some_and(|v| !v.to_string_lossy().trim().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn blank_counts_as_unset_and_bytes_are_kept_for_paths() {
        let bad = OsStr::from_bytes(b"/h\xff").to_os_string();
        let env = Env::from_vars([
            (OsString::from("A"), OsString::from(" x ")),
            (OsString::from("B"), OsString::from("  ")),
            (OsString::from("C"), bad.clone()),
        ]);
        assert_eq!(env.text("A").as_deref(), Some(" x "));
        assert_eq!(env.text("B"), None);
        assert!(!env.is_set("B"));
        assert_eq!(env.text("C"), None, "not UTF-8: no word");
        assert_eq!(env.lossy("C").as_deref(), Some("/h\u{fffd}"));
        assert_eq!(env.path("C"), Some(PathBuf::from(bad)));
        assert_eq!(env.path("D"), None);
    }
}
