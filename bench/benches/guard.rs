//! Cost of the session-neutrality guard: a verdict-cache hit, an uncached check on the fast
//! path (nothing to mask), an uncached check that must mask, for a typical ~100-byte
//! parameterized statement and a 4 KiB one, and an uncached ORM-style statement (quoted,
//! schema-qualified names: many dots and quotes). Allocations per check are printed first:
//!
//! ```text
//! BENCH_ALLOCS bench=guard_hit_100 per_op=0.0000 allocs=0 ops=100000
//! ```
//!
//! Run: `cargo bench -p pgpipe-bench --bench guard`.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use pgpipe::guard::{Guard, Mode};
use pgpipe_bench::alloc;

#[global_allocator]
static ALLOC: alloc::CountingAlloc = alloc::CountingAlloc;

/// A typical parameterized point query (no quotes or comments: the fast path applies).
const PLAIN_100: &str =
    "SELECT a.aid, a.abalance, a.filler FROM pgbench_accounts a WHERE a.aid = $1 AND a.bid = $2 LIMIT 1";
/// The same length with a string literal and a comment, so masking runs.
const MASKED_100: &str =
    "SELECT a.aid, 'it''s' AS t FROM pgbench_accounts a /* by id */ WHERE a.aid = $1 AND a.bid = $2";

/// A Prisma-style statement: quoted, schema-qualified names, so many dots and masked quotes.
const ORM_170: &str = r#"SELECT "public"."User"."id", "public"."User"."email", "public"."User"."name" FROM "public"."User" WHERE ("public"."User"."email" = $1 AND 1=1) LIMIT $2 OFFSET $3"#;

fn long(masked: bool) -> String {
    let mut s = String::from("SELECT x FROM t WHERE id IN (");
    let mut i = 0;
    while s.len() < 4096 {
        if masked && i % 8 == 0 {
            s.push_str(&format!("'v{i}', "));
        } else {
            s.push_str(&format!("${}, ", i + 1));
        }
        i += 1;
    }
    s.push_str("0)");
    s
}

/// Distinct texts so every check misses the cache: the same statement with a changing
/// trailing number, which keeps the length and the masking work the same.
fn variants(base: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{base} -- {i:06}")).collect()
}

fn variants_plain(base: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{base} + {i:06}")).collect()
}

fn allocs_per_check(name: &str, guard: &Guard, texts: &[String]) {
    for t in texts.iter().take(100) {
        let _ = guard.check(t);
    }
    let ops = texts.len() as u64;
    let (allocs, ()) = alloc::count(|| {
        for t in texts {
            let _ = black_box(guard.check(black_box(t)));
        }
    });
    println!(
        "BENCH_ALLOCS bench={name} per_op={:.4} allocs={allocs} ops={ops}",
        allocs as f64 / ops as f64
    );
}

fn main() {
    let n = 100_000;
    // Cache hits: one text, checked repeatedly.
    let hit_guard = Guard::new(Mode::Default);
    let hits: Vec<String> = vec![PLAIN_100.to_owned(); n];
    allocs_per_check("guard_hit_100", &hit_guard, &hits);
    // Misses: a cache of one entry and distinct texts, so each check is computed.
    let fast = variants_plain(PLAIN_100, n);
    let masked = variants(MASKED_100, n);
    allocs_per_check(
        "guard_uncached_fast_100",
        &Guard::with_cache_capacity(Mode::Default, 1),
        &fast,
    );
    allocs_per_check(
        "guard_uncached_masked_100",
        &Guard::with_cache_capacity(Mode::Default, 1),
        &masked,
    );

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut g = c.benchmark_group("guard");
    g.bench_function("hit_100", |b| {
        b.iter(|| hit_guard.check(black_box(PLAIN_100)))
    });
    let plain_long = long(false);
    let masked_long = long(true);
    hit_guard.check(&plain_long).ok();
    g.bench_function("hit_4k", |b| {
        b.iter(|| hit_guard.check(black_box(&plain_long)))
    });
    let orm = variants(ORM_170, 100_000);
    let long_fast = variants_plain(&plain_long, 1000);
    let long_masked = variants(&masked_long, 1000);
    for (name, texts) in [
        ("uncached_fast_100", &fast),
        ("uncached_masked_100", &masked),
        ("uncached_orm_170", &orm),
        ("uncached_fast_4k", &long_fast),
        ("uncached_masked_4k", &long_masked),
    ] {
        let guard = Guard::with_cache_capacity(Mode::Default, 1);
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % texts.len();
                guard.check(black_box(&texts[i]))
            })
        });
    }
    // A megabyte each (never cached: over MAX_CACHED_LEN). Plain text first: ORM text, a bulk
    // INSERT (admitted by the byte prefilter alone) and the same INSERT with a column named like
    // a refused function (so the reader reads it all). Then the shapes that used to be
    // quadratic or worse: a refused name in an alias's place followed by a megabyte of spaces
    // or by one long comment, CTE lists named like refused functions, an INTO target with a
    // megabyte of qualifiers, nested parentheses each closed before `insert INTO temp`, and
    // parentheses nested to the megabyte (read, for the column named like a refused function).
    let megabyte = |unit: &dyn Fn(usize) -> String, head: &str| {
        let mut s = String::from(head);
        let mut i = 0;
        while s.len() < 1 << 20 {
            s.push_str(&unit(i));
            i += 1;
        }
        s
    };
    let orm_1m = megabyte(&|_| format!("{ORM_170} AND "), "");
    let row = |i: usize| format!("({i}, 'some text {i}', 3.5, now()), ");
    let bulk_1m = megabyte(&row, "INSERT INTO t (a, b, c, d) VALUES ") + "(0, '', 0, now())";
    let bulk_read_1m =
        megabyte(&row, "INSERT INTO t (a, b, c, lastval) VALUES ") + "(0, '', 0, now())";
    let cte = |name: &'static str| {
        move |i: usize| {
            format!(
                "{}{name}(v{i}) AS (SELECT {i})",
                if i > 0 { ", " } else { "" }
            )
        }
    };
    let cte_plain_1m = megabyte(&cte("totals"), "WITH ") + " SELECT 1";
    let cte_refused_1m = megabyte(&cte("lastval"), "WITH ") + " SELECT 1";
    let alias_spaces_1m = format!("SELECT * FROM t AS lastval{}(v)", " ".repeat(1 << 20));
    let alias_comment_1m = format!("SELECT * FROM t AS lastval /*{}*/ (v)", "x".repeat(1 << 20));
    let into_chain_1m = megabyte(&|_| "pg_temp_1.".to_owned(), "SELECT 1 INTO ") + "t";
    let parens_1m = format!(
        "SELECT {}{}",
        "(".repeat(50_000),
        ") insert INTO temp.x".repeat(50_000)
    );
    // With a column named like a refused function, so that the reader reads it all.
    let nested_1m = format!(
        "SELECT {}1{} AS lastval",
        "(".repeat(1 << 19),
        ")".repeat(1 << 19)
    );
    let guard = Guard::with_cache_capacity(Mode::Default, 1);
    for (name, text, admitted) in [
        ("orm_1m", &orm_1m, true),
        ("bulk_insert_1m", &bulk_1m, true),
        ("bulk_insert_read_1m", &bulk_read_1m, true),
        ("cte_plain_1m", &cte_plain_1m, true),
        ("cte_refused_names_1m", &cte_refused_1m, true),
        ("alias_spaces_1m", &alias_spaces_1m, true),
        ("alias_comment_1m", &alias_comment_1m, true),
        ("into_chain_1m", &into_chain_1m, false),
        ("nested_parens_1m", &parens_1m, true),
        ("deep_parens_1m", &nested_1m, true),
    ] {
        assert_eq!(guard.check(text).is_ok(), admitted, "{name}");
        g.bench_function(name, |b| b.iter(|| guard.check(black_box(text))));
    }
    g.finish();
    c.final_summary();
}
