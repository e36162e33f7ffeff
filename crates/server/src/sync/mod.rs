//! Many sites, one central: events go up from each site exactly once.
//!
//! [`upload`] is the site's side (a background uploader woken by commits),
//! [`ingest`] the central's (`POST /sync/v1/events`), [`wire`] what goes
//! between them.

pub mod ingest;
pub mod upload;
pub mod wire;
