//! Reading a client's server-time estimates in tests (what `Client::statement_estimates`
//! returns), without this crate depending on the driver.

use std::time::Duration;

/// The highest estimate of `sql` on any connection in `estimates` (`(slot, sql, estimate)`
/// rows), zero before it has completed once.
pub fn highest_estimate(
    estimates: impl IntoIterator<Item = (usize, String, Option<Duration>)>,
    sql: &str,
) -> Duration {
    estimates
        .into_iter()
        .filter(|(_, s, _)| s == sql)
        .filter_map(|(_, _, e)| e)
        .max()
        .unwrap_or_default()
}
