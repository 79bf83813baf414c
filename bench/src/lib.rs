//! Support code for pgpipe's benchmarks.
//!
//! - [`backend`]: a small encoder of PostgreSQL *backend* (server → client) messages, for
//!   building realistic response streams that `pgpipe::internals::Pipeline::drain` can consume
//!   without a server.
//! - [`alloc`]: counting global allocators, so a benchmark binary can report allocations per
//!   operation next to time per operation ([`alloc::CountingAlloc`]), or the peak of live heap
//!   bytes of a measured run ([`alloc::TrackingAlloc`]).
//! - [`hot`]: fixtures of the sans-IO hot path (encode a unit, drain a batch, decode a row),
//!   shared by the criterion benchmarks and the instruction-count gate (`pgpipe-icount`).
//! - [`proxy`]: the delay proxy that simulates round-trip time for the side-by-side benchmark
//!   (`cargo run --release -p pgpipe-bench`, see `docs/BENCHMARKS.md`).
//! - [`sys`]: CPU-time readings (process, thread, whole machine) and `ppoll`, for that benchmark.
//!
//! # Why this crate contains `unsafe`
//!
//! [`alloc::CountingAlloc`] implements [`std::alloc::GlobalAlloc`], which is an `unsafe` trait:
//! implementing it at all requires `unsafe impl` and `unsafe fn`. The implementation only bumps
//! an atomic counter and delegates every call unchanged to [`std::alloc::System`], so it upholds
//! exactly the guarantees `System` does. [`sys`] calls a handful of libc functions (getrusage,
//! clock_gettime, ppoll, prctl) that std does not wrap. Those two modules are the only places
//! `unsafe` is allowed; the rest of the crate is checked by `#![deny(unsafe_code)]`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod hot;
pub mod proxy;
pub mod sys;

pub mod backend {
    //! Encoders for the backend messages a pipelined Execute unit receives.
    //!
    //! Every function appends one complete message (1-byte tag, 4-byte big-endian length that
    //! counts itself but not the tag, then the body) to `buf`, as the server would send it.

    use std::sync::Arc;

    use bytes::{BufMut, Bytes, BytesMut};
    use pgpipe::types::Type;
    use pgpipe::Column;

    /// Appends a message with the given tag and body.
    pub fn message(buf: &mut BytesMut, tag: u8, body: &[u8]) {
        let len = u32::try_from(body.len() + 4).expect("message body too long");
        buf.reserve(1 + 4 + body.len());
        buf.put_u8(tag);
        buf.put_u32(len);
        buf.put_slice(body);
    }

    /// Appends BindComplete (`'2'`, empty body).
    pub fn bind_complete(buf: &mut BytesMut) {
        message(buf, b'2', &[]);
    }

    /// Appends DataRow (`'D'`): a 16-bit column count, then per column a 32-bit length and the
    /// value bytes, or length -1 for `None` (SQL NULL). Values are sent as-is, so pass them in
    /// the binary format pgpipe requests (e.g. `&42i64.to_be_bytes()` for an `int8`).
    pub fn data_row(buf: &mut BytesMut, values: &[Option<&[u8]>]) {
        let start = buf.len();
        buf.put_u8(b'D');
        buf.put_u32(0); // patched below
        buf.put_slice(&data_row_body(values));
        let len = u32::try_from(buf.len() - start - 1).expect("DataRow too long");
        buf[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
    }

    /// The body of a DataRow (what follows its tag and length, starting at the 2-byte column
    /// count): the form `pgpipe::internals::row` takes.
    pub fn data_row_body(values: &[Option<&[u8]>]) -> Bytes {
        let count = u16::try_from(values.len()).expect("too many columns");
        let mut body = BytesMut::new();
        body.put_u16(count);
        for v in values {
            match v {
                Some(bytes) => {
                    body.put_i32(i32::try_from(bytes.len()).expect("value too long"));
                    body.put_slice(bytes);
                }
                None => body.put_i32(-1),
            }
        }
        body.freeze()
    }

    /// Appends CommandComplete (`'C'`) with a command tag such as `"SELECT 1"` (NUL-terminated
    /// on the wire).
    pub fn command_complete(buf: &mut BytesMut, tag: &str) {
        let mut body = Vec::with_capacity(tag.len() + 1);
        body.extend_from_slice(tag.as_bytes());
        body.push(0);
        message(buf, b'C', &body);
    }

    /// Appends ReadyForQuery (`'Z'`) with a transaction status: `b'I'` idle, `b'T'` in a
    /// transaction, `b'E'` in a failed transaction.
    pub fn ready_for_query(buf: &mut BytesMut, status: u8) {
        message(buf, b'Z', &[status]);
    }

    /// The result columns of `SELECT $1::int8 * 2, $2::text`, named as PostgreSQL names them.
    pub fn select_int8_text_columns() -> Arc<[Column]> {
        Arc::from(vec![
            pgpipe::internals::column("?column?".to_owned(), Type::INT8),
            pgpipe::internals::column("text".to_owned(), Type::TEXT),
        ])
    }

    /// The server's answer to one Execute unit of `SELECT $1::int8 * 2, $2::text` returning
    /// `(int8, text)`: BindComplete, one DataRow, CommandComplete `SELECT 1`, ReadyForQuery
    /// (idle).
    pub fn select_unit_response(buf: &mut BytesMut, int8: i64, text: &str) {
        bind_complete(buf);
        data_row(buf, &[Some(&int8.to_be_bytes()), Some(text.as_bytes())]);
        command_complete(buf, "SELECT 1");
        ready_for_query(buf, b'I');
    }
}

#[allow(unsafe_code)]
pub mod alloc {
    //! Global allocators that count allocations ([`CountingAlloc`]) or live heap bytes and
    //! their peak ([`TrackingAlloc`]).
    //!
    //! Install it in a benchmark binary:
    //!
    //! ```
    //! #[global_allocator]
    //! static ALLOC: pgpipe_bench::alloc::CountingAlloc = pgpipe_bench::alloc::CountingAlloc;
    //!
    //! fn main() {
    //!     let (allocs, v) = pgpipe_bench::alloc::count(|| vec![7u8; 64]);
    //!     assert_eq!(v.len(), 64);
    //!     assert!(allocs >= 1);
    //! }
    //! ```
    //!
    //! The counter is process-wide (every thread), so measure with no other threads allocating.
    //! Without the `#[global_allocator]` line the counter stays at 0.

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

    static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

    /// Delegates to [`System`] and counts every call that can hand out a new block: `alloc`,
    /// `alloc_zeroed` and `realloc` (a growing `Vec` shows up as its reallocations).
    /// Deallocations are not counted.
    pub struct CountingAlloc;

    // SAFETY: every method forwards its arguments unchanged to `System`, which implements
    // `GlobalAlloc` correctly; the only addition is a relaxed atomic increment, which neither
    // allocates nor touches the memory being managed.
    unsafe impl GlobalAlloc for CountingAlloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the caller's contract for `alloc` is passed through to `System`.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the caller's contract for `alloc_zeroed` is passed through to `System`.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`; the caller's
            // contract for `realloc` is passed through unchanged.
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    /// Allocations counted since the process started.
    pub fn allocations() -> u64 {
        ALLOCATIONS.load(Ordering::Relaxed)
    }

    /// Runs `f` and returns how many allocations it made, with its result.
    pub fn count<R>(f: impl FnOnce() -> R) -> (u64, R) {
        let before = allocations();
        let r = f();
        (allocations() - before, r)
    }

    static TRACKING: AtomicBool = AtomicBool::new(false);
    static LIVE: AtomicI64 = AtomicI64::new(0);
    static PEAK: AtomicI64 = AtomicI64::new(0);

    /// Delegates to [`System`] and, while [`track`] is on, keeps the bytes allocated and not yet
    /// freed (process-wide, every thread) and their peak. While tracking is off it costs one
    /// relaxed load per call, so installing it leaves measurements that do not use it alone.
    ///
    /// The figures are heap bytes requested through the global allocator (`Layout::size`):
    /// not the allocator's own overhead, not memory mapped directly (thread stacks, io_uring
    /// rings), not the kernel's socket buffers.
    ///
    /// ```
    /// use pgpipe_bench::alloc;
    ///
    /// #[global_allocator]
    /// static ALLOC: alloc::TrackingAlloc = alloc::TrackingAlloc;
    ///
    /// fn main() {
    ///     alloc::track(true);
    ///     let before = alloc::reset_peak();
    ///     let v = vec![1u8; 1 << 20];
    ///     assert!(alloc::live() - before >= 1 << 20);
    ///     drop(v);
    ///     assert!(alloc::live() - before < 1 << 20);
    ///     assert!(alloc::peak() - before >= 1 << 20);
    ///     alloc::track(false);
    /// }
    /// ```
    pub struct TrackingAlloc;

    fn grew(bytes: usize) {
        let now = LIVE.fetch_add(bytes as i64, Ordering::Relaxed) + bytes as i64;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }

    fn shrank(bytes: usize) {
        LIVE.fetch_sub(bytes as i64, Ordering::Relaxed);
    }

    // SAFETY: every method forwards its arguments unchanged to `System`, which implements
    // `GlobalAlloc` correctly; the only additions are relaxed atomic operations, which neither
    // allocate nor touch the memory being managed.
    unsafe impl GlobalAlloc for TrackingAlloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's contract for `alloc` is passed through to `System`.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() && TRACKING.load(Ordering::Relaxed) {
                grew(layout.size());
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's contract for `alloc_zeroed` is passed through to `System`.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() && TRACKING.load(Ordering::Relaxed) {
                grew(layout.size());
            }
            p
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`; the caller's
            // contract for `realloc` is passed through unchanged.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() && TRACKING.load(Ordering::Relaxed) {
                if new_size >= layout.size() {
                    grew(new_size - layout.size());
                } else {
                    shrank(layout.size() - new_size);
                }
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`.
            unsafe { System.dealloc(ptr, layout) };
            if TRACKING.load(Ordering::Relaxed) {
                shrank(layout.size());
            }
        }
    }

    /// Turns byte tracking of [`TrackingAlloc`] on (from zero live bytes and a zero peak) or
    /// off. Blocks allocated before tracking started and freed while it runs count negatively,
    /// so start it before the code under measurement allocates and while nothing else frees
    /// much.
    pub fn track(on: bool) {
        if on {
            LIVE.store(0, Ordering::Relaxed);
            PEAK.store(0, Ordering::Relaxed);
        }
        TRACKING.store(on, Ordering::Relaxed);
    }

    /// Bytes allocated since tracking started and not freed yet.
    pub fn live() -> i64 {
        LIVE.load(Ordering::Relaxed)
    }

    /// Starts a new peak at the current live bytes and returns them.
    pub fn reset_peak() -> i64 {
        let now = live();
        PEAK.store(now, Ordering::Relaxed);
        now
    }

    /// The most live bytes since tracking started or the last [`reset_peak`].
    pub fn peak() -> i64 {
        PEAK.load(Ordering::Relaxed).max(live())
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use pgpipe::internals::{Handler, Outcome, Pipeline, UnitKind};

    use super::backend;

    struct Collect(Vec<(u32, i64, String, u64)>);

    impl Handler<u32> for Collect {
        fn unit_done(&mut self, token: u32, outcome: Outcome) {
            match outcome {
                Outcome::Rows { rows, affected, .. } => {
                    assert_eq!(rows.len(), 1);
                    let n: i64 = rows[0].get(0);
                    let s: &str = rows[0].get(1);
                    self.0.push((token, n, s.to_owned(), affected));
                }
                other => panic!("unexpected outcome {other:?}"),
            }
        }
    }

    #[test]
    fn pipeline_accepts_encoded_stream() {
        let columns = backend::select_int8_text_columns();
        let mut buf = BytesMut::new();
        let mut pipeline = Pipeline::new();
        // Bind, Execute, Sync: what the answers are checked against.
        let sent = [&b"B\0\0\0\x04"[..], b"E\0\0\0\x04", b"S\0\0\0\x04"].concat();
        for i in 0..3u32 {
            backend::select_unit_response(&mut buf, i64::from(i) * 2, "hi");
            pipeline.push(i, UnitKind::Execute(columns.clone()), &sent);
        }
        let mut h = Collect(vec![]);
        assert_eq!(pipeline.drain(&mut buf, &mut h).unwrap(), 3);
        assert!(buf.is_empty() && pipeline.is_empty());
        let want: Vec<_> = (0..3u32)
            .map(|i| (i, i64::from(i) * 2, "hi".to_owned(), 1))
            .collect();
        assert_eq!(h.0, want);
    }

    #[test]
    fn data_row_body_decodes_with_null() {
        let columns = backend::select_int8_text_columns();
        let body = backend::data_row_body(&[Some(&7i64.to_be_bytes()), None]);
        let row = pgpipe::internals::row(columns, body).unwrap();
        assert_eq!(row.get::<_, i64>(0), 7);
        assert_eq!(row.get::<_, Option<&str>>(1), None);
    }
}
