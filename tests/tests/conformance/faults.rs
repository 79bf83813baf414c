//! Network faults between the client and the server, made by the project's fault proxy: a
//! peer that goes silent while TCP still acknowledges (half-open), and a connection cut in the
//! middle of a message. Every unit must resolve with its own result or a typed error that the
//! server's table contents confirm, and the service must come back by itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use pgpipe::{Config, Error};
use pgpipe_tests::fault_proxy::FaultProxy;

use crate::{client, config, psql, wait_until, Db, Harness};

/// A proxy in front of the test server, and a client of it that `f` configures.
async fn through_proxy<H: Harness>(f: impl FnOnce(&mut Config)) -> (FaultProxy, Db<H>) {
    let direct = config(|_| {});
    let upstream = match direct.hostaddr {
        Some(ip) => SocketAddr::new(ip, direct.port),
        None => (direct.host.as_str(), direct.port)
            .to_socket_addrs()
            .expect("resolve the test server")
            .find(SocketAddr::is_ipv4)
            .expect("an IPv4 address for the test server"),
    };
    let proxy = FaultProxy::start(upstream).expect("start the fault proxy");
    let port = proxy.addr().port();
    let db = client::<H>(|c| {
        c.port = port;
        c.hostaddr = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        c.pipeline_size = 1;
        c.max_connections = 1;
        f(c);
    })
    .await;
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
    assert!(
        proxy.accepted() >= 3,
        "the connection, a check, the replacement"
    );
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
    assert_eq!(db.stats().total.reconnects, 0);
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
