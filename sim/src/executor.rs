//! A single-threaded executor with a virtual clock and a seeded scheduler.
//!
//! Ready tasks are polled in an order drawn from the seed; when none is ready the clock jumps to
//! the earliest timer. Nothing here reads the wall clock (the base `Instant` is only an origin:
//! every decision uses differences from it) and nothing starts a thread.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use pgpipe::rt::{Runtime, Spawn, Target};

use crate::net::{self, SimSocket};
use crate::rng::Rng;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Task ids woken since the scheduler last looked. Wakers must be `Send + Sync`, so this is
/// the one piece behind a mutex (never contended: there is one thread).
#[derive(Default)]
struct Woken(Mutex<Vec<usize>>);

struct TaskWaker {
    id: usize,
    woken: Arc<Woken>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.0.lock().expect("one thread").push(self.id);
    }
}

/// Executor state shared by every handle.
pub(crate) struct State {
    origin: Instant,
    elapsed: Duration,
    /// Pending timers by deadline; the second key makes each registration unique.
    timers: BTreeMap<(Duration, u64), Waker>,
    next_timer: u64,
    tasks: Vec<Option<Task>>,
    /// The future type of each live task, for diagnostics.
    names: Vec<&'static str>,
    free: Vec<usize>,
    live: usize,
    /// Highest number of live tasks seen (the memory bound checks it).
    pub(crate) peak_tasks: usize,
    spawned: Vec<(usize, Task)>,
    pub(crate) rng: Rng,
    /// Fault settings and the server, used by `connect`.
    pub(crate) net: net::Net,
    /// Order of polls, folded into the trace hash.
    pub(crate) trace: u64,
    /// Print events (`PGPIPE_SIM_LOG` set): for diagnosing one seed.
    verbose: bool,
}

/// A handle to the simulated runtime: pgpipe's [`Runtime`] and [`Spawn`].
#[derive(Clone)]
pub struct Sim {
    pub(crate) st: Rc<RefCell<State>>,
    woken: Arc<Woken>,
}

/// How a run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// No task is left.
    Quiescent,
    /// Tasks remain but none is ready and no timer is pending: they wait forever.
    Deadlock(usize),
    /// The virtual clock passed the bound.
    TimeLimit,
    /// Too many polls (a live-lock).
    StepLimit,
}

impl Sim {
    /// An executor whose choices all come from `seed`.
    pub fn new(seed: u64, net: net::Net) -> Sim {
        Sim {
            st: Rc::new(RefCell::new(State {
                // Only an origin: virtual time is `origin + elapsed`.
                origin: Instant::now(),
                elapsed: Duration::ZERO,
                timers: BTreeMap::new(),
                next_timer: 0,
                tasks: Vec::new(),
                names: Vec::new(),
                free: Vec::new(),
                live: 0,
                peak_tasks: 0,
                spawned: Vec::new(),
                rng: Rng::new(seed),
                net,
                trace: 0,
                verbose: std::env::var_os("PGPIPE_SIM_LOG").is_some(),
            })),
            woken: Arc::default(),
        }
    }

    /// Prints an event with its virtual time when `PGPIPE_SIM_LOG` is set.
    pub fn log(&self, what: impl FnOnce() -> String) {
        let st = self.st.borrow();
        if st.verbose {
            eprintln!("[{:>12?}] {}", st.elapsed, what());
        }
    }

    /// Virtual time since the start.
    pub fn elapsed(&self) -> Duration {
        self.st.borrow().elapsed
    }

    /// Tasks alive now.
    pub fn live_tasks(&self) -> usize {
        self.st.borrow().live
    }

    /// The kinds of the tasks alive now (their future types, shortened).
    pub fn live_names(&self) -> Vec<&'static str> {
        let st = self.st.borrow();
        st.names.iter().copied().filter(|n| !n.is_empty()).collect()
    }

    /// A seeded draw in `0..n` (n > 0).
    pub fn below(&self, n: u64) -> u64 {
        self.st.borrow_mut().rng.below(n)
    }

    /// Spawns a task (any `'static` future; this runtime is single-threaded).
    pub fn spawn_task(&self, fut: impl Future<Output = ()> + 'static) {
        let mut st = self.st.borrow_mut();
        // Registered after the current poll returns, so a spawn inside a poll is safe.
        let id = match st.free.pop() {
            Some(id) => id,
            None => {
                st.tasks.push(None);
                st.names.push("");
                st.tasks.len() - 1
            }
        };
        st.names[id] = short_name(std::any::type_name_of_val(&fut));
        st.live += 1;
        st.peak_tasks = st.peak_tasks.max(st.live);
        st.spawned.push((id, Box::pin(fut)));
        drop(st);
        self.woken.0.lock().expect("one thread").push(id);
    }

    /// Runs until no task is left, the virtual clock passes `limit`, or `max_steps` polls.
    pub fn run(&self, limit: Duration, max_steps: u64) -> End {
        let mut ready = BTreeSet::new();
        let mut steps = 0u64;
        loop {
            {
                let mut st = self.st.borrow_mut();
                for (id, task) in std::mem::take(&mut st.spawned) {
                    st.tasks[id] = Some(task);
                }
            }
            ready.extend(self.woken.0.lock().expect("one thread").drain(..));
            if ready.is_empty() {
                let mut st = self.st.borrow_mut();
                if st.live == 0 {
                    return End::Quiescent;
                }
                let Some((&(at, _), _)) = st.timers.first_key_value() else {
                    return End::Deadlock(st.live);
                };
                if at > limit {
                    return End::TimeLimit;
                }
                st.elapsed = st.elapsed.max(at);
                let now = st.elapsed;
                let rest = st.timers.split_off(&(now, u64::MAX));
                let due = std::mem::replace(&mut st.timers, rest);
                drop(st);
                for (_, w) in due {
                    w.wake();
                }
                continue;
            }
            steps += 1;
            if steps > max_steps {
                return End::StepLimit;
            }
            // The seeded choice of which ready task runs next.
            let pick = self.st.borrow_mut().rng.below(ready.len() as u64) as usize;
            let id = *ready.iter().nth(pick).expect("in range");
            ready.remove(&id);
            let task = {
                let mut st = self.st.borrow_mut();
                st.trace = crate::rng::mix(st.trace ^ id as u64);
                st.tasks.get_mut(id).and_then(Option::take)
            };
            // A wake for a finished task (or one already being polled) is stale.
            let Some(mut task) = task else { continue };
            let waker = Waker::from(Arc::new(TaskWaker {
                id,
                woken: self.woken.clone(),
            }));
            let done = task
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready();
            let mut st = self.st.borrow_mut();
            if done {
                st.names[id] = "";
                st.live -= 1;
                st.free.push(id);
                drop(st);
                // Dropped outside the borrow: a task's drop may touch the executor.
                drop(task);
                // A wake that raced the end must not reach a reused id.
                ready.remove(&id);
            } else {
                st.tasks[id] = Some(task);
            }
        }
    }

    /// Drops every task and timer left, outside any borrow: tasks hold handles to the executor,
    /// so this breaks the reference cycle at the end of a run.
    pub fn clear(&self) {
        let (tasks, spawned, timers) = {
            let mut st = self.st.borrow_mut();
            st.live = 0;
            (
                std::mem::take(&mut st.tasks),
                std::mem::take(&mut st.spawned),
                std::mem::take(&mut st.timers),
            )
        };
        drop(tasks);
        drop(spawned);
        drop(timers);
        self.woken.0.lock().expect("one thread").clear();
    }

    /// Registers a timer; returns its key.
    fn add_timer(&self, at: Duration, waker: Waker) -> (Duration, u64) {
        let mut st = self.st.borrow_mut();
        st.next_timer += 1;
        let key = (at, st.next_timer);
        st.timers.insert(key, waker);
        key
    }

    /// Virtual time of an `Instant` from this runtime.
    pub(crate) fn offset(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.st.borrow().origin)
    }

    /// A timer `d` from now.
    pub fn sleep(&self, d: Duration) -> Sleep {
        let now = self.now();
        self.sleep_until(now + d)
    }
}

/// A timer of the virtual clock.
pub struct Sleep {
    sim: Sim,
    at: Duration,
    key: Option<(Duration, u64)>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.sim.elapsed() >= self.at {
            if let Some(k) = self.key.take() {
                self.sim.st.borrow_mut().timers.remove(&k);
            }
            return Poll::Ready(());
        }
        if let Some(k) = self.key.take() {
            self.sim.st.borrow_mut().timers.remove(&k);
        }
        let key = self.sim.add_timer(self.at, cx.waker().clone());
        self.key = Some(key);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            if let Ok(mut st) = self.sim.st.try_borrow_mut() {
                st.timers.remove(&k);
            }
        }
    }
}

impl Runtime for Sim {
    type Socket = SimSocket;
    type Sleep = Sleep;
    type Connect = Pin<Box<dyn Future<Output = io::Result<SimSocket>>>>;

    fn connect(&self, _target: &Target) -> Self::Connect {
        Box::pin(net::connect(self.clone()))
    }

    fn now(&self) -> Instant {
        let st = self.st.borrow();
        st.origin + st.elapsed
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep {
            at: self.offset(deadline),
            sim: self.clone(),
            key: None,
        }
    }

    /// The real machine's counters would make a seed's run depend on the machine: none.
    fn cpu_sample(&self) -> Option<pgpipe::rt::CpuSample> {
        None
    }
}

impl<F: Future<Output = ()> + 'static> Spawn<F> for Sim {
    fn spawn(&self, fut: F) {
        self.spawn_task(fut);
    }
}

/// The last path segment of a future's type name (`serve::{{closure}}` rather than the path).
fn short_name(full: &'static str) -> &'static str {
    let head = full.split('<').next().unwrap_or(full);
    let trimmed = head.trim_end_matches("::{{closure}}");
    match trimmed.rfind("::") {
        Some(i) => &head[i + 2..],
        None => head,
    }
}
