//! PLACEHOLDER until wt-perms lands: the permission rule type.
use std::fmt;

pub const DEFAULT_ALLOW: &[&str] = &[
    "view_file: *",
    "list_dir: *",
    "grep_search: *",
    "find_by_name: *",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub glob: String,
}

impl Rule {
    pub fn parse(text: &str) -> Result<Rule, String> {
        let (tool, glob) = text.split_once(':').unwrap_or((text, "*"));
        Ok(Rule {
            tool: tool.trim().into(),
            glob: glob.trim().into(),
        })
    }
    pub fn matches(&self, tool: &str, subject: &str) -> bool {
        self.tool == tool
            && (self.glob == "*"
                || self.glob == subject
                || self
                    .glob
                    .strip_suffix('*')
                    .is_some_and(|p| subject.starts_with(p)))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.tool, self.glob)
    }
}
