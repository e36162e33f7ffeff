//! `pivgate-bench`: every performance story pivgate answers, measured beside
//! its peers in one run, written as `bench-report/index.html`
//! (self-contained, inline SVG) and `bench-report/summary.md`.
//!
//! Each section lives in [`sections`], returns a [`model::Section`] with the
//! command that reproduces each figure alone, and never asserts a time:
//! figures are reported, not judged.

pub mod compare;
pub mod ctx;
pub mod model;
pub mod render;
pub mod report;
pub mod sections;
