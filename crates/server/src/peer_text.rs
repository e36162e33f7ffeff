//! Text a peer chose (a certificate subject, an agent name, a message it
//! sent), made fit for the event log and the service's own log: control
//! and invisible formatting characters escaped, length capped.
//!
//! Escaping is unambiguous: a backslash is doubled, so `\u{1b}` in the
//! stored text always means the peer sent ESC, never the six characters.

/// The most characters of a peer-chosen fragment (a name) kept in a
/// sentence.
pub const MAX_NAME: usize = 128;

/// The most characters of a peer-chosen text quoted whole (a protocol
/// error, a refusal's reason).
pub const MAX_SENTENCE: usize = 512;

/// The most characters of an event's sentence built around peer-chosen
/// text.
pub const MAX_EVENT_TEXT: usize = 1024;

/// Whether `c` is shown escaped: C0/C1 controls, DEL, and the invisible
/// formatting characters that can make a stored line read differently
/// from what it holds (bidirectional overrides, zero-width characters).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}')
}

/// `s` with hidden characters escaped (`\u{…}`, backslash doubled), cut
/// to `max` characters of the result; a cut says how many characters of
/// the input were left out.
pub fn escape(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max) + 16);
    // Characters in `out` so far.
    let mut n = 0usize;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        let piece = if c == '\\' {
            "\\\\".to_string()
        } else if hidden(c) {
            format!("\\u{{{:x}}}", c as u32)
        } else {
            c.to_string()
        };
        n += piece.chars().count();
        if n > max {
            let left = 1 + chars.count();
            out.push_str(&format!("… ({left} more characters)"));
            return out;
        }
        out.push_str(&piece);
    }
    out
}

/// `s` cut to `max` characters, saying how many were left out (for a
/// sentence whose peer-chosen parts are escaped already).
pub fn cap(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((at, _)) => {
            let left = s[at..].chars().count();
            format!("{}… ({left} more characters)", &s[..at])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_formatting_are_escaped_and_backslashes_doubled() {
        assert_eq!(escape("door 1", 64), "door 1");
        assert_eq!(
            escape("a\nb\r\u{1b}[31mc\u{7f}", 64),
            "a\\u{a}b\\u{d}\\u{1b}[31mc\\u{7f}"
        );
        assert_eq!(escape("x\u{202E}y\u{200B}", 64), "x\\u{202e}y\\u{200b}");
        assert_eq!(escape("\\u{1b}", 64), "\\\\u{1b}");
        assert_eq!(escape("é日本", 64), "é日本");
    }

    #[test]
    fn long_text_is_cut_and_says_how_much_is_left_out() {
        let long = "A".repeat(5000);
        let e = escape(&long, 100);
        assert!(e.starts_with(&"A".repeat(100)), "{e}");
        assert!(e.ends_with("… (4900 more characters)"), "{e}");
        // An escape is never cut in half.
        let e = escape(&"\n".repeat(50), 20);
        assert!(e.starts_with("\\u{a}\\u{a}\\u{a}\\u{a}… (46 more"), "{e}");
        assert_eq!(cap("abc", 3), "abc");
        assert_eq!(cap("abcdé", 3), "abc… (2 more characters)");
    }
}
