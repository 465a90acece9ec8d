//! AskAntigravity: one task delegated to agy, its final answer and the
//! conversation to continue, as text or one JSON object.

/// The sentence for a model that is itself agy asking agy.
pub const SELF_DELEGATION: &str = "AskAntigravity is not available while the current model is itself antigravity: agy would be delegating to itself";

/// What `ask` tells its caller: the answer, the conversation to continue,
/// the model, notices and the failure.
pub struct AskReport<'a> {
    /// agy's final answer.
    pub answer: &'a str,
    /// The conversation to continue.
    pub id: Option<&'a str>,
    /// Why the turn failed.
    pub error: Option<String>,
    /// The model, as the answer names it.
    pub model: Option<&'a str>,
    /// What the caller should know besides.
    pub notices: &'a [String],
}

impl AskReport<'_> {
    /// A report of a turn that never ran.
    pub fn failed(error: String) -> AskReport<'static> {
        AskReport {
            answer: "",
            id: None,
            error: Some(error),
            model: None,
            notices: &[],
        }
    }

    /// What goes to stdout: the answer and the conversation, or one JSON
    /// object with `json`.
    pub fn stdout_text(&self, json: bool) -> String {
        let mut text = String::new();
        if json {
            let v = serde_json::json!({
                "answer": self.answer,
                "conversationId": self.id,
                "model": self.model,
                "ok": self.error.is_none(),
                "error": self.error,
                "notices": self.notices,
            });
            text = format!("{v}\n");
        } else {
            if !self.answer.is_empty() {
                text.push_str(&format!("{}\n", self.answer));
            }
            if let Some(id) = self.id {
                text.push_str(&format!(
                    "\n[agy conversation: {id}; continue with --conversation {id}]\n"
                ));
            }
        }
        text
    }

    /// What goes to stderr, one line each (nothing with `json`: the object
    /// holds it).
    pub fn stderr_lines(&self, json: bool) -> Vec<String> {
        if json {
            return Vec::new();
        }
        let notes = self
            .notices
            .iter()
            .map(|n| format!("agy-bridge: note: {n}"));
        let error = self.error.iter().map(|e| format!("agy-bridge: error: {e}"));
        notes.chain(error).collect()
    }
}

/// agy's extra arguments without any `--add-dir`: a delegated turn sees
/// the workspace and nothing else, so it cannot call back into pi.
pub fn strip_add_dirs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == "--add-dir" {
            skip = true;
            continue;
        }
        if a.starts_with("--add-dir=") {
            continue;
        }
        out.push(a.clone());
    }
    out
}
