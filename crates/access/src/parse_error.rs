//! [`ParseError`]: a text value (an identifier, a schedule window, a time range) that does not
//! parse. Below [`crate::model`] and [`crate::schedule`], which both return it.

/// A text value that does not parse as the identifier it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {problem} (got `{input}`)")]
pub struct ParseError {
    pub what: &'static str,
    pub problem: String,
    pub input: String,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, problem: impl Into<String>, input: &str) -> Self {
        // Echo at most a short prefix of what was given.
        let input: String = input.chars().take(80).collect();
        ParseError {
            what,
            problem: problem.into(),
            input,
        }
    }
}
