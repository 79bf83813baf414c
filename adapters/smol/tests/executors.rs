//! The smol adapter on the executors an application may run: connection tasks on an
//! application-owned multi-threaded `Executor`, one Client shared by tasks on several threads,
//! and callers on a `LocalExecutor`.

use std::sync::Arc;
use std::time::Duration;

use async_executor::{Executor, LocalExecutor};
use pgpipe::Config;
use pgpipe_smol::SmolRuntime;

fn config() -> Config {
    let mut c = Config::from_url(&pgpipe_tests::shared().url()).expect("test URL parses");
    c.pipeline_size = 2;
    c
}

async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    futures_lite::future::or(fut, async {
        async_io::Timer::after(Duration::from_secs(60)).await;
        panic!("test exceeded 60 s");
    })
    .await
}

#[test]
fn one_client_from_many_threads_on_an_owned_executor() {
    let ex = Arc::new(Executor::new());
    let (stop, shutdown) = smol::channel::unbounded::<()>();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (ex, shutdown) = (ex.clone(), shutdown.clone());
            std::thread::spawn(move || futures_lite::future::block_on(ex.run(shutdown.recv())))
        })
        .collect();
    let threads_seen = futures_lite::future::block_on(bounded(async {
        let db = pgpipe::Client::connect(SmolRuntime::on(ex.clone()), config())
            .await
            .expect("connect");
        let tasks: Vec<_> = (0..600i64)
            .map(|i| {
                let db = db.clone();
                ex.spawn(async move {
                    let row = db
                        .query_one("SELECT $1::int8 + 1", &[&i])
                        .await
                        .expect("query");
                    assert_eq!(row.get::<_, i64>(0), i + 1);
                    std::thread::current().id()
                })
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        for t in tasks {
            seen.insert(t.await);
        }
        assert!(db.stats().total.ready_accounts_for_every_unit());
        db.close().await;
        seen.len()
    }));
    drop(stop);
    for t in threads {
        let _ = t.join();
    }
    assert!(threads_seen > 1, "callers ran on {threads_seen} thread(s)");
}

#[test]
fn callers_on_a_local_executor() {
    let local = LocalExecutor::new();
    futures_lite::future::block_on(local.run(bounded(async {
        let db = pgpipe_smol::connect_with(config()).await.expect("connect");
        // Futures that are not Send (an Rc inside) call the client from the local executor.
        let tasks: Vec<_> = (0..300i32)
            .map(|i| {
                let db = db.clone();
                let marker = std::rc::Rc::new(i);
                local.spawn(async move {
                    let row = db
                        .query_one("SELECT $1::int4", &[&*marker])
                        .await
                        .expect("query");
                    assert_eq!(row.get::<_, i32>(0), *marker);
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
        db.close().await;
    })));
}

#[test]
fn connection_tasks_on_a_local_executor() {
    let local = std::rc::Rc::new(LocalExecutor::new());
    futures_lite::future::block_on(local.run(bounded(async {
        let rt = pgpipe_smol::SmolLocalRuntime::on(local.clone());
        let db = pgpipe::Client::connect(rt, config())
            .await
            .expect("connect");
        let tasks: Vec<_> = (0..500i32)
            .map(|i| {
                let db = db.clone();
                local.spawn(async move {
                    let row = db.query_one("SELECT $1::int4", &[&i]).await.expect("query");
                    assert_eq!(row.get::<_, i32>(0), i);
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
        let s = db.stats().total;
        assert!(s.ready_accounts_for_every_unit());
        // Callers and drivers share the thread, so replies pile up between reads.
        assert!(s.units_per_readable() > 2.0, "{s:?}");
        db.close().await;
    })));
}
