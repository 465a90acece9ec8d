//! Lines agy prints on stderr that the bridge acts on while agy runs.
//!
//! Most of agy's stderr is read once, at the end, to classify a failure
//! (`crate::runner::failure`). One line matters live: resuming a conversation agy
//! does not have is not an error; agy warns and starts a new conversation
//! (docs/agy-format.md, "Resume"), and a turn bound to the old id would
//! follow a database nobody writes.

/// The id in agy's `warning: conversation "ID" not found`, if `line` is it.
pub fn conversation_not_found(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix("warning: conversation \"")?;
    let (id, tail) = rest.split_once('"')?;
    (tail.trim() == "not found").then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_warning_and_nothing_else() {
        assert_eq!(
            conversation_not_found(
                "warning: conversation \"00000000-0000-4000-8000-000000000000\" not found\r"
            ),
            Some("00000000-0000-4000-8000-000000000000")
        );
        assert_eq!(
            conversation_not_found("warning: conversation \"x\" found"),
            None
        );
        assert_eq!(
            conversation_not_found("error: conversation \"x\" not found"),
            None
        );
    }
}
