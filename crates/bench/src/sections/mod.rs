//! One module per story. Each `run` measures pivgate and its peers in the
//! same run and returns a [`Section`](crate::model::Section).

pub mod door;
pub mod log_size;
pub mod path_building;
pub mod pcsc;
pub mod service_load;
pub mod sites;
pub mod spawned;
pub mod tls;
pub mod trust;

use crate::ctx::Ctx;
use crate::model::Section;

/// A section's entry point.
pub type Run = fn(&Ctx) -> anyhow::Result<Section>;

/// Every section, in report order: (id, run).
pub fn all() -> Vec<(&'static str, Run)> {
    vec![
        ("pcsc", pcsc::run),
        ("door", door::run),
        ("tls-teardown", tls::run),
        ("startup", trust::startup),
        ("trust-load", trust::load),
        ("path-building", path_building::run),
        ("service-load", service_load::run),
        ("log-size", log_size::run),
        ("sites", sites::run),
    ]
}
