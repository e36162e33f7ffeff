//! A figure's repeats, written beside it in a bench's `--json` output as
//! `"{key}_repeats": {"values": [...], "over": "..."}`: the same statistic
//! as the figure, taken over each repeat (a run, a start, a block of
//! consecutive samples), from which `pivgate-bench` takes the figure's
//! measured run-to-run spread (the range of the values). Shared by the
//! benches the report runs (`#[path]`-included).
#![allow(dead_code)]

/// Blocks of consecutive samples a statistic's spread is taken over (as
/// the report's own sections do).
pub const BLOCKS: usize = 5;

/// The statistic of each repeat (`values`) and what the repeats are
/// (`over`, e.g. `3 starts`).
pub fn repeats(
    values: impl IntoIterator<Item = f64>,
    over: impl Into<String>,
) -> serde_json::Value {
    serde_json::json!({
        "values": values.into_iter().collect::<Vec<f64>>(),
        "over": over.into(),
    })
}

/// `samples` (in the order they were taken) cut into [`BLOCKS`] blocks of
/// equal size, the remainder left out; none when a block would hold fewer
/// than two samples.
pub fn blocks<T>(samples: &[T]) -> Vec<&[T]> {
    if samples.len() < 2 * BLOCKS {
        return Vec::new();
    }
    samples
        .chunks(samples.len() / BLOCKS)
        .take(BLOCKS)
        .collect()
}

/// `stat` of each of the [`blocks`] of `samples`, as repeats over
/// "5 blocks of N consecutive {what}"; `null` with too few samples.
pub fn over_blocks<T>(samples: &[T], what: &str, stat: impl Fn(&[T]) -> f64) -> serde_json::Value {
    let b = blocks(samples);
    match b.first() {
        Some(first) => repeats(
            b.iter().map(|s| stat(s)),
            format!("{} blocks of {} consecutive {what}", b.len(), first.len()),
        ),
        None => serde_json::Value::Null,
    }
}
