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
