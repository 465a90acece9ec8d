//! Allow rules: which of agy's tool calls pass the permission gate without
//! asking anyone.
//!
//! A rule is `TOOL: PATTERN` (`run_command: cargo test*`, `view_file: *`);
//! `TOOL` alone means `TOOL: *`. The tool name is compared exactly. What
//! the pattern is matched against depends on the tool:
//!
//! - `run_command`: the command line's **words**, as a POSIX shell splits
//!   them (quotes removed), against the pattern's words, split the same
//!   way (`Rule::matches_words`): word N of the pattern matches word N of
//!   the command; a last pattern word that is `*` alone takes any words
//!   after the others (none too), one that ends in `*` matches its word and
//!   takes any after it; else the command has exactly as many words. The
//!   gate only hands a rule a line that makes the shell compute nothing
//!   (see `gate::command`).
//! - every other tool: the call's subject (a path, an MCP `SERVER/TOOL`)
//!   as a whole (`Rule::matches`).
//!
//! In a pattern, `*` is any run of characters (`/` included: `src/*`
//! covers every file under `src`; within one word for commands), `?` is
//! exactly one character, and everything else is itself (no classes, no
//! escapes, no regex). The matcher is iterative and never backtracks more
//! than one `*` at a time, so its cost is at most the pattern's length
//! times the subject's, whatever either holds.
//!
//! `DEFAULT_ALLOW` lists agy's read-only tools, which pass without asking
//! (inside the workspace: the gate decides where); the user's rules
//! (config.json's `"allow"`, or `AGY_ALLOW`) come on top (see
//! `crate::state::config::Config::allow_list`).

use std::fmt;

/// agy's read-only tools, allowed without asking (each as `NAME: *`).
pub(crate) const DEFAULT_ALLOW: &[&str] = &[
    "view_file: *",
    "list_dir: *",
    "grep_search: *",
    "find_by_name: *",
    "view_file_outline: *",
    "view_code_item: *",
    "codebase_search: *",
    "command_status: *",
    "list_resources: *",
    "read_resource: *",
    "list_permissions: *",
];

/// The tool whose rules match command words, not a subject.
pub(crate) const RUN_COMMAND: &str = "run_command";

/// One allow rule: calls of `tool` whose subject matches `glob`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The tool the rule allows, in agy's name.
    pub tool: String,
    /// The pattern the call's subject must match (`*` for any).
    pub glob: String,
}

/// Why a rule's text is not a rule, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an allow rule: {reason} (a rule is TOOL or TOOL: PATTERN, e.g. `run_command: cargo test*`)")]
pub struct RuleError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Rule {
    /// Parse `TOOL` or `TOOL: GLOB`. The tool is trimmed and must be
    /// non-empty without whitespace or control characters; the glob is
    /// trimmed and may be empty only when the colon is absent (then `*`).
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let bad = |reason| RuleError {
            text: text.chars().take(200).collect(),
            reason,
        };
        let (tool, glob) = match text.split_once(':') {
            Some((tool, glob)) => (tool.trim(), glob.trim()),
            None => (text.trim(), "*"),
        };
        if tool.is_empty() {
            return Err(bad("the tool name is empty"));
        }
        if tool.chars().any(char::is_whitespace) {
            return Err(bad("the tool name contains whitespace"));
        }
        if tool.chars().chain(glob.chars()).any(char::is_control) {
            return Err(bad("it contains control characters"));
        }
        if glob.is_empty() {
            return Err(bad("the pattern after the colon is empty (use * for any)"));
        }
        if text.chars().count() > 1000 {
            return Err(bad("it is longer than 1000 characters"));
        }
        if tool == RUN_COMMAND && shell_words::split(glob).is_err() {
            return Err(bad(
                "the command pattern cannot be split into words (an unclosed quote, or a trailing backslash)",
            ));
        }
        Ok(Rule {
            tool: tool.to_string(),
            glob: glob.to_string(),
        })
    }

    /// Whether a call of `tool` on `subject` passes this rule: the same
    /// tool, and the glob matches the whole subject.
    pub(crate) fn matches(&self, tool: &str, subject: &str) -> bool {
        self.tool == tool && glob_matches(&self.glob, subject)
    }

    /// Whether a command of `tool` whose words are `words` passes this
    /// rule: the same tool, and the pattern's words match the command's
    /// (see the module's comment).
    pub(crate) fn matches_words(&self, tool: &str, words: &[String]) -> bool {
        if self.tool != tool {
            return false;
        }
        shell_words::split(&self.glob).is_ok_and(|pattern| words_match(&pattern, words))
    }

    /// Whether this rule is one of [`DEFAULT_ALLOW`].
    pub(crate) fn is_default(&self) -> bool {
        default_allow().contains(self)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.tool, self.glob)
    }
}

/// As its text, `TOOL: GLOB`.
impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for Rule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Rule, RuleError> {
        Rule::parse(s)
    }
}

/// [`DEFAULT_ALLOW`] as rules.
pub(crate) fn default_allow() -> Vec<Rule> {
    DEFAULT_ALLOW
        .iter()
        .filter_map(|text| Rule::parse(text).ok())
        .collect()
}

/// Whether `glob` (`*` any run, `?` one character, all else literal)
/// matches the whole of `text`. Iterative: on a mismatch it returns to the
/// last `*` and lets it take one more character, which is enough because
/// an earlier `*` never needs to take more once a later one has matched.
pub(crate) fn glob_matches(glob: &str, text: &str) -> bool {
    let p: Vec<char> = glob.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    // The last `*` seen and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi.min(p.len())..].iter().all(|&c| c == '*')
}

/// Whether the pattern's words match a command's words: one for one, by
/// [`glob_matches`]. A last pattern word that is `*` alone takes any words
/// after the others (none too); one that ends in `*` matches its word and
/// takes any words after it.
fn words_match(pattern: &[String], words: &[String]) -> bool {
    let Some((last, head)) = pattern.split_last() else {
        return words.is_empty();
    };
    let head_matches =
        |count_ok: bool| count_ok && head.iter().zip(words).all(|(p, w)| glob_matches(p, w));
    if last == "*" {
        return head_matches(words.len() >= head.len());
    }
    let count_ok = if last.ends_with('*') {
        words.len() >= pattern.len()
    } else {
        words.len() == pattern.len()
    };
    head_matches(count_ok) && glob_matches(last, &words[head.len()])
}

/// Rules separated by `;` or newlines (`AGY_ALLOW`); blank entries are
/// skipped.
pub(crate) fn parse_list(text: &str) -> Result<Vec<Rule>, RuleError> {
    text.split([';', '\n', '\r'])
        .filter(|s| !s.trim().is_empty())
        .map(Rule::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rule(text: &str) -> Rule {
        Rule::parse(text).expect("a rule")
    }

    #[test]
    fn parse_forms_and_display() {
        assert_eq!(
            rule("run_command: cargo test*"),
            Rule {
                tool: "run_command".into(),
                glob: "cargo test*".into()
            }
        );
        assert_eq!(rule("  view_file  ").to_string(), "view_file: *");
        assert_eq!(rule("view_file:src/*  ").to_string(), "view_file: src/*");
        // Only the first colon separates: the pattern may hold more.
        assert_eq!(rule("run_command: a:b").glob, "a:b");
        assert_eq!(
            rule(&rule("run_command: cargo test*").to_string()),
            rule("run_command: cargo test*")
        );
    }

    #[test]
    fn bad_rules_say_why() {
        for (text, why) in [
            ("", "the tool name is empty"),
            (": *", "the tool name is empty"),
            ("run command: x", "whitespace"),
            ("run_command:", "the pattern after the colon is empty"),
            ("run_command: a\u{7}", "control characters"),
        ] {
            let err = Rule::parse(text).unwrap_err().to_string();
            assert!(err.contains(why), "{text:?}: {err}");
            assert!(err.contains("TOOL: PATTERN"), "{err}");
        }
    }

    #[test]
    fn matching() {
        let r = rule("run_command: cargo test*");
        assert!(r.matches("run_command", "cargo test"));
        assert!(r.matches("run_command", "cargo test --lib -- a/b"));
        assert!(!r.matches("run_command", "cargo build"));
        assert!(!r.matches("run_commands", "cargo test"));
        assert!(!r.matches("run_command", " cargo test"));
        let r = rule("view_file: src/*.rs");
        assert!(r.matches("view_file", "src/a/b/c.rs"));
        assert!(!r.matches("view_file", "src/a.rsx"));
        assert!(rule("x: a?c").matches("x", "abc"));
        assert!(!rule("x: a?c").matches("x", "ac"));
        assert!(rule("x: é?").matches("x", "éü"));
        assert!(rule("x").matches("x", ""));
        assert!(!rule("x: ?").matches("x", ""));
        assert!(rule("x: a**b").matches("x", "ab"));
    }

    fn words(line: &str) -> Vec<String> {
        shell_words::split(line).expect("words")
    }

    #[test]
    fn command_rules_match_word_for_word() {
        let r = rule("run_command: cargo test*");
        let passes = |line: &str| r.matches_words("run_command", &words(line));
        assert!(passes("cargo test"));
        assert!(passes("cargo test --lib -- a/b"));
        assert!(
            passes("cargo  'test'   --lib"),
            "quotes and spacing are the shell's"
        );
        assert!(passes("cargo tests"), "`*` inside the last word");
        assert!(!passes("cargo build"));
        assert!(
            !passes("FOO=1 cargo test"),
            "an assignment is a word of its own"
        );
        assert!(!passes("'cargo test'"), "one word is not two");
        assert!(!passes("cargo"));
        assert!(!r.matches_words("run_commands", &words("cargo test")));
        let exact = rule("run_command: git status");
        assert!(exact.matches_words("run_command", &words("git status")));
        assert!(!exact.matches_words("run_command", &words("git status --porcelain")));
        let rest = rule("run_command: npm run *");
        assert!(rest.matches_words("run_command", &words("npm run lint -- --fix")));
        assert!(!rest.matches_words("run_command", &words("npm runx")));
        assert!(
            rest.matches_words("run_command", &words("npm run")),
            "`*` alone: none too"
        );
        assert!(!rest.matches_words("run_command", &words("npm")));
        let any = rule("run_command: *");
        assert!(any.matches_words("run_command", &words("ls -la")));
        let quoted = rule("run_command: echo 'a b'");
        assert!(quoted.matches_words("run_command", &words("echo \"a b\"")));
        assert!(!quoted.matches_words("run_command", &words("echo a b")));
    }

    #[test]
    fn a_command_pattern_must_split_into_words() {
        let err = Rule::parse("run_command: echo 'open")
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot be split into words"), "{err}");
        assert!(
            Rule::parse("view_file: it's/*").is_ok(),
            "paths are not split"
        );
    }

    #[test]
    fn defaults_are_read_only_tools_for_any_subject() {
        let all = default_allow();
        assert_eq!(all.len(), DEFAULT_ALLOW.len());
        assert!(all.iter().all(|r| r.glob == "*" && r.is_default()));
        assert!(all.iter().any(|r| r.matches("view_file", "/etc/passwd")));
        assert!(!all.iter().any(|r| r.tool == "run_command"));
        assert!(!rule("run_command: *").is_default());
    }

    #[test]
    fn lists_split_on_semicolons_and_newlines() {
        let list =
            parse_list("run_command: cargo test*; view_file\n\n write_to_file: docs/*;").unwrap();
        let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "run_command: cargo test*",
                "view_file: *",
                "write_to_file: docs/*"
            ]
        );
        assert!(parse_list("a; b c: d").is_err());
        assert_eq!(parse_list(" ; ").unwrap(), vec![]);
    }

    #[test]
    fn no_blow_up_on_many_stars() {
        let glob = "*a".repeat(50) + "b";
        let text = "a".repeat(5000);
        assert!(!glob_matches(&glob, &text));
    }

    /// The obvious recursive definition, exponential but fine on short inputs.
    fn reference(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|k| reference(&p[1..], &t[k..])),
            Some('?') => !t.is_empty() && reference(&p[1..], &t[1..]),
            Some(&c) => t.first() == Some(&c) && reference(&p[1..], &t[1..]),
        }
    }

    proptest! {
        #[test]
        fn matcher_agrees_with_the_reference(
            p in "[ab*?/]{0,8}",
            t in "[ab/c]{0,10}",
        ) {
            let pc: Vec<char> = p.chars().collect();
            let tc: Vec<char> = t.chars().collect();
            prop_assert_eq!(glob_matches(&p, &t), reference(&pc, &tc), "{:?} on {:?}", p, t);
        }

        #[test]
        fn a_text_matches_itself_and_star(t in "[a-c/ ?]{0,12}") {
            let literal = t.replace(['*', '?'], "");
            prop_assert!(glob_matches(&literal, &literal));
            prop_assert!(glob_matches("*", &t));
            let qs = "?".repeat(t.chars().count());
            prop_assert!(glob_matches(&qs, &t));
        }
    }
}
