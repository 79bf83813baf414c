//! Tracing and metrics, each behind its own feature (`tracing`, `metrics`), named after
//! OpenTelemetry's database semantic conventions. With a feature off its half of every function
//! here is compiled out: no clock read, no allocation, no call into a facade.
//!
//! Per operation (a statement of the public API, on the shared path or a session): a
//! `db.query` span (`db.system.name`, `db.namespace`, `db.operation.name`, `server.address`,
//! `server.port`, `error.type`; `db.query.text` only with `Config::trace_sql`), the
//! `db.client.operation.duration` histogram (seconds, on the runtime's clock) and the
//! `db.client.connection.pending_requests` gauge. Per connection: the
//! `db.client.connection.count` gauge by role, and events for connect, reconnect, loss, lane
//! and overflow opening, idle retirement, cancel, guard refusal and checkout timeout.

use std::future::Future;

use crate::rt::Runtime;
use crate::{Config, DbError, Error};

/// `db.system.name` of every span and metric.
#[cfg(any(feature = "tracing", feature = "metrics"))]
const SYSTEM: &str = "postgresql";

/// Runs one public operation (`sql` on the database `db` names) inside its span, and
/// records its duration and outcome.
///
/// With both features off this is `fut` itself. An `async fn` wrapper that only awaited `fut`
/// would still hold `fut`'s state twice (its argument, and the future it awaits) and copy it
/// on every call: on the shared path that is the caller's whole future, several KiB per
/// statement.
#[cfg(not(any(feature = "tracing", feature = "metrics")))]
pub(crate) fn operation<R: Runtime, T, F>(_rt: &R, _db: &Config, _sql: &str, fut: F) -> F
where
    F: Future<Output = Result<T, Error>>,
{
    fut
}

/// Runs one public operation (`sql` on the database `db` names) inside its span, and
/// records its duration and outcome.
#[cfg(any(feature = "tracing", feature = "metrics"))]
pub(crate) async fn operation<R: Runtime, T>(
    rt: &R,
    db: &Config,
    sql: &str,
    fut: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let name = operation_name(sql);
    #[cfg(feature = "metrics")]
    let started = {
        ::metrics::gauge!("db.client.connection.pending_requests", "db.system.name" => SYSTEM)
            .increment(1.0);
        rt.now()
    };
    #[cfg(not(feature = "metrics"))]
    let _ = rt;
    #[cfg(feature = "tracing")]
    let r = {
        let span = ::tracing::info_span!(
            "db.query",
            otel.kind = "client",
            db.system.name = SYSTEM,
            db.namespace = %db.dbname,
            db.operation.name = name,
            db.query.text = ::tracing::field::Empty,
            // Recorded when the unit is queued on a connection (`record_server`): with a host
            // list, the server it runs on need not be the first.
            server.address = ::tracing::field::Empty,
            server.port = ::tracing::field::Empty,
            error.type = ::tracing::field::Empty,
            otel.status_code = ::tracing::field::Empty,
        );
        if db.trace_sql {
            span.record("db.query.text", sql);
        }
        let r = ::tracing::Instrument::instrument(fut, span.clone()).await;
        if let Err(e) = &r {
            span.record("error.type", error_type(e));
            span.record("otel.status_code", "ERROR");
        }
        r
    };
    #[cfg(not(feature = "tracing"))]
    let r = {
        let _ = db;
        fut.await
    };
    #[cfg(feature = "metrics")]
    {
        let seconds = rt.now().saturating_duration_since(started).as_secs_f64();
        ::metrics::gauge!("db.client.connection.pending_requests", "db.system.name" => SYSTEM)
            .decrement(1.0);
        match &r {
            Ok(_) => ::metrics::histogram!(
                "db.client.operation.duration",
                "db.system.name" => SYSTEM,
                "db.operation.name" => name,
            )
            .record(seconds),
            Err(e) => ::metrics::histogram!(
                "db.client.operation.duration",
                "db.system.name" => SYSTEM,
                "db.operation.name" => name,
                "error.type" => error_type(e),
            )
            .record(seconds),
        }
    }
    r
}

/// Records the server of the connection a unit was just queued on in the current
/// operation's span (the `db.query` span is current while its future is polled).
#[cfg(feature = "tracing")]
pub(crate) fn record_server(server: Option<&(std::sync::Arc<str>, u16)>) {
    if let Some((host, port)) = server {
        let span = ::tracing::Span::current();
        span.record("server.address", &**host);
        span.record("server.port", *port);
    }
}

/// The statement's leading keyword, upper-cased when it is a common one (`db.operation.name`
/// must be low-cardinality: anything else is `OTHER`).
#[cfg(any(feature = "tracing", feature = "metrics", test))]
fn operation_name(sql: &str) -> &'static str {
    let word = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    const KNOWN: [&str; 14] = [
        "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "WITH", "VALUES", "CALL", "COPY", "BEGIN",
        "COMMIT", "ROLLBACK", "SET", "SHOW",
    ];
    KNOWN
        .into_iter()
        .find(|k| k.eq_ignore_ascii_case(word))
        .unwrap_or("OTHER")
}

/// `error.type`: the error's class, low-cardinality (a SQLSTATE for server errors).
#[cfg(any(feature = "tracing", feature = "metrics"))]
fn error_type(e: &Error) -> String {
    match e {
        Error::Db(db) => db.code().to_string(),
        Error::Timeout => "timeout".into(),
        Error::Refused(_) => "refused".into(),
        Error::NotDispatched { .. } => "not_dispatched".into(),
        Error::Indeterminate { .. } | Error::IndeterminateCommit { .. } => "indeterminate".into(),
        other => format!("{:?}", other.kind()).to_lowercase(),
    }
}

/// A NoticeResponse (`RAISE NOTICE`, the server's own warnings): an event at the level its
/// severity maps to (WARNING: warn; NOTICE, INFO, LOG: info; DEBUG: debug), with its SQLSTATE,
/// severity, message, detail and hint as fields.
pub(crate) fn notice(n: &DbError) {
    macro_rules! event {
        ($level:expr) => {
            ::tracing::event!(
                target: "pgpipe::notice",
                $level,
                db.response.status_code = n.code().as_str(),
                severity = n.severity(),
                detail = n.detail(),
                hint = n.hint(),
                "{}",
                n.message()
            )
        };
    }
    match n.severity() {
        "WARNING" => event!(::tracing::Level::WARN),
        s if s.starts_with("DEBUG") => event!(::tracing::Level::DEBUG),
        _ => event!(::tracing::Level::INFO),
    }
}

/// A connection started or stopped serving.
pub(crate) fn connection_open(role: &'static str, open: bool) {
    #[cfg(feature = "metrics")]
    {
        let g = ::metrics::gauge!(
            "db.client.connection.count",
            "db.system.name" => SYSTEM,
            "pgpipe.connection.role" => role,
        );
        if open {
            g.increment(1.0);
        } else {
            g.decrement(1.0);
        }
    }
    #[cfg(feature = "tracing")]
    match open {
        true => ::tracing::debug!(role, "pgpipe: connection serving"),
        false => ::tracing::debug!(role, "pgpipe: connection stopped serving"),
    }
    let _ = (role, open);
}

/// A shared connection that died serves again.
pub(crate) fn reconnected(role: &'static str) {
    #[cfg(feature = "tracing")]
    ::tracing::info!(role, "pgpipe: connection reconnected");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("pgpipe.connection.reconnects", "pgpipe.connection.role" => role)
        .increment(1);
    let _ = role;
}

/// A connection died with `reason`.
pub(crate) fn connection_lost(role: &'static str, reason: &str) {
    #[cfg(feature = "tracing")]
    ::tracing::warn!(role, reason, "pgpipe: connection lost");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("pgpipe.connection.failures", "pgpipe.connection.role" => role)
        .increment(1);
    let _ = (role, reason);
}

/// An on-demand connection (`role`: lane or overflow) is being opened.
pub(crate) fn on_demand_opened(role: &'static str) {
    #[cfg(feature = "tracing")]
    ::tracing::info!(role, "pgpipe: on-demand connection opening");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("pgpipe.connection.opened_on_demand", "pgpipe.connection.role" => role)
        .increment(1);
    let _ = role;
}

/// A unit found the base connections work-bound, but no overflow connection opened: the
/// machine had no CPU to spare (`Config::spare_cpu_pct`).
pub(crate) fn overflow_held() {
    #[cfg(feature = "tracing")]
    ::tracing::debug!("pgpipe: overflow connection held back: no spare CPU");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("pgpipe.connection.overflow_held").increment(1);
}

/// `n` server-time samples far above their estimates were discounted: the machine had no CPU
/// to spare (`Config::spare_cpu_pct`), so the time may have been a wait for one.
pub(crate) fn samples_discounted_busy_cpu(n: u64) {
    #[cfg(feature = "tracing")]
    ::tracing::trace!(n, "pgpipe: samples discounted: no spare CPU");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("pgpipe.estimate.samples_discounted").increment(n);
    let _ = n;
}

/// An on-demand connection retires after sitting idle.
pub(crate) fn retired(role: &'static str) {
    #[cfg(feature = "tracing")]
    ::tracing::info!(role, "pgpipe: idle connection retired");
    let _ = role;
}

/// A CancelRequest goes out for work abandoned on an exclusive connection.
pub(crate) fn cancel_sent() {
    #[cfg(feature = "tracing")]
    ::tracing::info!("pgpipe: cancel request sent for abandoned work");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("pgpipe.cancels").increment(1);
}

/// A prepared statement vanished between its prepare and its use: a transaction pooler is in
/// between, and the client stopped keeping statements by name.
pub(crate) fn pooler_detected() {
    #[cfg(feature = "tracing")]
    ::tracing::warn!(
        "pgpipe: a prepared statement vanished (a transaction-mode pooler?); \
         statements are no longer kept by name (set named_statements=off to start so)"
    );
}

/// A connection's probe found a pooler between the client and the server (the backend it
/// reaches is not the one its startup named): pipelines through it stay within
/// 16 KiB of requests in flight, and no lanes or overflow connections open.
pub(crate) fn pooler_in_between() {
    #[cfg(feature = "tracing")]
    ::tracing::info!(
        "pgpipe: a pooler stands between the client and the server; \
         each connection keeps at most 16 KiB of requests in flight through it, \
         and no lanes or overflow connections open"
    );
}

/// The guard refused a statement on the shared path (the rule only: the statement's text is
/// in the operation's span when `trace_sql` allows it).
pub(crate) fn refused(reason: &dyn std::fmt::Display) {
    #[cfg(feature = "tracing")]
    ::tracing::info!(rule = %reason, "pgpipe: statement refused on the shared path");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("pgpipe.guard.refusals").increment(1);
    let _ = reason;
}

/// `session()` / `transaction()` gave up waiting for an exclusive connection.
pub(crate) fn checkout_timed_out(e: &Error) {
    #[cfg(feature = "tracing")]
    ::tracing::warn!(error = %e, "pgpipe: checkout timed out");
    #[cfg(feature = "metrics")]
    ::metrics::counter!("db.client.connection.timeouts", "db.system.name" => SYSTEM).increment(1);
    let _ = e;
}

#[cfg(test)]
mod tests {
    use super::operation_name;

    #[test]
    fn operation_names_are_low_cardinality() {
        assert_eq!(operation_name("select 1"), "SELECT");
        assert_eq!(operation_name("  (SELECT 1) UNION SELECT 2"), "SELECT");
        assert_eq!(operation_name("INSERT INTO t VALUES (1)"), "INSERT");
        assert_eq!(
            operation_name("with x as (select 1) select * from x"),
            "WITH"
        );
        assert_eq!(operation_name("VACUUM t"), "OTHER");
        assert_eq!(operation_name(""), "OTHER");
    }
}
