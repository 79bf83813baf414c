//! The conformance suite: every behaviour of the connection service written once, generic over
//! the runtime, and run on every adapter against a real PostgreSQL server.
//!
//! A behaviour is an `async fn name<H: Harness>()` in [`foundation`], [`service`] or
//! [`runtime`]. The [`suite!`] invocation at the bottom turns each (adapter, behaviour) pair
//! into one `#[test]`, named `<adapter>::<behaviour>` (`cargo test --test conformance tokio::`
//! runs one adapter). Every adapter gets the same tests; adding an adapter means one
//! [`Harness`] impl and one line in the invocation (see docs/RUNTIMES.md).
//!
//! The instances of one behaviour run in parallel against the same server, so anything a test
//! creates on the server (tables, functions, channels, application names, advisory-lock keys)
//! carries [`Harness::name`].

mod backpressure;
mod coalescing;
mod connecting;
mod copy;
mod extensions;
mod faults;
mod foundation;
mod giving_up;
mod ha;
mod hostile;
mod order;
mod pieces;
mod pooler;
mod prepare;
mod reconnect;
mod reset;
mod routing;
mod runtime;
mod service;
mod stream;
mod topology;
mod transactions;
mod types;
mod values;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use pgpipe::{Config, Error};
use pgpipe_tests::shared;

/// A boxed future that need not be `Send` (glommio's are not).
pub type Local<T> = Pin<Box<dyn Future<Output = T>>>;

/// The client type of harness `H`.
pub type Db<H> = pgpipe::Client<<H as Harness>::Rt>;

/// What the suite needs from one runtime: run a test body on a fresh runtime, spawn local tasks,
/// sleep on the runtime's timer, and connect a client through the adapter's own entry point.
pub trait Harness: 'static {
    /// The adapter's runtime type.
    type Rt: pgpipe::Adapter;

    /// Short name used in test paths and to keep server objects of parallel instances apart.
    fn name() -> &'static str;

    /// Runs the future made by `make` to completion on a fresh runtime owned by this call, on
    /// the calling thread or a thread of its own; a panic in the body fails the caller.
    fn run<F: Future<Output = ()> + 'static>(make: impl FnOnce() -> F + Send + 'static);

    /// Spawns a local task (no `Send` needed) on the running runtime. The returned future
    /// yields the task's output and re-raises its panic. Tests await everything they spawn.
    fn spawn<T: 'static>(f: impl Future<Output = T> + 'static) -> Local<T>;

    /// Sleeps on the runtime's timer.
    fn sleep(d: Duration) -> Local<()>;

    /// Connects through the adapter's public `connect_with`.
    fn connect(cfg: Config) -> Local<Result<Db<Self>, Error>>;
}

/// smol: test tasks on an `async_executor::LocalExecutor` driven by `smol::block_on`; the
/// adapter runs connection tasks on smol's global executor.
pub struct Smol;

thread_local! {
    /// The LocalExecutor of the smol test running on this thread (for [`Harness::spawn`]).
    static SMOL_EX: RefCell<Option<Rc<async_executor::LocalExecutor<'static>>>> =
        const { RefCell::new(None) };
}

impl Harness for Smol {
    type Rt = pgpipe_smol::SmolRuntime;

    fn name() -> &'static str {
        "smol"
    }

    fn run<F: Future<Output = ()> + 'static>(make: impl FnOnce() -> F + Send + 'static) {
        let ex = Rc::new(async_executor::LocalExecutor::new());
        SMOL_EX.with(|s| *s.borrow_mut() = Some(ex.clone()));
        // Cleared on unwind too, so a failed test leaves no executor behind on this thread.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                SMOL_EX.with(|s| s.borrow_mut().take());
            }
        }
        let _clear = Clear;
        ::smol::block_on(ex.run(make()));
    }

    fn spawn<T: 'static>(f: impl Future<Output = T> + 'static) -> Local<T> {
        let ex = SMOL_EX.with(|s| s.borrow().clone());
        let ex = ex.expect("Smol::spawn outside Smol::run");
        Box::pin(ex.spawn(f))
    }

    fn sleep(d: Duration) -> Local<()> {
        Box::pin(async move {
            async_io::Timer::after(d).await;
        })
    }

    fn connect(cfg: Config) -> Local<Result<Db<Self>, Error>> {
        Box::pin(pgpipe_smol::connect_with(cfg))
    }
}

/// tokio: a current-thread runtime with a `LocalSet`; the adapter captures that runtime.
pub struct Tokio;

impl Harness for Tokio {
    type Rt = pgpipe_tokio::TokioRuntime;

    fn name() -> &'static str {
        "tokio"
    }

    fn run<F: Future<Output = ()> + 'static>(make: impl FnOnce() -> F + Send + 'static) {
        let rt = ::tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio current-thread runtime");
        ::tokio::task::LocalSet::new().block_on(&rt, make());
    }

    fn spawn<T: 'static>(f: impl Future<Output = T> + 'static) -> Local<T> {
        let task = ::tokio::task::spawn_local(f);
        Box::pin(async move {
            match task.await {
                Ok(v) => v,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("tokio task failed: {e}"),
            }
        })
    }

    fn sleep(d: Duration) -> Local<()> {
        Box::pin(::tokio::time::sleep(d))
    }

    fn connect(cfg: Config) -> Local<Result<Db<Self>, Error>> {
        Box::pin(pgpipe_tokio::connect_with(cfg))
    }
}

/// tokio again, with every connection over TLS (`sslmode=verify-full`, host `localhost`, the
/// test CA): every behaviour must hold over TLS as it does in plaintext.
pub struct TokioTls;

impl Harness for TokioTls {
    type Rt = pgpipe_tokio::TokioRuntime;

    fn name() -> &'static str {
        "tokio_tls"
    }

    fn run<F: Future<Output = ()> + 'static>(make: impl FnOnce() -> F + Send + 'static) {
        Tokio::run(make)
    }

    fn spawn<T: 'static>(f: impl Future<Output = T> + 'static) -> Local<T> {
        Tokio::spawn(f)
    }

    fn sleep(d: Duration) -> Local<()> {
        Tokio::sleep(d)
    }

    fn connect(mut cfg: Config) -> Local<Result<Db<Self>, Error>> {
        let tls = shared()
            .tls()
            .expect("the TLS instance needs the harness's TLS cluster (PGPIPE_TEST_URL unset)");
        if cfg.host == "127.0.0.1" {
            cfg.host = "localhost".into();
        }
        cfg.tls.mode = pgpipe::SslMode::VerifyFull;
        cfg.tls.root_cert = Some(pgpipe::RootCert::File(tls.ca_cert().to_path_buf()));
        Box::pin(async move {
            let db = pgpipe_tokio::connect_with(cfg).await?;
            // A plaintext fallback would make this instance test nothing: check every time.
            let s = db.stats().total;
            assert!(
                s.tls_handshakes >= 1,
                "tokio_tls connected without TLS: {s:?}"
            );
            Ok(db)
        })
    }
}

/// glommio: a fresh `LocalExecutor` on its own thread; client and connection tasks stay on it.
pub struct Glommio;

impl Harness for Glommio {
    type Rt = pgpipe_glommio::GlommioRuntime;

    fn name() -> &'static str {
        "glommio"
    }

    fn run<F: Future<Output = ()> + 'static>(make: impl FnOnce() -> F + Send + 'static) {
        // No silent skip: without io_uring the glommio instances fail with the adapter's reason.
        if let Err(e) = pgpipe_glommio::check_io_uring() {
            panic!("{e}");
        }
        let joined = ::glommio::LocalExecutorBuilder::default()
            .name("conformance")
            .spawn(move || async move { make().await })
            .expect("glommio executor")
            .join();
        match joined {
            Ok(()) => {}
            Err(::glommio::GlommioError::BuilderError(
                ::glommio::BuilderErrorKind::ThreadPanic(p),
            )) => std::panic::resume_unwind(p),
            Err(e) => panic!("glommio executor failed: {e}"),
        }
    }

    fn spawn<T: 'static>(f: impl Future<Output = T> + 'static) -> Local<T> {
        Box::pin(::glommio::spawn_local(f))
    }

    fn sleep(d: Duration) -> Local<()> {
        Box::pin(::glommio::timer::sleep(d))
    }

    fn connect(cfg: Config) -> Local<Result<Db<Self>, Error>> {
        Box::pin(pgpipe_glommio::connect_with(cfg))
    }
}

/// Compile-time: the smol and tokio clients can be shared across threads; glommio's cannot
/// (its adapter has a `compile_fail` doctest for that).
#[allow(dead_code)]
fn clients_of_multi_threaded_runtimes_are_send_sync_clone() {
    fn check<T: Send + Sync + Clone>() {}
    check::<Db<Smol>>();
    check::<Db<Tokio>>();
}

/// Compile-time: each adapter names its runtime once; its handles are the core's on that runtime.
#[allow(dead_code)]
fn adapters_alias_the_core_handles() {
    fn same<T>(_: std::marker::PhantomData<T>, _: std::marker::PhantomData<T>) {}
    use std::marker::PhantomData as P;
    same(
        P::<pgpipe_smol::Session>,
        P::<pgpipe::Session<pgpipe_smol::SmolRuntime>>,
    );
    same(
        P::<pgpipe_tokio::Transaction>,
        P::<pgpipe::Transaction<pgpipe_tokio::TokioRuntime>>,
    );
    same(
        P::<pgpipe_glommio::Savepoint<'static>>,
        P::<pgpipe::Savepoint<'static, pgpipe_glommio::GlommioRuntime>>,
    );
}

thread_local! {
    /// The application name of the test running on this thread's runtime (`run_test`).
    static TEST_APP: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `body` on a fresh runtime of `H`, racing it against `limit` on the runtime's own timer
/// so that a hung behaviour fails instead of hanging CI. Its clients are named after it
/// (`application_name`, unless the test names them), and once it is done the server log must
/// hold no WARNING it has not seen before: pgpipe never makes a server warn (a ROLLBACK or
/// COMMIT outside a transaction). A warning a client logs after its test ended is reported
/// by the next test to finish; the line names the client.
fn run_test<H: Harness, F: Future<Output = ()> + 'static>(
    name: &'static str,
    limit: Duration,
    body: fn() -> F,
) {
    let app = format!("t:{}:{name}", H::name());
    H::run(move || async move {
        // Server names are at most 63 bytes (NAMEDATALEN).
        let app: String = app.chars().take(63).collect();
        TEST_APP.with(|t| *t.borrow_mut() = Some(app));
        futures_lite::future::or(body(), async move {
            H::sleep(limit).await;
            panic!("{}: test exceeded its {limit:?} limit", H::name());
        })
        .await
    });
    let warnings = shared().new_log_warnings();
    assert!(
        warnings.is_empty(),
        "the server logged warnings:\n{}",
        warnings.join("\n")
    );
}

/// The shared test database's settings, adjusted by `f`; clients are named after the test.
pub fn config(f: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::parse(&shared().url()).expect("test URL parses");
    if let Some(app) = TEST_APP.with(|t| t.borrow().clone()) {
        c.application_name = Some(app);
    }
    f(&mut c);
    c
}

/// A client of the shared test database through `H`'s adapter.
pub async fn client<H: Harness>(f: impl FnOnce(&mut Config)) -> Db<H> {
    H::connect(config(f)).await.expect("connect")
}

/// Runs SQL with psql, blocking the caller: for setup and checks while no client is busy.
pub fn psql(sql: &str) -> String {
    shared().psql(sql).expect("psql")
}

/// Runs SQL with psql on another thread while the runtime keeps serving its connections
/// (blocking a single-threaded runtime would freeze the clients under test).
pub async fn psql_async<H: Harness>(sql: &str) -> String {
    let (tx, rx) = mpsc::channel();
    let sql = sql.to_owned();
    thread::spawn(move || {
        let _ = tx.send(shared().psql(&sql));
    });
    loop {
        match rx.try_recv() {
            Ok(out) => return out.expect("psql"),
            Err(mpsc::TryRecvError::Empty) => H::sleep(Duration::from_millis(5)).await,
            Err(mpsc::TryRecvError::Disconnected) => panic!("psql thread panicked"),
        }
    }
}

/// Runs blocking `f` on a thread of its own while the runtime keeps serving, and returns its
/// result.
pub async fn off_thread<H: Harness, T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    loop {
        match rx.try_recv() {
            Ok(out) => return out,
            Err(mpsc::TryRecvError::Empty) => H::sleep(Duration::from_millis(5)).await,
            Err(mpsc::TryRecvError::Disconnected) => panic!("the blocking thread panicked"),
        }
    }
}

/// Waits until the server shows backend `pid` running a statement whose text contains `needle`:
/// synchronisation on the server's own view, not a guess of how long the client takes.
pub async fn wait_running<H: Harness>(pid: i32, needle: &str) {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = {pid} AND state = 'active' \
         AND position('{needle}' in query) > 0"
    );
    while psql_async::<H>(&sql).await.trim() != "1" {
        H::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls `cond` every 20 ms; a condition still false after [`WAIT_LIMIT`] panics naming the
/// caller's line, so a stalled test says which wait it stalled in (not only that its time ran
/// out).
#[track_caller]
pub fn wait_until<H: Harness>(cond: impl Fn() -> bool) -> impl std::future::Future<Output = ()> {
    let at = std::panic::Location::caller();
    async move {
        let started = std::time::Instant::now();
        while !cond() {
            assert!(
                started.elapsed() < WAIT_LIMIT,
                "{}: the condition waited for at {at} did not hold within {WAIT_LIMIT:?}",
                H::name()
            );
            H::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How long [`wait_until`] waits: well past any wait the suite's conditions need on a loaded
/// machine, and under every test's own limit.
pub const WAIT_LIMIT: Duration = Duration::from_secs(25);

/// A positive int4 derived from the adapter's name, for advisory-lock key spaces.
pub fn key<H: Harness>() -> i32 {
    let h = H::name()
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (h & 0x7fff_ffff) as i32
}

/// One `#[test]` per (adapter, behaviour): `suite! { adapters { m => H, .. } tests { .. } }`
/// with tests written as `module::behaviour: limit_in_seconds`.
macro_rules! suite {
    (adapters { $($m:ident => $h:ty),* $(,)? } tests $tests:tt) => {
        $( suite!(@adapter $m, $h, $tests); )*
    };
    (@adapter $m:ident, $h:ty, { $($module:ident :: $test:ident : $secs:expr),* $(,)? }) => {
        mod $m {
            $(
                #[test]
                fn $test() {
                    $crate::run_test::<$h, _>(
                        stringify!($test),
                        ::std::time::Duration::from_secs($secs),
                        $crate::$module::$test::<$h>,
                    );
                }
            )*
        }
    };
}

suite! {
    adapters {
        smol => crate::Smol,
        tokio => crate::Tokio,
        glommio => crate::Glommio,
        tokio_tls => crate::TokioTls,
    }
    tests {
        foundation::two_thousand_tasks_get_their_own_rows: 120,
        foundation::an_error_fails_only_its_own_unit: 60,
        foundation::server_errors_are_read_through_typed_accessors: 60,
        foundation::dropped_futures_do_not_desynchronize_the_connection: 60,
        foundation::query_timeout_returns_control_and_keeps_the_pipeline_in_order: 60,
        foundation::terminated_backend_fails_its_units_with_typed_errors: 60,
        foundation::never_sent_units_are_retried_on_another_connection: 60,
        foundation::bad_input_is_refused_before_anything_is_sent: 60,
        foundation::password_authentication_methods: 60,
        foundation::statement_cache_prepares_once_and_closes_on_eviction: 60,
        foundation::texts_churning_a_small_cache_all_complete: 60,
        foundation::typed_queries_take_one_round_trip_and_skip_the_cache: 60,
        foundation::close_drains_in_flight_work_then_refuses: 60,
        foundation::a_session_change_on_a_shared_connection_takes_it_out_of_service: 60,
        foundation::wakeups_never_run_inside_the_driver_tick: 60,
        coalescing::an_error_in_a_shared_sync_fails_only_its_own_unit: 120,
        coalescing::a_statement_with_effects_never_shares_a_sync: 120,
        coalescing::with_coalescing_off_every_unit_has_its_own_sync: 120,
        service::a_refused_statement_never_reaches_the_server: 60,
        service::session_state_never_leaks_to_the_shared_path_or_the_next_session: 120,
        service::concurrent_transfers_keep_the_total: 120,
        service::errors_and_drops_roll_back_and_the_connection_comes_back_clean: 60,
        service::a_checkout_that_would_wait_for_itself_is_refused: 30,
        service::listen_delivers_notifications_to_the_session: 30,
        service::notices_reach_their_holder_and_no_one_else: 60,
        order::statements_on_a_session_run_in_the_order_issued: 60,
        prepare::prepare_gives_types_without_running_the_statement: 60,
        prepare::simple_query_returns_every_statements_text_rows: 60,
        prepare::portals_fetch_a_query_a_number_of_rows_at_a_time: 60,
        prepare::simple_query_runs_on_the_shared_path_when_the_guard_admits_every_statement: 60,
        routing::a_slow_query_does_not_stall_callers_routed_elsewhere: 60,
        routing::fast_units_are_not_routed_behind_a_known_slow_one: 60,
        routing::slow_statements_get_lanes_that_retire_when_idle: 60,
        routing::slow_statements_spill_to_the_base_when_every_lane_has_a_queue: 60,
        routing::fast_units_wait_while_every_lane_has_a_queue: 60,
        backpressure::work_bound_connections_cap_in_flight_work_and_grow: 60,
        routing::a_server_at_its_connection_limit_still_runs_slow_statements: 60,
        backpressure::a_full_mailbox_makes_callers_wait_instead_of_growing: 60,
        giving_up::abort_fails_everything_at_once: 30,
        giving_up::commit_with_unknown_outcome_is_indeterminate_commit: 60,
        giving_up::abandoned_session_work_is_cancelled_within_a_bound: 60,
        giving_up::a_session_statement_is_cancelled_by_its_token_or_its_timeout: 60,
        giving_up::timeouts_free_resources: 60,
        service::release_keeps_cached_statements_and_nothing_else: 60,
        reset::release_rolls_back_only_open_transactions: 60,
        transactions::a_transaction_of_n_statements_takes_n_round_trips: 60,
        transactions::a_failed_begin_statement_or_commit_says_which: 60,
        transactions::checkouts_are_served_in_arrival_order: 60,
        transactions::looping_transactions_share_connections_fairly: 120,
        transactions::exclusive_connections_grow_within_the_budget_and_retire_when_idle: 60,
        transactions::release_resets_only_what_the_holder_may_have_changed: 60,
        transactions::batches_run_all_or_nothing_on_the_shared_path: 60,
        transactions::concurrent_batches_keep_the_total_among_shared_reads: 120,
        transactions::a_committing_transaction_hands_its_connection_on: 60,
        transactions::transaction_modes_ride_in_the_begin: 60,
        runtime::query_timeouts_fire_on_the_adapter_clock: 60,
        runtime::several_clients_in_one_process_serve_concurrently: 60,
        runtime::one_client_per_runtime_on_several_threads: 120,
        runtime::close_completes_every_accepted_unit: 60,
        types::custom_types_round_trip_and_are_looked_up_once: 60,
        types::a_type_created_again_is_looked_up_again: 60,
        stream::rows_stream_with_bounded_memory: 120,
        stream::rows_arrive_before_the_statement_ends: 60,
        stream::dropped_or_failed_streams_leave_the_connection_usable: 60,
        copy::copy_in_and_out_round_trip: 120,
        copy::abandoned_and_rejected_copies_leave_the_connection_usable: 60,
        copy::binary_copy_round_trips_typed_rows: 120,
        copy::copy_handles_are_sinks_and_streams: 120,
        values::every_representable_type_round_trips: 120,
        faults::a_half_open_connection_is_found_and_replaced: 60,
        faults::a_long_statement_is_not_mistaken_for_a_dead_connection: 60,
        faults::a_server_blocked_on_a_frozen_peer_is_found: 60,
        faults::a_connection_cut_mid_message_fails_its_units_truthfully: 60,
        faults::a_cancel_storm_fails_only_the_cancelled: 120,
    }
}

// Connecting is tested on each runtime's own sockets; the `tokio_tls` instance would force TLS.
suite! {
    adapters {
        connect_smol => crate::Smol,
        connect_tokio => crate::Tokio,
        connect_glommio => crate::Glommio,
    }
    tests {
        connecting::sslmode_matrix_matches_libpq: 240,
        connecting::channel_binding_matches_libpq: 120,
        connecting::certificate_checks_say_which_failed: 120,
        connecting::client_certificates_log_in: 60,
        connecting::unix_sockets_in_both_string_forms: 60,
        connecting::environment_and_password_file: 60,
        connecting::a_wrong_password_fails_once_and_stays_secret: 60,
        connecting::connection_errors_keep_their_cause: 60,
        connecting::require_auth_allows_only_the_methods_named: 60,
        faults::impossible_message_lengths_fail_at_once: 30,
        hostile::a_startup_cut_or_corrupted_at_every_byte_fails_typed: 120,
        hostile::a_pipelined_answer_cut_or_corrupted_at_every_byte_resolves_typed: 120,
        hostile::answers_that_contradict_the_protocol_fail_their_units_typed: 60,
        hostile::floods_of_notices_and_parameter_reports_are_bounded: 60,
        hostile::authentication_a_client_must_not_answer_sends_nothing: 60,
        reconnect::a_server_restart_fails_only_sent_units_and_service_resumes: 90,
        reconnect::a_connection_that_opens_calls_the_others_back_from_their_backoff: 60,
        reconnect::behind_haproxy_a_connection_that_opens_calls_the_others_back: 60,
        reconnect::terminated_backends_fail_only_sent_units: 90,
        reconnect::a_holder_whose_connection_died_before_its_first_statement_moves_on: 60,
        reconnect::units_wait_for_a_server_within_their_bounds: 90,
        extensions::extension_functions_are_refused_from_the_catalog: 90,
        extensions::every_contrib_volatile_function_is_classified: 120,
        topology::host_lists_are_tried_in_order_past_servers_that_are_down: 120,
        topology::load_balance_random_spreads_connections: 120,
        topology::every_target_session_attrs_value_picks_the_right_server: 180,
        topology::when_no_server_will_do_the_error_names_each_and_why: 120,
        topology::failover_follows_the_promoted_standby: 180,
        topology::a_promoted_standby_stops_serving_read_only_clients: 120,
        topology::reads_go_to_the_standby_and_wait_for_their_writes: 120,
        ha::patroni_failovers_through_haproxy_keep_every_outcome_truthful: 240,
        ha::patroni_failovers_through_a_host_list_keep_every_outcome_truthful: 240,
        pieces::answers_stay_with_their_callers_through_transaction_mode_pool_4: 300,
        pieces::answers_stay_with_their_callers_through_transaction_mode_pool_1: 300,
        pieces::answers_stay_with_their_callers_straight_to_the_server: 300,
        pieces::pipelining_through_pgbouncer_in_pieces_crosses_answers: 180,
        pooler::typed_queries_pipeline_through_transaction_mode: 120,
        pooler::unnamed_statements_pipeline_through_transaction_mode: 120,
        pooler::default_settings_find_the_pooler_by_themselves: 120,
        pooler::errors_mid_pipeline_fail_only_their_own_units_through_transaction_mode: 120,
        pooler::transactions_keep_the_total_through_transaction_mode: 120,
        pooler::sessions_keep_their_state_through_session_mode: 120,
        pooler::the_health_check_stands_down_behind_a_pooler: 60,
        pooler::no_lanes_or_overflow_open_behind_a_pooler: 60,
        pooler::units_behind_the_one_sync_open_more_clients_of_a_transaction_pooler: 60,
        pooler::a_cancel_storm_through_pgbouncer_fails_only_the_cancelled: 120,
        pooler::a_cancel_token_reaches_the_statement_through_pgbouncer: 120,
        pooler::prepared_statements_run_through_transaction_mode: 60,
        pooler::a_pgbouncer_restart_resolves_every_unit_and_service_resumes: 120,
        pooler::startup_settings_pgbouncer_does_not_track_are_refused_with_its_reason: 60,
    }
}
