//! The report: `report.json` (the [`Report`] as data) and `report.md`
//! (the same, to read), and the exit code it means.

use super::{Checked, Report};

/// 0 when every fact checked held, 1 when any did not. (2, could not run,
/// is the caller's: there is no report then.)
pub fn exit_code(report: &Report) -> u8 {
    if report.failed().is_empty() {
        0
    } else {
        1
    }
}

impl Report {
    /// `report.json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// `report.md`.
    pub fn to_markdown(&self) -> String {
        let mut md = String::from("# agy conformance report\n\n");
        md.push_str(&format!(
            "- agy: `{}`, version {}\n- platform: {}\n- model: {}\n- model turns: {} planned, {} spent\n",
            self.agy_bin,
            self.agy_version,
            self.platform,
            self.model.as_deref().unwrap_or("agy's default"),
            self.planned_turns,
            self.spent_turns
        ));
        let failed = self.failed();
        let held = self.facts.iter().filter(|c| c.ok == Some(true)).count();
        let unchecked = self.facts.iter().filter(|c| c.ok.is_none()).count();
        md.push_str(&format!(
            "- facts: {held} held, {} did not, {unchecked} not checked\n",
            failed.len()
        ));
        if let Some(stop) = &self.stopped {
            md.push_str(&format!("- **{stop}**\n"));
        }
        if !failed.is_empty() {
            md.push_str("\n## Facts that did not hold\n\n");
            for c in &failed {
                md.push_str(&format!(
                    "- `{}` ({}): {}\n",
                    c.fact,
                    c.section,
                    cell(&c.evidence)
                ));
            }
        }
        md.push_str("\n## Facts\n\n| fact | section of docs/agy-format.md | scenario | ok | evidence |\n|---|---|---|---|---|\n");
        for c in &self.facts {
            md.push_str(&row(c));
        }
        if !self.recordings.is_empty() {
            md.push_str("\n## Recordings (redacted)\n\n");
            for r in &self.recordings {
                md.push_str(&format!("- `{r}`\n"));
            }
        }
        if !self.commands.is_empty() {
            md.push_str("\n## agy's own commands (redacted)\n\n");
            for c in &self.commands {
                md.push_str(&format!("- `{c}`\n"));
            }
        }
        if let Some(drift) = &self.drift {
            md.push_str(&format!("\n## Drift\n\n{}\n", cell(drift)));
        }
        md.push_str("\n## Notes\n\n");
        for n in &self.notes {
            md.push_str(&format!("- {}\n", cell(n)));
        }
        md
    }

    /// One line per fact that did not hold (for stderr).
    pub fn failed_lines(&self) -> Vec<String> {
        self.failed()
            .iter()
            .map(|c| format!("{} ({}): {}", c.fact, c.section, c.evidence))
            .collect()
    }
}

fn row(c: &Checked) -> String {
    let ok = match c.ok {
        Some(true) => "yes",
        Some(false) => "**NO**",
        None => "not checked",
    };
    format!(
        "| `{}` | {} | {} | {ok} | {} |\n",
        c.fact,
        cell(&c.section),
        c.scenario,
        cell(&c.evidence)
    )
}

/// Text safe in a table cell: one line, `|` escaped.
fn cell(s: &str) -> String {
    agy_format::text::one_line(s).replace('|', "\\|")
}
