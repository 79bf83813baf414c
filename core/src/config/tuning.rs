//! pgpipe's own options, apart from libpq's: setting and reading them by keyword, and applying
//! them from a string of their own (`PGPIPE_OPTIONS`, [`Config::apply_pgpipe_options`]) so that
//! a `DATABASE_URL` shared with libpq-based tools can stay libpq's alone.

use std::time::Duration;

use super::options::{lookup, unknown, KEYWORDS};
use super::values::{boolean, choice, num};
use super::{bad, Config, Pooler, ReleaseReset};
use crate::guard::Mode;
use crate::Error;

/// The longest message of a type that never carries data (authentication, ParameterStatus,
/// CommandComplete, ...): libpq's rule, which refuses such messages over 30,000 bytes. The
/// floor of `max_message_size`; the frame check (`proto/frame.rs`) applies it.
pub(crate) const SHORT_MESSAGE_MAX: usize = 30_000;

/// The default cap on a message that carries data (`Config::max_message_size`): the server's
/// own limit on one allocation (1 GiB), so nothing PostgreSQL can send is refused.
pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: usize = 1 << 30;

/// The environment variable [`Config::parse`] reads pgpipe's own options from (keyword/value
/// form, e.g. `pipeline_size=8 sync_coalescing=off`); the connection string wins where both set
/// one. Only pgpipe's keywords are allowed in it.
pub const PGPIPE_OPTIONS: &str = "PGPIPE_OPTIONS";

/// pgpipe's own keywords (every keyword that is not libpq's), in the order parsing applies them.
pub fn pgpipe_keywords() -> impl Iterator<Item = &'static str> {
    KEYWORDS.iter().filter(|k| k.pgpipe).map(|k| k.name)
}

/// Whether `key` is one of pgpipe's own keywords.
pub(super) fn is_pgpipe(key: &str) -> bool {
    lookup(key).is_some_and(|i| KEYWORDS[i].pgpipe)
}

/// The values of `pooler`.
const POOLERS: [(&str, Pooler); 5] = [
    ("auto", Pooler::Auto),
    ("none", Pooler::None),
    ("session", Pooler::Session),
    ("transaction", Pooler::Transaction),
    ("transaction-pipelined", Pooler::TransactionPipelined),
];

/// A duration in the unit its keyword names, `0` when off.
fn ms(d: Option<Duration>) -> String {
    d.map_or(0, |d| d.as_millis()).to_string()
}

fn on(b: bool) -> String {
    if b { "on" } else { "off" }.to_owned()
}

impl Config {
    /// The value of one of pgpipe's own options, as its keyword takes it (`on`/`off` for
    /// switches, `0` for a timeout that is off): `Config::default().pgpipe_option("pipeline_size")`
    /// is `Some("4")`. `None` for a keyword that is not pgpipe's. Setting the value back with
    /// [`Config::set`] changes nothing.
    pub fn pgpipe_option(&self, key: &str) -> Option<String> {
        Some(match key {
            "pipeline_size" => self.pipeline_size.to_string(),
            "max_in_flight" => self.max_in_flight.to_string(),
            "mailbox_size" => self.mailbox_size.to_string(),
            "statement_cache_size" => self.statement_cache_size.to_string(),
            "named_statements" => on(self.named_statements),
            "pooler" => POOLERS
                .iter()
                .find(|(_, p)| *p == self.pooler)
                .map_or("auto", |(name, _)| name)
                .to_owned(),
            "fair_lanes" => on(self.fair_lanes),
            "sync_coalescing" => on(self.sync_coalescing),
            "trace_sql" => on(self.trace_sql),
            "max_message_size" => self.max_message_size.to_string(),
            "query_timeout" => ms(self.query_timeout),
            "retry_not_dispatched" => on(self.retry_not_dispatched),
            "dispatch_timeout_ms" => self.dispatch_timeout.as_millis().to_string(),
            "pinned_size" => self.pinned_size.to_string(),
            "max_connections" => self.max_connections.to_string(),
            "slow_threshold_us" => self.slow_threshold.as_micros().to_string(),
            "max_queue_work_us" => self.max_queue_work.as_micros().to_string(),
            "spare_cpu_pct" => self.spare_cpu_pct.to_string(),
            "idle_timeout_ms" => self.idle_timeout.as_millis().to_string(),
            "checkout_timeout_ms" => ms(self.checkout_timeout),
            "health_check_ms" => ms(self.health_check),
            "shared_statement_timeout_ms" => ms(self.shared_statement_timeout),
            "release_reset" => match self.release_reset {
                ReleaseReset::Changed => "changed",
                ReleaseReset::Always => "always",
            }
            .to_owned(),
            "guard" => match self.guard {
                Mode::Default => "default",
                Mode::Strict => "strict",
            }
            .to_owned(),
            "guard_allow_functions" => self.guard_allow_functions.join(","),
            _ => return None,
        })
    }

    /// Applies a string of pgpipe's own options in keyword/value form
    /// (`"pipeline_size=8 sync_coalescing=off"`), kept apart from the connection string so
    /// that the same `DATABASE_URL` serves libpq, tokio-postgres and pgpipe. A libpq keyword
    /// here is an error: it belongs in the connection string.
    pub fn apply_pgpipe_options(&mut self, options: &str) -> Result<(), Error> {
        for (k, v) in pgpipe_pairs(options, "these options")? {
            self.set(&k, &v)?;
        }
        Ok(())
    }

    /// Applies one of pgpipe's own keywords (the caller checked that it is one).
    pub(super) fn set_own(&mut self, key: &str, v: &str) -> Result<(), Error> {
        match key {
            "pipeline_size" => self.pipeline_size = num(key, v)?,
            "max_in_flight" => self.max_in_flight = num(key, v)?,
            "mailbox_size" => self.mailbox_size = num(key, v)?,
            "statement_cache_size" => self.statement_cache_size = num(key, v)?,
            "named_statements" => self.named_statements = boolean(key, v)?,
            "pooler" => self.pooler = choice(key, v, &POOLERS)?,
            "fair_lanes" => self.fair_lanes = boolean(key, v)?,
            "sync_coalescing" => self.sync_coalescing = boolean(key, v)?,
            "trace_sql" => self.trace_sql = boolean(key, v)?,
            "max_message_size" => {
                let max: usize = num(key, v)?;
                if max < SHORT_MESSAGE_MAX {
                    return Err(bad(&format!(
                        "max_message_size={max} is below {}, the longest message of types that \
                         carry no data",
                        SHORT_MESSAGE_MAX
                    )));
                }
                self.max_message_size = max;
            }
            "query_timeout" => {
                let ms: u64 = num(key, v)?;
                self.query_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "retry_not_dispatched" => self.retry_not_dispatched = boolean(key, v)?,
            "dispatch_timeout_ms" => self.dispatch_timeout = Duration::from_millis(num(key, v)?),
            "pinned_size" => self.pinned_size = num(key, v)?,
            "max_connections" => self.max_connections = num(key, v)?,
            "slow_threshold_us" => self.slow_threshold = Duration::from_micros(num(key, v)?),
            "max_queue_work_us" => self.max_queue_work = Duration::from_micros(num(key, v)?),
            "spare_cpu_pct" => {
                let pct: u8 = num(key, v)?;
                if pct > 100 {
                    return Err(bad(&format!("spare_cpu_pct={pct} is above 100 (percent)")));
                }
                self.spare_cpu_pct = pct;
            }
            "idle_timeout_ms" => self.idle_timeout = Duration::from_millis(num(key, v)?),
            "checkout_timeout_ms" => {
                let ms: u64 = num(key, v)?;
                self.checkout_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "health_check_ms" => {
                let ms: u64 = num(key, v)?;
                self.health_check = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "shared_statement_timeout_ms" => {
                let ms: u64 = num(key, v)?;
                self.shared_statement_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "release_reset" => {
                let policies = [
                    ("changed", super::ReleaseReset::Changed),
                    ("always", super::ReleaseReset::Always),
                ];
                self.release_reset = choice(key, v, &policies)?;
            }
            "guard" => {
                let modes = [
                    ("default", crate::guard::Mode::Default),
                    ("strict", crate::guard::Mode::Strict),
                ];
                self.guard = choice(key, v, &modes)?;
            }
            "guard_allow_functions" => {
                self.guard_allow_functions = v
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            _ => return Err(unknown(key)),
        }
        Ok(())
    }
}

/// The pairs of a keyword/value string that may hold only pgpipe's keywords; `what` names it
/// in errors.
pub(super) fn pgpipe_pairs(s: &str, what: &str) -> Result<Vec<(String, String)>, Error> {
    let pairs = super::keyword::split(s)?;
    for (k, _) in &pairs {
        if lookup(k).is_none() {
            return Err(unknown(k));
        }
        if !is_pgpipe(k) {
            return Err(bad(&format!(
                "{k:?} is a libpq keyword: it belongs in the connection string, not in {what} \
                 (which hold pgpipe's own options)"
            )));
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_own_keyword_reads_back_what_sets_it() {
        let base = Config::default();
        let mut n = 0;
        for key in pgpipe_keywords() {
            let value = base
                .pgpipe_option(key)
                .unwrap_or_else(|| panic!("{key} cannot be read"));
            let mut again = base.clone();
            again
                .set(key, &value)
                .unwrap_or_else(|e| panic!("{key}={value}: {e}"));
            assert_eq!(again, base, "{key}={value} changed the configuration");
            n += 1;
        }
        assert_eq!(n, 25);
        assert_eq!(base.pgpipe_option("sslmode"), None);
        assert_eq!(base.pgpipe_option("pipeline_size").as_deref(), Some("4"));
        assert_eq!(
            base.pgpipe_option("checkout_timeout_ms").as_deref(),
            Some("0")
        );
    }

    #[test]
    fn own_options_apply_apart_and_refuse_libpq_keywords() {
        let mut c = Config::default();
        c.apply_pgpipe_options("pipeline_size=8 trace_sql=on")
            .unwrap();
        assert_eq!((c.pipeline_size, c.trace_sql), (8, true));
        let e = c.apply_pgpipe_options("sslmode=require").unwrap_err();
        assert!(e.to_string().contains("libpq keyword"), "{e}");
        let e = c.apply_pgpipe_options("pipline_size=2").unwrap_err();
        assert!(
            e.to_string().contains("did you mean \"pipeline_size\""),
            "{e}"
        );
    }
}
