//! The outcome of a drift comparison, for people and for tools: findings as
//! sentences that name what each path means (from the decoder's known-field
//! table), coverage notes, and the plain statement that there was nothing to
//! compare when the inputs hold no step.

use super::finding::Finding;
use super::fingerprint::Fingerprint;
use super::known::known_paths;
use serde::Serialize;
use std::path::Path;

/// The outcome of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub breaking: usize,
    pub additive: usize,
    /// Notes: absences that lose nothing.
    pub info: usize,
    /// The inputs hold no step at all (or there were no inputs): nothing was
    /// compared, and `findings` is empty.
    pub nothing_to_compare: bool,
    pub findings: Vec<Finding>,
    /// Baseline step types these inputs do not exercise (not findings: a
    /// sample that lacks a tool call says nothing about tool calls).
    pub not_exercised: Vec<String>,
    /// Baseline paths absent here where that could well be chance (see
    /// [`super::SIGNIFICANCE`]); findings only when the inputs cover every
    /// baseline source.
    pub not_seen: Vec<String>,
}

impl Report {
    pub fn is_breaking(&self) -> bool {
        self.breaking > 0
    }

    /// The readable report. `looked_at` says what the inputs were (files,
    /// directories), for the nothing-to-compare case.
    pub fn to_text(
        &self,
        current: &Fingerprint,
        baseline_path: &Path,
        looked_at: &[String],
    ) -> String {
        if self.nothing_to_compare {
            return nothing_to_compare(current, baseline_path, looked_at);
        }
        let mut out = format!(
            "drift: {} input(s), {} steps, against {}\n",
            current.sources.len(),
            current.total_steps(),
            baseline_path.display()
        );
        for f in &self.findings {
            out.push_str(&f.to_string());
            out.push('\n');
        }
        if !self.not_exercised.is_empty() {
            out.push_str(&format!(
                "coverage: these inputs have no steps of these baseline types, so they were not checked: {}\n",
                self.not_exercised.join(", ")
            ));
        }
        if !self.not_seen.is_empty() {
            out.push_str(&format!(
                "coverage: baseline fields these inputs lack where that could well be chance (not checked): {}\n",
                self.not_seen.join("; ")
            ));
        }
        if self.breaking + self.additive == 0 {
            out.push_str("no drift\n");
        } else {
            out.push_str(&format!(
                "{} breaking, {} additive\n",
                self.breaking, self.additive
            ));
        }
        out
    }

    /// The report as one JSON object (one line).
    pub fn to_json(
        &self,
        current: &Fingerprint,
        baseline_path: &Path,
        looked_at: &[String],
    ) -> String {
        let value = serde_json::json!({
            "baseline": baseline_path,
            "sources": current.sources,
            "looked_at": looked_at,
            "nothing_to_compare": self.nothing_to_compare,
            "breaking": self.breaking,
            "additive": self.additive,
            "info": self.info,
            "findings": self.findings,
            "not_exercised": self.not_exercised,
            "not_seen": self.not_seen,
        });
        format!("{value}\n")
    }
}

fn nothing_to_compare(current: &Fingerprint, baseline_path: &Path, looked_at: &[String]) -> String {
    let inputs = if looked_at.is_empty() {
        "no input".to_string()
    } else {
        looked_at.join(", ")
    };
    let why = if current.sources.is_empty() {
        "no recording or database to read".to_string()
    } else {
        format!(
            "{} input(s) read ({}), but none holds a step",
            current.sources.len(),
            current.sources.join(", ")
        )
    };
    format!(
        "drift: nothing to compare: {why}.\nlooked at: {inputs}\nNothing was checked against {}; give recordings (.jsonl) or conversation databases that hold steps.\n",
        baseline_path.display()
    )
}

/// A field path with what it means, for reports: `20.1 (planner response
/// text)`, `metadata.9.5 (usage cache read tokens in the metadata column)`,
/// `20.21 (unknown to the decoder, inside planner response)`.
pub fn describe_path(path: &str) -> String {
    let known = known_paths();
    let column = path
        .split('.')
        .next()
        .filter(|s| !s.is_empty() && !s.starts_with(|c: char| c.is_ascii_digit()));
    let in_column = |label: &str| match column {
        Some(c) => format!("{label} in the {c} column"),
        None => label.to_string(),
    };
    if let Some(k) = known.get(path) {
        return format!("{path} ({})", in_column(&k.label));
    }
    let mut prefix = path;
    while let Some((head, _)) = prefix.rsplit_once('.') {
        prefix = head;
        if let Some(k) = known.get(prefix) {
            return format!(
                "{path} (unknown to the decoder, inside {})",
                in_column(&k.label)
            );
        }
    }
    match column {
        Some(c) => format!("{path} (unknown to the decoder, in the {c} column)"),
        None => format!("{path} (unknown to the decoder)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_described_by_what_they_mean() {
        assert_eq!(describe_path("20.1"), "20.1 (planner response text)");
        assert_eq!(describe_path("5.4.2"), "5.4.2 (metadata tool call name)");
        assert_eq!(
            describe_path("metadata.9.5"),
            "metadata.9.5 (usage cache read tokens in the metadata column)"
        );
        assert_eq!(
            describe_path("20.21"),
            "20.21 (unknown to the decoder, inside planner response)"
        );
        assert_eq!(
            describe_path("render_info.3"),
            "render_info.3 (unknown to the decoder, in the render_info column)"
        );
        assert_eq!(describe_path("250"), "250 (unknown to the decoder)");
    }
}
