//! Text for people: one line, cut to a length. Shared by every readable
//! view (tool lines, diffs' labels, the live view) so they cut alike.

/// `s` with every control character (newlines included) made a space.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `s` cut to `max_chars` characters, marked with an ellipsis when cut.
pub fn shorten(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", s[..cut].trim_end()),
        None => s.to_string(),
    }
}

/// The first non-blank line of `text`, trimmed and cut as [`shorten`]
/// cuts (empty when there is none): a summary or an error's own sentence.
pub fn first_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    shorten(line.unwrap_or(""), max_chars)
}

/// `s` with runs of whitespace (newlines included) made one space, trimmed,
/// then cut as [`shorten`] cuts: a paragraph of agy's on one line.
pub fn flat(s: &str, max_chars: usize) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    shorten(&words.join(" "), max_chars)
}

/// `s` as one word of a POSIX shell command line: as it is when it holds
/// only characters no shell treats specially, else single-quoted. Commands
/// the bridge tells a user to run name real paths, which may hold spaces.
pub fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@,=%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Whether `whole` says `sentence` again, spacing and a final full stop
/// aside: agy's quota sentence inside "agy quota exceeded: ...", say. The
/// views use it to say a failure once.
pub fn repeats(whole: &str, sentence: &str) -> bool {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let sentence = words(sentence);
    let sentence = sentence.trim_end_matches('.');
    !sentence.is_empty() && words(whole).contains(sentence)
}

/// A JSON object key folded as agy reads keys: agy is written in Go, whose
/// JSON decoding matches keys as `strings.EqualFold` does (Unicode simple
/// folding: the Kelvin sign is `k`, `ſ` is `s`). Each character goes to
/// upper case, then to lower, which folds at least as much: it may call
/// more keys the same, never fewer.
pub fn fold_key(key: &str) -> String {
    key.chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether two JSON keys are the same key to agy ([`fold_key`]).
pub fn same_key(a: &str, b: &str) -> bool {
    a == b || fold_key(a) == fold_key(b)
}

/// A fresh 256-bit secret as 64 hex digits (a loopback server's token).
pub fn new_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Constant-time equality of a secret (a token) with what was given: the
/// time taken does not tell how much of it matched (its length is no secret).
pub fn same_secret(given: &[u8], ours: &[u8]) -> bool {
    if given.len() != ours.len() {
        return false;
    }
    given
        .iter()
        .zip(ours)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fold_as_go_matches_them() {
        assert!(same_key("CommandLine", "commandLINE"));
        assert!(same_key("AbsolutePath", "Ab\u{17F}olutePath"));
        assert!(same_key("k", "\u{212A}"));
        assert!(!same_key("Cwd", "Cmd"));
    }

    #[test]
    fn flat_joins_lines_and_cuts() {
        assert_eq!(flat("  a\n\n b  c ", 10), "a b c");
        assert_eq!(flat("abcdef", 3), "abc…");
    }

    #[test]
    fn a_sentence_is_repeated_whatever_its_spacing() {
        let failure = "agy quota exceeded: Individual quota reached.  Resets in 3m.";
        assert!(repeats(failure, "Individual quota reached. Resets in 3m."));
        assert!(repeats(failure, "Individual quota reached.\nResets in 3m"));
        assert!(!repeats(failure, "Something else."));
        assert!(!repeats(failure, " "));
    }

    #[test]
    fn shell_words_quote_only_what_needs_it() {
        assert_eq!(
            shell_word("/home/u/.gemini/c/0a-b.db"),
            "/home/u/.gemini/c/0a-b.db"
        );
        assert_eq!(shell_word("/Users/Jo Doe/x.db"), "'/Users/Jo Doe/x.db'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
