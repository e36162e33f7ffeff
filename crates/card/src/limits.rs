//! The card's size limits, shared by the command decoder ([`crate::command`]), the edge
//! ([`crate::edge`]) and the image ([`crate::image`]).

/// Largest data object PUT DATA accepts.
pub const MAX_OBJECT_LEN: usize = 16 * 1024;
/// Total data-object storage of the card.
pub const MAX_STORAGE: usize = 512 * 1024;
