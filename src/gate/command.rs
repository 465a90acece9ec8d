//! A command line as the gate reads it: the words a shell would run, or
//! why the line is more than words.
//!
//! An allow rule decides on words (`run_command: cargo test*`), so the gate
//! must know that the words it matched are all the shell will run. A line
//! passes as [`plain_words`] only when, outside single quotes, it holds no
//! character that makes a shell compute anything: no expansion (`$`,
//! backquote, `~` at a word's start, `*?[` globs, `{}` braces), no control
//! operator or redirection (`;&|<>()`), and nowhere a backslash (fish reads
//! `\'` inside single quotes as an escaped quote, a POSIX shell does not:
//! the two would see different words), a line break of any kind or another
//! control character. Everything else a rule never passes; the user is
//! asked. Text is never matched as text: `cargo test; rm -rf ~` is not a
//! `cargo test` with an odd argument.

/// Line breaks a shell, an editor or a terminal may treat as one.
const LINE_BREAKS: &[char] = &['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'];

/// Characters that make the shell compute outside single quotes.
const COMPUTES: &[char] = &[
    '$', '`', ';', '&', '|', '<', '>', '(', ')', '{', '}', '*', '?', '[',
];

/// The words of a plain command line, split by the POSIX rules (quotes
/// removed); `Err` says in words what made the line more than that.
pub(crate) fn plain_words(line: &str) -> Result<Vec<String>, String> {
    let mut single = false;
    let mut previous: Option<char> = None;
    for c in line.chars() {
        if LINE_BREAKS.contains(&c) {
            return Err("it holds a line break".into());
        }
        if c == '\\' {
            return Err("it holds a backslash".into());
        }
        if c.is_control() && c != '\t' {
            return Err(format!("it holds the control character U+{:04X}", c as u32));
        }
        if single {
            single = c != '\'';
        } else if c == '\'' {
            single = true;
        } else if COMPUTES.contains(&c) {
            return Err(format!("it holds `{c}` outside single quotes"));
        } else if c == '~' && starts_word(previous) {
            return Err("a word starts with `~`".into());
        }
        previous = Some(c);
    }
    if single {
        return Err("a single quote is not closed".into());
    }
    shell_words::split(line).map_err(|e| format!("it cannot be split into words ({e})"))
}

/// Whether a character after `previous` starts a word, or a part of one the
/// shell expands `~` in (`A=~/x`, `PATH=a:~/b`).
fn starts_word(previous: Option<char>) -> bool {
    previous.is_none_or(|p| matches!(p, ' ' | '\t' | '=' | ':' | '"'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_their_words() {
        let words = |l: &str| plain_words(l).expect(l);
        assert_eq!(words("cargo test --lib"), ["cargo", "test", "--lib"]);
        assert_eq!(
            words("cargo  test\t'a b' \"c d\""),
            ["cargo", "test", "a b", "c d"]
        );
        assert_eq!(
            words("echo ';$(x)`*'"),
            ["echo", ";$(x)`*"],
            "inert in single quotes"
        );
        assert_eq!(words("git checkout HEAD~1"), ["git", "checkout", "HEAD~1"]);
        assert_eq!(words("cargo test # a comment"), ["cargo", "test"]);
        assert_eq!(words(""), Vec::<String>::new());
    }

    #[test]
    fn anything_the_shell_computes_is_refused_with_its_reason() {
        for (line, why) in [
            ("cargo test; rm -rf ~", "`;`"),
            ("cargo test && x", "`&`"),
            ("cargo test | sh", "`|`"),
            ("cargo test > /etc/x", "`>`"),
            ("cargo test < /etc/x", "`<`"),
            ("cargo test $(x)", "`$`"),
            ("cargo test ${x:=$'\\x24'}", "`$`"),
            ("cargo test ${x@P}", "`$`"),
            ("cargo test `x`", "```"),
            ("cargo test (x)", "`(`"),
            ("cargo test {a,b}", "`{`"),
            ("cargo test *", "`*`"),
            ("cargo test ?", "`?`"),
            ("cargo test [ab]", "`[`"),
            ("cargo test \"$HOME\"", "`$`"),
            ("cargo test ~/x", "`~`"),
            ("cargo test A=~/x", "`~`"),
            ("cargo test \"~\"", "`~`"),
            ("cargo test 'a\\' ; x '", "backslash"),
            ("cargo test\nrm x", "line break"),
            ("cargo test\rrm x", "line break"),
            ("cargo test\u{85}rm x", "line break"),
            ("cargo test\u{2028}rm x", "line break"),
            ("cargo test\u{2029}rm x", "line break"),
            ("cargo test '\nx'", "line break"),
            ("cargo test \u{1b}[2J", "control character U+001B"),
            ("cargo test 'open", "not closed"),
            ("cargo test \"open", "cannot be split"),
        ] {
            let err = plain_words(line).expect_err(line);
            assert!(err.contains(why), "{line:?}: {err}");
        }
    }
}
