//! The reader's work on any input: linear on adversarial shapes, bounded nesting, and a byte
//! prefilter that never admits what the reader refuses.

use super::extensions::routine;
use super::*;

#[test]
fn reading_is_linear_on_adversarial_shapes() {
    // Each shape repeated to about a kilobyte and to about a megabyte: the tokens looked at
    // stay within a fixed multiple of the tokens, and that multiple does not grow with size.
    let shapes: &[(&str, &str, &str)] = &[
        (
            "WITH ",
            "lastval(v) AS (SELECT 1), ",
            "x AS (SELECT 1) SELECT 1",
        ),
        ("SELECT ", "(", "1"),
        ("SELECT ", "(((((((((SELECT 1)))))))))+", "1"),
        ("SELECT ", ") insert INTO temp.x", ""),
        ("SELECT 1", "::a(1", ""),
        ("SELECT ", "cast(1 as a(", "1"),
        ("SELECT ", "a.b.c.d.", "e"),
        ("SELECT 1 FROM ", "t AS x(a, b) JOIN ", "u ON true"),
        ("SELECT 1 FROM ", "(", "t"),
        ("SELECT ", "CASE WHEN 1 THEN ", "1"),
        ("SELECT ", "1 IS NOT DISTINCT FROM ", "1"),
        ("SELECT ", "$$a$$ || $a$", "$a$"),
        ("SELECT ", "U&\"a\" ", "1"),
        ("SELECT 1 INTO ", "temp ", "x"),
        ("UPDATE ", "(", "t SET a = 1"),
        ("SELECT ", "f((", "1"),
        (
            "SELECT 1 FROM t WHERE ",
            "EXISTS (SELECT 1 FROM t WHERE ",
            "true",
        ),
    ];
    for &(head, unit, tail) in shapes {
        let mut worst = 0.0f64;
        for n in [1_000usize, 1_000_000] {
            let sql = format!("{head}{}{tail}", unit.repeat(n / unit.len()));
            let start = std::time::Instant::now();
            let _ = refused(&sql);
            let took = start.elapsed();
            let (looks, tokens) = super::rules::steps(&sql);
            let per = looks as f64 / tokens.max(1) as f64;
            assert!(
                per < 12.0,
                "{unit:?} x{n}: {looks} looks for {tokens} tokens"
            );
            if n == 1_000 {
                worst = per;
            } else {
                assert!(
                    per < worst * 1.5 + 1.0,
                    "{unit:?}: {per} per token at 1 MB, {worst} at 1 KB"
                );
            }
            // A generous wall-clock bound for a megabyte, against a machine-independent one above.
            assert!(
                took < std::time::Duration::from_secs(5),
                "{unit:?} x{n}: {took:?}"
            );
        }
    }
}

#[test]
fn nesting_past_what_the_reader_follows_is_refused() {
    // A column named like a refused function makes the guard read the text.
    let nested = |n: usize| {
        format!(
            "SELECT {}1 AS lastval{}",
            "(SELECT ".repeat(n),
            ")".repeat(n)
        )
    };
    assert_eq!(refused(&nested(150)), None);
    assert_eq!(refused(&nested(250)), Some(Reason::TooDeep));
    // With nothing any rule looks for, depth alone refuses nothing: the text is not read.
    let plain = format!("SELECT {}1{}", "(SELECT ".repeat(250), ")".repeat(250));
    assert_eq!(refused(&plain), None);
    // The reader's recursion stays small: the deepest statement it follows, read on a thread
    // with a quarter of tokio's default stack.
    let deepest = format!(
        "SELECT 1 AS lastval FROM {}t{}",
        "(SELECT 1 FROM ".repeat(super::reader::MAX_DEPTH as usize / 2 - 1),
        ")".repeat(super::reader::MAX_DEPTH as usize / 2 - 1)
    );
    let verdict = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || refused(&deepest))
        .expect("thread")
        .join()
        .expect("no stack overflow");
    assert_eq!(verdict, None);
}

#[test]
fn the_byte_prefilter_never_admits_what_the_reader_refuses() {
    // Fragments that collide: refused names in every case, quotes, comments, U&, `;`, INTO,
    // pg_settings, long names, digits and `$` glued to names, nesting.
    const FRAGMENTS: &[&str] = &[
        "SELECT ",
        "INSERT INTO t ",
        "WITH x AS (",
        "UPDATE ",
        "(",
        ")",
        "(",
        ".",
        ",",
        " ",
        "\n",
        ";",
        "; ",
        "'",
        "\"",
        "$$",
        "$q$",
        "--",
        "/*",
        "*/",
        "E'\\'",
        "U&",
        "u&\"",
        "&",
        "&&",
        "lastval",
        "LastVal",
        "\"lastval\"",
        "set_config(",
        "(1).setseed",
        "1lastval(",
        "$lastval(",
        "a$lastval(",
        "xpath_table",
        "into ",
        "INTO TEMP t",
        " into pg_temp.t",
        "pg_settings",
        "UPDATE pg_settings SET",
        "isn_weak",
        "keeps_state",
        "\"Odd Name\"(",
        "odd",
        "é",
        "nextval(",
        "n",
        "x",
        "1",
        "$1",
        "::int",
        "AS lastval(v)",
        "FROM t lastval(v)",
    ];
    let ext = std::sync::Arc::new(ExtensionFunctions::new(&[]));
    ext.publish([
        routine("public", "keeps_state", 0, 0, false),
        routine("ext", "Odd Name", 1, 0, false),
        routine("public", &format!("{}é", "n".repeat(61)), 0, 0, false),
    ]);
    let names = ext.current();
    let none = ExtensionNames::none();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut read = 0;
    for case in 0..200_000 {
        let mut sql = String::new();
        for _ in 0..(next() % 12 + 1) {
            sql.push_str(FRAGMENTS[(next() % FRAGMENTS.len() as u64) as usize]);
        }
        if case % 1000 == 0 {
            // A long name cut on a character's boundary into an extension routine's name.
            sql = format!("SELECT {}é{}()", "n".repeat(61), "x".repeat(case % 7));
        }
        for ext in [&*names, &none] {
            for mode in [Mode::Default, Mode::Strict] {
                let (sound, verdict) = super::rules::prefilter_and_reader(&sql, mode, ext);
                read += usize::from(verdict.is_some());
                assert!(sound || verdict.is_none(), "{mode:?} {sql:?}: {verdict:?}");
            }
        }
    }
    assert!(read > 100_000, "the generator reaches refusals ({read})");
}
