//! Spans and metrics (features `tracing` and `metrics`) against a real server: the names and
//! fields of OpenTelemetry's database conventions, their values for successes, server errors,
//! guard refusals and checkout timeouts, and gauges that return to rest. The collectors are
//! written here against the facades, so the test sees exactly what any exporter would.
//!
//! One test per process: the subscriber and the recorder are global.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata as SpanMeta, Subscriber};

/// A span as the collector saw it: its name and every field recorded on it.
#[derive(Debug, Clone, Default)]
struct SpanSeen {
    name: String,
    fields: BTreeMap<String, String>,
    meta: Option<&'static SpanMeta<'static>>,
}

thread_local! {
    /// The spans entered on this thread, innermost last: `Span::current()` as a real
    /// subscriber (tracing-subscriber's registry) tracks it.
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[derive(Default)]
struct Fields<'a>(Option<&'a mut BTreeMap<String, String>>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if let Some(map) = self.0.as_mut() {
            map.insert(field.name().to_owned(), format!("{value:?}"));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(map) = self.0.as_mut() {
            map.insert(field.name().to_owned(), value.to_owned());
        }
    }
}

/// An event as the collector saw it: its level, target and fields.
type EventSeen = (tracing::Level, String, BTreeMap<String, String>);

/// Collects spans (with their fields) and event messages.
#[derive(Default)]
struct Spans {
    spans: Mutex<Vec<SpanSeen>>,
    events: Mutex<Vec<String>>,
    /// Every event's level, target and fields.
    detailed: Mutex<Vec<EventSeen>>,
}

impl Subscriber for &'static Spans {
    fn enabled(&self, _: &SpanMeta<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut seen = SpanSeen {
            name: span.metadata().name().to_owned(),
            meta: Some(span.metadata()),
            ..SpanSeen::default()
        };
        span.record(&mut Fields(Some(&mut seen.fields)));
        let mut spans = self.spans.lock().unwrap();
        spans.push(seen);
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some(seen) = spans.get_mut(span.into_u64() as usize - 1) {
            values.record(&mut Fields(Some(&mut seen.fields)));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(Some(&mut fields)));
        if let Some(m) = fields.get("message") {
            self.events.lock().unwrap().push(m.clone());
        }
        let meta = event.metadata();
        self.detailed
            .lock()
            .unwrap()
            .push((*meta.level(), meta.target().to_owned(), fields));
    }
    fn enter(&self, id: &Id) {
        ENTERED.with(|e| e.borrow_mut().push(id.into_u64()));
    }
    fn exit(&self, id: &Id) {
        ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            if let Some(at) = e.iter().rposition(|&x| x == id.into_u64()) {
                e.remove(at);
            }
        });
    }
    fn current_span(&self) -> tracing_core::span::Current {
        let Some(id) = ENTERED.with(|e| e.borrow().last().copied()) else {
            return tracing_core::span::Current::none();
        };
        let spans = self.spans.lock().unwrap();
        match spans.get(id as usize - 1).and_then(|s| s.meta) {
            Some(meta) => tracing_core::span::Current::new(Id::from_u64(id), meta),
            None => tracing_core::span::Current::none(),
        }
    }
}

/// One metric's cell: counters and gauges as f64 bits, histograms as their sample count.
#[derive(Default)]
struct Cell(AtomicU64);

impl metrics::CounterFn for Cell {
    fn increment(&self, v: u64) {
        self.0.fetch_add(v, Relaxed);
    }
    fn absolute(&self, v: u64) {
        self.0.store(v, Relaxed);
    }
}

impl metrics::GaugeFn for Cell {
    fn increment(&self, v: f64) {
        let _ = self.0.fetch_update(Relaxed, Relaxed, |b| {
            Some((f64::from_bits(b) + v).to_bits())
        });
    }
    fn decrement(&self, v: f64) {
        metrics::GaugeFn::increment(self, -v);
    }
    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Relaxed);
    }
}

impl metrics::HistogramFn for Cell {
    fn record(&self, _: f64) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// Collects metrics by name and labels.
#[derive(Default)]
struct Metrics {
    cells: Mutex<BTreeMap<String, Arc<Cell>>>,
}

impl Metrics {
    fn cell(&self, key: &Key) -> Arc<Cell> {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        self.cells.lock().unwrap().entry(name).or_default().clone()
    }

    /// Every metric whose name and labels contain all of `parts`, with its raw value.
    fn find(&self, parts: &[&str]) -> Vec<(String, u64)> {
        self.cells
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| parts.iter().all(|p| k.contains(p)))
            .map(|(k, c)| (k.clone(), c.0.load(Relaxed)))
            .collect()
    }
}

impl Recorder for &'static Metrics {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.cell(key))
    }
}

fn gauge(m: &Metrics, parts: &[&str]) -> f64 {
    m.find(parts)
        .iter()
        .map(|(_, bits)| f64::from_bits(*bits))
        .sum()
}

fn count(m: &Metrics, parts: &[&str]) -> u64 {
    m.find(parts).iter().map(|(_, n)| n).sum()
}

#[test]
fn spans_and_metrics_follow_the_database_conventions() {
    let spans: &'static Spans = Box::leak(Box::default());
    let metrics: &'static Metrics = Box::leak(Box::default());
    tracing::subscriber::set_global_default(spans).expect("the only subscriber");
    metrics::set_global_recorder(metrics).expect("the only recorder");

    let url = pgpipe_tests::shared().url();
    smol::block_on(async {
        let mut config = pgpipe_smol::Config::parse(&url).expect("url");
        // A host list whose first server refuses at once: the spans must name the server the
        // statements ran on, not the first of the list.
        let served = pgpipe_smol::Server::new(config.host.clone(), config.port);
        config.other_hosts = vec![served];
        config.host = "127.0.0.1".into();
        config.hostaddr = None;
        config.port = 1;
        config.pipeline_size = 2;
        // One exclusive connection and no budget beyond: a second checkout waits.
        config.pinned_size = 1;
        config.max_connections = 2;
        config.trace_sql = true;
        config.checkout_timeout = Some(Duration::from_millis(50));
        let db = pgpipe_smol::connect_with(config).await.expect("connect");
        assert_eq!(
            gauge(metrics, &["db.client.connection.count{", "role=base"]),
            2.0
        );

        let row = db
            .query_one("SELECT $1::int4 + 1", &[&41i32])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 42);
        let e = db.query("SELECT 1 / $1::int4", &[&0i32]).await.unwrap_err();
        assert_eq!(e.code(), Some(&pgpipe_smol::SqlState::DIVISION_BY_ZERO));
        let refused = db.execute("SET work_mem = '1MB'", &[]).await.unwrap_err();
        assert!(matches!(refused, pgpipe_smol::Error::Refused(_)));
        {
            let s = db.session().await.unwrap();
            s.execute("SET work_mem = '1MB'", &[]).await.unwrap();
            // Another task waits for the only exclusive connection (this one would be refused
            // as a recursive checkout).
            let other = db.clone();
            let e = smol::spawn(async move { other.session().await.map(|_| ()) })
                .await
                .unwrap_err();
            assert!(matches!(e, pgpipe_smol::Error::CheckoutTimeout { .. }));
            assert_eq!(
                gauge(metrics, &["db.client.connection.count{", "role=exclusive"]),
                1.0
            );
        }
        db.close().await;
    });

    let seen = spans.spans.lock().unwrap().clone();
    let query = |text: &str| {
        seen.iter()
            .find(|s| s.fields.get("db.query.text").map(String::as_str) == Some(text))
            .unwrap_or_else(|| panic!("no span for {text}: {seen:#?}"))
    };
    let ok = query("SELECT $1::int4 + 1");
    assert_eq!(ok.name, "db.query");
    assert_eq!(ok.fields["db.system.name"], "postgresql");
    assert_eq!(ok.fields["db.operation.name"], "SELECT");
    assert_eq!(ok.fields["otel.kind"], "client");
    let served = pgpipe_smol::Config::parse(&pgpipe_tests::shared().url()).expect("url");
    assert_eq!(ok.fields["server.address"], served.host, "{ok:?}");
    assert_eq!(ok.fields["server.port"], served.port.to_string(), "{ok:?}");
    assert!(!ok.fields.contains_key("error.type"), "{ok:?}");
    let failed = query("SELECT 1 / $1::int4");
    assert_eq!(failed.fields["error.type"], "22012");
    assert_eq!(failed.fields["otel.status_code"], "ERROR");
    let session = query("SET work_mem = '1MB'");
    assert_eq!(session.fields["db.operation.name"], "SET");

    let events = spans.events.lock().unwrap().clone();
    for wanted in [
        "pgpipe: statement refused on the shared path",
        "pgpipe: checkout timed out",
    ] {
        assert!(events.iter().any(|e| e == wanted), "{wanted}: {events:?}");
    }

    // Four statements ran (two of them on the shared path failed or were refused), each with
    // one duration sample; the refused one is labelled with its error class.
    let samples = count(metrics, &["db.client.operation.duration{"]);
    assert_eq!(samples, 4, "{:?}", metrics.find(&["duration"]));
    assert_eq!(
        count(
            metrics,
            &["db.client.operation.duration{", "error.type=22012"]
        ),
        1
    );
    assert_eq!(count(metrics, &["pgpipe.guard.refusals"]), 1);
    assert_eq!(
        count(
            metrics,
            &["db.client.operation.duration{", "error.type=refused"]
        ),
        1
    );
    assert_eq!(count(metrics, &["db.client.connection.timeouts"]), 1);
    // At rest after close: nothing pending, no connection counted.
    assert_eq!(
        gauge(metrics, &["db.client.connection.pending_requests"]),
        0.0
    );
    assert_eq!(gauge(metrics, &["db.client.connection.count{"]), 0.0);

    // Notices are logged, at their severity's level, from a session and from the shared path.
    pgpipe_tests::shared()
        .psql(
            "CREATE OR REPLACE FUNCTION observe_notice() RETURNS int LANGUAGE plpgsql AS \
         $$ BEGIN RAISE NOTICE 'shared-path notice'; RETURN 1; END $$",
        )
        .expect("psql");
    smol::block_on(async {
        let db = pgpipe_smol::connect(&url).await.expect("connect");
        let s = db.session().await.unwrap();
        s.batch_execute(
            "DO $$ BEGIN RAISE WARNING 'session warning' USING DETAIL = 'some detail'; END $$",
        )
        .await
        .unwrap();
        assert_eq!(s.try_next_notice().unwrap().message(), "session warning");
        drop(s);
        db.execute("SELECT observe_notice()", &[]).await.unwrap();
        db.close().await;
    });
    let detailed = spans.detailed.lock().unwrap().clone();
    let notice = |message: &str| {
        detailed
            .iter()
            .find(|(_, _, f)| f.get("message").map(String::as_str) == Some(message))
            .unwrap_or_else(|| panic!("no event for {message}: {detailed:#?}"))
            .clone()
    };
    let (level, target, fields) = notice("session warning");
    assert_eq!(
        (level, target.as_str()),
        (tracing::Level::WARN, "pgpipe::notice")
    );
    assert_eq!(fields["db.response.status_code"], "01000");
    assert_eq!(fields["severity"], "WARNING");
    assert_eq!(fields["detail"], "some detail");
    let (level, _, fields) = notice("shared-path notice");
    assert_eq!(level, tracing::Level::INFO);
    assert_eq!(fields["db.response.status_code"], "00000");
}
