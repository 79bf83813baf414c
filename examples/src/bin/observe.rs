//! Spans and metrics from pgpipe (features `tracing` and `metrics` of the adapter crate): a
//! few statements, a refused one and a failing one, with the spans printed by
//! `tracing-subscriber` as they close and the metrics snapshot printed at the end.
//!
//! ```text
//! cargo run -p pgpipe-examples --bin observe
//! ```
//! With `DATABASE_URL` it uses that server; otherwise it starts a throwaway PostgreSQL.

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tracing_subscriber::fmt::format::FmtSpan;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .init();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;

    let (_cluster, url) = pgpipe_examples::database();
    smol::block_on(async {
        let mut config = pgpipe_smol::Config::parse(&url)?;
        config.trace_sql = true;
        let db = pgpipe_smol::connect_with(config).await?;
        for i in 0..3i32 {
            db.query_one("SELECT $1::int4 * 2", &[&i]).await?;
        }
        let _ = db.query("SELECT 1 / $1::int4", &[&0i32]).await;
        let _ = db.execute("SET work_mem = '64MB'", &[]).await;
        let s = db.session().await?;
        s.execute("SET work_mem = '64MB'", &[]).await?;
        drop(s);
        db.close().await;
        Ok::<_, pgpipe_smol::Error>(())
    })?;

    println!("\nmetrics:");
    for (key, _unit, _desc, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let value = match value {
            DebugValue::Counter(n) => n.to_string(),
            DebugValue::Gauge(g) => g.into_inner().to_string(),
            DebugValue::Histogram(h) => {
                let total: f64 = h.iter().map(|v| v.into_inner()).sum();
                format!("{} samples, {:.3} ms total", h.len(), total * 1e3)
            }
        };
        println!(
            "  {kind:?} {} {{{}}} = {value}",
            key.name(),
            labels.join(", ")
        );
    }
    Ok(())
}
