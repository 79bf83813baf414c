//! Network faults between the client and the server, made by the project's fault proxy: a
//! peer that goes silent while TCP still acknowledges (half-open), and a connection cut in the
//! middle of a message, a cancel storm, hostile length headers. Every unit must resolve with its own result or a typed error that the
//! server's table contents confirm, and the service must come back by itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use pgpipe::{Config, Error};
use pgpipe_tests::fake_server::{Bend, FakeServer, Script};
use pgpipe_tests::fault_proxy::FaultProxy;

use crate::{config, psql, wait_until, Db, Harness};

/// A proxy in front of the test server, and a client of it that `f` configures.
async fn through_proxy<H: Harness>(f: impl FnOnce(&mut Config)) -> (FaultProxy, Db<H>) {
    through_proxy_to::<H>(config(|_| {}), f).await
}

/// A proxy in front of the server `direct` names, and a client of it that `f` configures.
pub async fn through_proxy_to<H: Harness>(
    direct: Config,
    f: impl FnOnce(&mut Config),
) -> (FaultProxy, Db<H>) {
    let upstream = match direct.hostaddr {
        Some(ip) => SocketAddr::new(ip, direct.port),
        None => (direct.host.as_str(), direct.port)
            .to_socket_addrs()
            .expect("resolve the test server")
            .find(SocketAddr::is_ipv4)
            .expect("an IPv4 address for the test server"),
    };
    let proxy = FaultProxy::start(upstream).expect("start the fault proxy");
    let mut c = direct;
    c.port = proxy.addr().port();
    c.hostaddr = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    c.pipeline_size = 1;
    c.max_connections = 1;
    f(&mut c);
    let db = H::connect(c).await.expect("connect through the proxy");
    (proxy, db)
}

async fn backend_pid<H: Harness>(db: &Db<H>) -> i32 {
    db.query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0)
}

pub async fn a_half_open_connection_is_found_and_replaced<H: Harness>() {
    let (proxy, db) =
        through_proxy::<H>(|c| c.health_check = Some(Duration::from_millis(300))).await;
    let before = backend_pid::<H>(&db).await;
    // From now on the peer acknowledges every byte and answers none.
    proxy.stall();
    let tasks: Vec<_> = (0..8i64)
        .map(|i| {
            let db = db.clone();
            H::spawn(async move { db.query_one("SELECT $1::int8", &[&i]).await })
        })
        .collect();
    for t in tasks {
        match t.await {
            Err(Error::Indeterminate { reason }) => {
                assert!(reason.contains("half-open"), "{reason}")
            }
            other => panic!("a unit on a half-open connection: {other:?}"),
        }
    }
    // Replaced by a reconnect through a link that works.
    wait_until::<H>(|| db.live_connections() == 1).await;
    let after = backend_pid::<H>(&db).await;
    assert_ne!(before, after);
    let s = db.stats().total;
    assert_eq!(s.reconnects, 1, "{s:?}");
    assert_eq!(s.half_open, 1, "{s:?}");
    assert!(s.health_checks >= 1, "{s:?}");
    assert!(
        proxy.accepted() >= 3,
        "the connection, a check, the replacement"
    );
    db.close().await;
}

pub async fn a_server_blocked_on_a_frozen_peer_is_found<H: Harness>() {
    let (proxy, db) =
        through_proxy::<H>(|c| c.health_check = Some(Duration::from_millis(300))).await;
    let before = backend_pid::<H>(&db).await;
    // About 96 MB over two seconds: far more than the socket buffers hold once nobody reads.
    let big = {
        let db = db.clone();
        H::spawn(async move {
            db.query(
                "SELECT repeat(md5(g::text), 3000), pg_sleep(0.002) \
                 FROM generate_series(1, 1000) g",
                &[],
            )
            .await
            .map(|rows| rows.len())
        })
    };
    crate::wait_running::<H>(before, "generate_series").await;
    // Nobody reads any more: the server fills its buffers and waits in ClientWrite.
    proxy.freeze();
    match big.await {
        Err(Error::Indeterminate { reason }) => assert!(reason.contains("sending"), "{reason}"),
        other => panic!("a statement whose answer cannot arrive: {other:?}"),
    }
    wait_until::<H>(|| db.live_connections() == 1).await;
    assert_ne!(backend_pid::<H>(&db).await, before);
    db.close().await;
}

pub async fn a_long_statement_is_not_mistaken_for_a_dead_connection<H: Harness>() {
    let (_proxy, db) =
        through_proxy::<H>(|c| c.health_check = Some(Duration::from_millis(100))).await;
    let before = backend_pid::<H>(&db).await;
    // Silent for many check intervals, each check finds the backend active.
    let row = db
        .query_one("SELECT pg_sleep(1.2), $1::int8", &[&7i64])
        .await
        .expect("a long statement completes");
    assert_eq!(row.get::<_, i64>(1), 7);
    assert_eq!(
        backend_pid::<H>(&db).await,
        before,
        "the connection was kept"
    );
    let s = db.stats().total;
    assert_eq!(s.reconnects, 0);
    assert!(s.health_checks >= 1, "silent past the interval: {s:?}");
    assert_eq!(s.half_open, 0, "{s:?}");
    db.close().await;
}

pub async fn a_connection_cut_mid_message_fails_its_units_truthfully<H: Harness>() {
    let table = format!("cut_mid_message_{}", H::name());
    psql(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int8 PRIMARY KEY)"
    ));
    let (proxy, db) = through_proxy::<H>(|c| {
        c.retry_not_dispatched = false;
        c.max_in_flight = 32;
    })
    .await;
    let insert = format!("INSERT INTO {table} VALUES ($1) RETURNING id");
    db.query_one(&insert, &[&0i64]).await.expect("prepare");
    // A few units' answers get through, then the link ends inside a message.
    proxy.cut_after(301);
    let tasks: Vec<_> = (1..=200i64)
        .map(|id| {
            let db = db.clone();
            let insert = insert.clone();
            H::spawn(async move { (id, db.query_one(&insert, &[&id]).await) })
        })
        .collect();
    let (mut ok, mut sent, mut unsent) = (vec![0i64], vec![], vec![]);
    for t in tasks {
        match t.await {
            (id, Ok(row)) => {
                assert_eq!(row.get::<_, i64>(0), id, "a unit got another's row");
                ok.push(id);
            }
            (id, Err(Error::Indeterminate { .. })) => sent.push(id),
            // Submitted while the connection was down, or queued behind the cut: never sent.
            (id, Err(Error::NotDispatched { .. } | Error::NoConnection { .. })) => unsent.push(id),
            (id, Err(e)) => panic!("unit {id}: {e:?}"),
        }
    }
    eprintln!(
        "{}: ok={} indeterminate={} not_dispatched={}",
        H::name(),
        ok.len(),
        sent.len(),
        unsent.len()
    );
    assert!(ok.len() > 1 && !sent.is_empty(), "the cut fell mid-run");
    let stored: Vec<i64> = psql(&format!("SELECT id FROM {table} ORDER BY id"))
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    // What succeeded is stored; what was never sent is not; what was sent may be either.
    for id in &ok {
        assert!(stored.contains(id), "{id} succeeded but is not stored");
    }
    for id in &unsent {
        assert!(
            !stored.contains(id),
            "{id} was not dispatched but is stored"
        );
    }
    // The service comes back by itself.
    wait_until::<H>(|| db.live_connections() == 1).await;
    let row = db
        .query_one(&insert, &[&1000i64])
        .await
        .expect("reconnected");
    assert_eq!(row.get::<_, i64>(0), 1000);
    assert_eq!(db.stats().total.reconnects, 1);
    db.close().await;
    psql(&format!("DROP TABLE {table}"));
}

/// Runs `fut` unless `after` passes first (the caller then drops it mid-flight).
async fn or_drop_after<H: Harness, T>(
    after: Duration,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    futures_lite::future::or(async { Some(fut.await) }, async {
        H::sleep(after).await;
        None
    })
    .await
}

pub async fn a_cancel_storm_fails_only_the_cancelled<H: Harness>() {
    cancel_storm::<H>(config(|_| {}), |_| {}).await;
}

/// The storm against the server `direct` names (directly, or a pooler), through the counting
/// proxy; `f` adds settings.
pub async fn cancel_storm<H: Harness>(direct: Config, f: impl FnOnce(&mut Config)) {
    const MAX_CONNECTIONS: usize = 4;
    const PINNED: usize = 2;
    let (proxy, db) = through_proxy_to::<H>(direct, |c| {
        c.pipeline_size = 2;
        c.max_connections = MAX_CONNECTIONS;
        c.pinned_size = PINNED;
        f(c);
    })
    .await;
    // The shared path: every fifth statement is abandoned by its caller mid-flight.
    let shared: Vec<_> = (0..100i64)
        .map(|t| {
            let db = db.clone();
            H::spawn(async move {
                let (mut ok, mut dropped) = (0, 0);
                for q in 0..10i64 {
                    let n = t * 10 + q;
                    if n % 5 == 0 {
                        let params: [&(dyn postgres_types::ToSql + Sync); 1] = [&n];
                        let slow = db.query_one("SELECT pg_sleep(0.02), $1::int8", &params);
                        match or_drop_after::<H, _>(Duration::from_millis(2), slow).await {
                            None => dropped += 1,
                            Some(r) => assert_eq!(r.expect("slow").get::<_, i64>(1), n),
                        }
                    } else {
                        let row = db.query_one("SELECT $1::int8", &[&n]).await;
                        assert_eq!(
                            row.expect("a statement nobody cancelled").get::<_, i64>(0),
                            n
                        );
                        ok += 1;
                    }
                }
                (ok, dropped)
            })
        })
        .collect();
    // Sessions: every fifth holder abandons a long statement and releases the session, which
    // cancels it on the server.
    let sessions: Vec<_> = (0..20i64)
        .map(|t| {
            let db = db.clone();
            H::spawn(async move {
                let mut ok = 0;
                for q in 0..5i64 {
                    let n = t * 5 + q;
                    let s = db.session().await.expect("checkout");
                    if n % 5 == 0 {
                        let long = s.execute("SELECT pg_sleep(5)", &[]);
                        let done = or_drop_after::<H, _>(Duration::from_millis(5), long).await;
                        assert!(done.is_none(), "a 5 s statement finished in 5 ms");
                    } else {
                        let row = s.query_one("SELECT $1::int8", &[&n]).await;
                        assert_eq!(row.expect("a session statement").get::<_, i64>(0), n);
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let (mut ok, mut dropped) = (0, 0);
    for t in shared {
        let (o, d) = t.await;
        ok += o;
        dropped += d;
    }
    let mut session_ok = 0;
    for t in sessions {
        session_ok += t.await;
    }
    assert_eq!(ok, 800, "every statement nobody cancelled succeeded");
    assert_eq!(session_ok, 80);
    // Connections opened for sessions (not counting CancelRequests, which open none).
    let opened = proxy.accepted() - proxy.cancels();
    eprintln!(
        "{}: shared ok={ok} dropped={dropped}; sessions ok={session_ok}; connections opened={opened} cancels={}",
        H::name(),
        proxy.cancels()
    );
    assert!(
        opened <= 2 * (MAX_CONNECTIONS + PINNED),
        "connection churn: {opened} opened"
    );
    assert!(proxy.cancels() >= 1, "abandoned session work was cancelled");
    // Nothing left running on the server after the storm: the client still answers at once.
    let row = db
        .query_one("SELECT 1::int8", &[])
        .await
        .expect("after the storm");
    assert_eq!(row.get::<_, i64>(0), 1);
    db.close().await;
}

/// A server whose length headers claim gigabytes: the connection fails at the header with a
/// protocol error, not after waiting for (and reserving) the claimed bytes until the connect
/// timeout.
pub async fn impossible_message_lengths_fail_at_once<H: Harness>() {
    for (reply, needle) in [
        // An authentication request claiming ~2 GiB: a short type.
        (b"R\x7f\xff\xff\xf0".to_vec(), "never longer than 30000"),
        // An ErrorResponse (a type that may be long) claiming 4 GiB, over the cap.
        (b"E\xff\xff\xff\xf0".to_vec(), "max_message_size"),
    ] {
        // The reply comes where the server's authentication request would.
        let server = FakeServer::start(Script {
            startup: Bend::Stall(reply),
            ..Script::default()
        })
        .expect("fake server");
        let mut c = Config::parse(&server.conninfo("x")).unwrap();
        c.pipeline_size = 1;
        c.max_message_size = 1 << 20;
        // Far beyond the test's own limit: only the header check can end the attempt in time.
        c.connect_timeout = Duration::from_secs(600);
        match H::connect(c).await.map(|_| ()) {
            Err(Error::Protocol(msg)) => assert!(msg.contains(needle), "{msg}"),
            other => panic!("a hostile length header: {other:?}"),
        }
    }
}
