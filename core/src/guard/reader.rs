//! The statement's structure, read the way PostgreSQL's grammar reads it where the rules need
//! it: which `name (` is a call. Every name followed by `(` is a call, except at the four
//! places the grammar puts a name before a parenthesis that is not one — a common table
//! expression's name before its column list, a FROM item's alias before its column list, an
//! INSERT's table before its column list, a type's name before its modifiers. The reader grants
//! those exceptions, by token, only where it has followed the statement to that place (`WITH` at
//! a query's start, a FROM item it has read, `INSERT INTO`, `::` or CAST's `AS`); the calls are
//! then found in one pass over every token, so whatever the reader does not follow, or reads
//! wrongly, gets no exception: a construct it does not know can cost a false refusal, never a
//! bypass. A name after `.` is a call too (PostgreSQL reads `x.f` as `f(x)` when `x` has no
//! field `f`), except the parts of a type's name.
//!
//! Every token is visited once: the reader moves forward only, keeps what it needs of the
//! context on a stack, and gives up (refusing) past [`MAX_DEPTH`] nested queries, where the
//! server's own parser would also give up long before.

use super::lexer::{kept_len, Kind, Lexer, Name, Token};
use super::names::{cannot_name_table, may_be_view, session_view};
use super::Reason;

/// Nested queries (and parenthesised FROM lists) the reader follows; deeper is refused.
pub(super) const MAX_DEPTH: u32 = 200;

/// Where the reader is, for the INTO and UPDATE rules: the statement itself (or the first
/// operand of its set operation), or a query inside it (a CTE's body, a subquery, a later
/// operand), where `SELECT ... INTO` is an error and an UPDATE of `pg_settings` does nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Top,
    Nested,
}

/// What the reading found, for the rules to weigh in their order.
#[derive(Debug, Default)]
pub(super) struct Findings {
    /// A token after the first `;`.
    pub(super) second_statement: bool,
    /// A `U&"..."` name whose body holds escapes.
    pub(super) escaped_name: bool,
    /// The word UESCAPE, with a `U&` construct in the text.
    pub(super) uescape: bool,
    /// The first refused call.
    pub(super) call: Option<Reason>,
    /// The first name of a view that shows the session's state.
    pub(super) view: Option<&'static str>,
    /// `SELECT ... INTO` a temporary table or a table in `pg_temp`.
    pub(super) into: Option<Reason>,
    /// An UPDATE of `pg_settings` as the statement (or its first operand).
    pub(super) pg_settings: bool,
    /// Nested deeper than [`MAX_DEPTH`].
    pub(super) too_deep: bool,
    /// Tokens looked at, counted in tests: the test that reading is linear holds it to a
    /// fixed multiple of the tokens.
    #[cfg(test)]
    pub(super) steps: usize,
}

/// Whether calling a name (qualified by a schema, if it was, with a number of arguments, if
/// known) is refused.
pub(super) type Calls<'a> = &'a dyn Fn(Option<&Name>, &Name, Option<u16>) -> Option<Reason>;

/// Whether a name whose first byte and length (cut to 63) are these could be refused at all: the
/// cheap test before a name is built and looked up.
pub(super) type May<'a> = &'a dyn Fn(u8, usize) -> bool;

/// Reads `sql`; `calls` says which calls are refused (`may` first rules most names out), and is
/// told their argument counts when `count_args` (counting costs a pass, so only a guard with
/// extension routines asks). Without `find_calls` (no word of the text could be a refused
/// name) the calls are not looked for at all.
pub(super) fn read(
    sql: &str,
    calls: Calls<'_>,
    may: May<'_>,
    find_calls: bool,
    count_args: bool,
) -> Findings {
    let mut lexer = Lexer::new(sql);
    let mut toks = Vec::with_capacity(sql.len() / 4 + 4);
    let mut found = Findings::default();
    let mut after_semicolon = false;
    for t in lexer.by_ref() {
        match t.kind {
            Kind::Escaped => found.escaped_name = true,
            Kind::Word if eq(sql.as_bytes(), t, "uescape") => found.uescape = true,
            // Empty statements (`SELECT 1;;`) are nothing: the server drops them.
            Kind::Semicolon => {
                after_semicolon = true;
                continue;
            }
            _ => {}
        }
        if after_semicolon {
            found.second_statement = true;
            break;
        }
        toks.push(t);
    }
    // UESCAPE matters only beside a U& construct (elsewhere it is a name).
    found.uescape &= lexer.u_amp;
    let mut r = Reader {
        sql: sql.as_bytes(),
        toks: &toks,
        i: 0,
        calls,
        found,
        depth: 0,
        exempt: Vec::new(),
        opens: std::cell::Cell::new((0, 0)),
        #[cfg(test)]
        looks: std::cell::Cell::new(0),
    };
    r.query(Level::Top);
    // What is left (an unbalanced `)`, a construct not followed): read without exceptions.
    while r.i < r.toks.len() {
        if r.kind(0) == Some(Kind::Close) {
            r.bump();
        } else {
            r.scan(Stop::NONE);
        }
    }
    if find_calls {
        r.calls(may, count_args);
    }
    #[cfg(test)]
    {
        r.found.steps = r.looks.get();
    }
    r.found
}

/// A name the grammar places where it is no call: before `(` (a CTE's, an alias's, an INSERT
/// target's, a type's) or after `.` (a part of a relation's or a type's name).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Exempt(usize);

/// Whether token `t` of `sql` is the word `kw` (lower case), in any case.
fn eq(sql: &[u8], t: Token, kw: &str) -> bool {
    t.kind == Kind::Word
        && t.end() - t.start() == kw.len()
        && sql[t.start()..t.end()].eq_ignore_ascii_case(kw.as_bytes())
}

/// The words that end a generic stretch of tokens at its own depth.
#[derive(Clone, Copy)]
struct Stop {
    words: &'static [&'static str],
    /// A `,` ends it too (a FROM item's join condition).
    comma: bool,
    /// `WHEN` ends it too, outside a CASE (MERGE's join condition).
    when: bool,
}

impl Stop {
    const NONE: Stop = Stop {
        words: &[],
        comma: false,
        when: false,
    };
    /// After a SELECT's target list.
    const TARGETS: Stop = Stop {
        words: &[
            "except",
            "fetch",
            "for",
            "from",
            "group",
            "having",
            "intersect",
            "into",
            "limit",
            "offset",
            "order",
            "union",
            "where",
            "window",
        ],
        comma: false,
        when: false,
    };
    /// After a query operand: a set operation goes on.
    const SET_OPS: Stop = Stop {
        words: &["except", "intersect", "union"],
        comma: false,
        when: false,
    };
    /// After a join condition.
    const JOIN_ON: Stop = Stop {
        words: &[
            "cross",
            "except",
            "fetch",
            "for",
            "full",
            "group",
            "having",
            "inner",
            "intersect",
            "join",
            "left",
            "limit",
            "natural",
            "offset",
            "order",
            "returning",
            "right",
            "union",
            "where",
            "window",
        ],
        comma: true,
        when: true,
    };
    /// After an UPDATE's SET list.
    const SET_LIST: Stop = Stop {
        words: &["from", "returning", "where"],
        comma: false,
        when: false,
    };
}

/// What a parenthesis the generic reading opened holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Paren {
    /// Expressions (arguments, a row, a list, a type's modifiers).
    Plain,
    /// CAST's or TREAT's: its `AS` is followed by a type.
    Cast,
}

struct Reader<'a> {
    sql: &'a [u8],
    toks: &'a [Token],
    i: usize,
    calls: Calls<'a>,
    found: Findings,
    /// Queries (and parenthesised FROM lists) open around the reader.
    depth: u32,
    /// Names granted an exception, by token index, in the order read.
    exempt: Vec<Exempt>,
    /// The last run of `(` tokens [`Reader::query_starts`] skipped: `start..end`.
    opens: std::cell::Cell<(usize, usize)>,
    #[cfg(test)]
    looks: std::cell::Cell<usize>,
}

impl Reader<'_> {
    fn tok(&self, k: usize) -> Option<Token> {
        #[cfg(test)]
        self.looks.set(self.looks.get() + 1);
        self.toks.get(self.i + k).copied()
    }

    fn kind(&self, k: usize) -> Option<Kind> {
        self.tok(k).map(|t| t.kind)
    }

    fn is(&self, k: usize, kw: &str) -> bool {
        self.tok(k).is_some_and(|t| eq(self.sql, t, kw))
    }

    fn is_any(&self, k: usize, kws: &[&str]) -> bool {
        self.tok(k)
            .is_some_and(|t| t.kind == Kind::Word && kws.iter().any(|kw| eq(self.sql, t, kw)))
    }

    fn is_name(&self, k: usize) -> bool {
        matches!(
            self.kind(k),
            Some(Kind::Word | Kind::Quoted | Kind::Escaped)
        )
    }

    fn bump(&mut self) {
        self.i += 1;
    }

    /// Takes the word `kw` if it is next.
    fn accept(&mut self, kw: &str) -> bool {
        let yes = self.is(0, kw);
        if yes {
            self.bump();
        }
        yes
    }

    /// Whether a query starts at token `k`: a statement keyword after any number of `(`. The
    /// last run of `(` skipped is remembered, so asking at each `(` of a long run (`((((...`)
    /// skips it once, not once per parenthesis.
    fn query_starts(&self, k: usize) -> bool {
        let from = self.i + k;
        let (run_start, run_end) = self.opens.get();
        let mut j = from;
        if (run_start..run_end).contains(&from) {
            j = run_end;
        } else {
            while self.toks.get(j).is_some_and(|t| t.kind == Kind::Open) {
                j += 1;
            }
            if j > from {
                self.opens.set((from, j));
            }
        }
        self.is_any(
            j - self.i,
            &[
                "select", "values", "with", "table", "insert", "update", "delete", "merge",
            ],
        )
    }

    /// Grants the name at token index `at` its exception.
    fn exempt(&mut self, at: usize) {
        self.exempt.push(Exempt(at));
    }

    /// Every name before `(` or after `.` without an exception is a call: the first refused
    /// one is the finding. A call's schema is the name before its `.`, for `s.f(`; a name after
    /// `.` without `(` (`x.f`) is `f(x)`, whatever `x` is, so of one argument.
    fn calls(&mut self, may: May<'_>, count_args: bool) {
        // Read forward, so mostly in order already (a sort of sorted data is one pass).
        self.exempt.sort_unstable();
        let args = if count_args {
            arguments(self.sql, self.toks)
        } else {
            Vec::new()
        };
        let mut exempt = self.exempt.iter().peekable();
        let toks = self.toks;
        for (j, t) in toks.iter().enumerate() {
            if !matches!(t.kind, Kind::Word | Kind::Quoted | Kind::Escaped) {
                continue;
            }
            // A session view, wherever its name stands (a column of that name too: rare).
            if self.found.view.is_none()
                && (t.kind != Kind::Word || may_be_view(self.sql[t.start()], t.end() - t.start()))
            {
                self.found.view = session_view(Name::of(self.sql, *t).as_bytes());
            }
            let paren = toks.get(j + 1).is_some_and(|n| n.kind == Kind::Open);
            let dotted = j > 0 && toks[j - 1].kind == Kind::Dot;
            if !(paren || dotted) {
                continue;
            }
            while exempt.next_if(|e| e.0 < j).is_some() {}
            if exempt.peek().is_some_and(|e| e.0 == j) {
                continue;
            }
            // An unquoted name's first byte and length are the token's (up to the cut).
            if t.kind == Kind::Word
                && !may(self.sql[t.start()], kept_len(self.sql, t.start(), t.end()))
            {
                continue;
            }
            let schema = (paren && dotted && j >= 2)
                .then(|| toks[j - 2])
                .filter(|s| matches!(s.kind, Kind::Word | Kind::Quoted))
                .map(|s| Name::of(self.sql, s));
            let count = match paren {
                true => args.get(j + 1).copied().filter(|&k| k != UNKNOWN),
                false => Some(1),
            };
            let name = Name::of(self.sql, *t);
            if self.found.call.is_none() {
                self.found.call = (self.calls)(schema.as_ref(), &name, count);
            }
            if self.found.call.is_some() && self.found.view.is_some() {
                return;
            }
        }
    }

    /// Goes one query deeper; `false` (and refused) past [`MAX_DEPTH`].
    fn descend(&mut self) -> bool {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.found.too_deep = true;
            // Nothing more is read: the statement is refused as it is.
            self.i = self.toks.len();
            return false;
        }
        true
    }

    // ---- queries -------------------------------------------------------------------------

    /// `[WITH ...] operand {UNION|INTERSECT|EXCEPT operand} [ORDER BY ...] [LIMIT ...] ...`
    fn query(&mut self, level: Level) {
        if !self.descend() {
            return;
        }
        if self.accept("with") {
            self.with_list();
        }
        self.operand(level);
        while self.is_any(0, &["union", "intersect", "except"]) {
            self.bump();
            if self.is_any(0, &["all", "distinct"]) {
                self.bump();
            }
            // INTO is allowed only in the first operand.
            self.operand(Level::Nested);
        }
        // ORDER BY, LIMIT, OFFSET, FETCH, FOR UPDATE, and whatever a statement's tail holds
        // (ON CONFLICT, RETURNING): expressions.
        self.scan(Stop::NONE);
        self.depth -= 1;
    }

    /// One operand: a parenthesised query, SELECT, VALUES, TABLE or a data-modifying statement.
    fn operand(&mut self, level: Level) {
        match self.kind(0) {
            Some(Kind::Open) if self.query_starts(1) => {
                self.bump();
                self.query(level);
                if self.kind(0) == Some(Kind::Close) {
                    self.bump();
                }
            }
            _ if self.is(0, "select") => self.select(level),
            _ if self.is(0, "values") => {
                self.bump();
                self.scan(Stop::SET_OPS);
            }
            _ if self.is(0, "table") => {
                self.bump();
                self.relation();
            }
            _ if self.is(0, "insert") => self.insert(),
            _ if self.is(0, "update") => self.update(level),
            _ if self.is(0, "delete") => self.delete(),
            _ if self.is(0, "merge") => self.merge(),
            _ => self.scan(Stop::SET_OPS),
        }
    }

    /// `SELECT [ALL | DISTINCT [ON (...)]] targets [INTO ...] [FROM ...] [WHERE ...] ...`
    fn select(&mut self, level: Level) {
        self.bump();
        if !self.accept("all") && self.accept("distinct") && self.accept("on") {
            self.parenthesised();
        }
        self.scan(Stop::TARGETS);
        if self.accept("into") {
            self.select_into(level);
        }
        if self.accept("from") {
            self.source_list();
        }
        self.scan(Stop::SET_OPS);
    }

    /// After SELECT's INTO: `[TEMP | TEMPORARY | LOCAL/GLOBAL TEMP | UNLOGGED] [TABLE] name`.
    fn select_into(&mut self, level: Level) {
        let mut temp = false;
        if self.is_any(0, &["local", "global"]) && self.is_any(1, &["temp", "temporary"]) {
            self.bump();
        }
        // TEMP is the keyword when a table's name (or TABLE) follows it; before `.`, `(` or
        // a word that cannot name a table it is a table's own name (`INTO temp FROM t`).
        if self.is_any(0, &["temp", "temporary"]) {
            let keyword = match self.tok(1) {
                Some(t) if t.kind == Kind::Quoted => true,
                Some(t) if t.kind == Kind::Word => {
                    eq(self.sql, t, "table") || !cannot_name_table(&self.sql[t.start()..t.end()])
                }
                _ => false,
            };
            if keyword {
                temp = true;
                self.bump();
            }
        } else if self.is(0, "unlogged") {
            self.bump();
        }
        self.accept("table");
        let pg_temp = self.relation();
        if level == Level::Top && self.found.into.is_none() {
            if temp {
                self.found.into = Some(Reason::IntoTemp);
            } else if pg_temp {
                self.found.into = Some(Reason::IntoPgTemp);
            }
        }
    }

    /// `INSERT INTO name [AS alias] [(columns)] [OVERRIDING ...] {DEFAULT VALUES | query} ...`
    fn insert(&mut self) {
        self.bump();
        if !self.accept("into") {
            return;
        }
        self.write_target();
        if self.accept("as") && self.is_name(0) {
            self.bump();
        }
        // The table's column list: the table's name (or alias) before it is no call.
        if self.kind(0) == Some(Kind::Open) {
            if self.i > 0 && self.toks[self.i - 1].kind != Kind::Dot {
                self.exempt(self.i - 1);
            }
            self.parenthesised();
        }
        if self.accept("overriding") {
            while self.is_any(0, &["system", "user", "value"]) {
                self.bump();
            }
        }
        if self.is(0, "default") && self.is(1, "values") {
            self.bump();
            self.bump();
            return;
        }
        if self.query_starts(0) {
            self.query(Level::Nested);
        }
    }

    /// `UPDATE [ONLY] [(] name [)] [*] [[AS] alias] SET ... [FROM ...] ...`
    fn update(&mut self, level: Level) {
        self.bump();
        self.accept("only");
        let paren = self.kind(0) == Some(Kind::Open);
        if paren {
            self.bump();
        }
        let last = self.relation_name();
        if paren && self.kind(0) == Some(Kind::Close) {
            self.bump();
        }
        // An UPDATE of pg_settings is SET. In a CTE's body PostgreSQL 15 does nothing with it
        // (a test on the server holds it to that).
        if level == Level::Top && last.is_some_and(|t| Name::of(self.sql, t).is("pg_settings")) {
            self.found.pg_settings = true;
        }
        self.star();
        if self.accept("as") {
            if self.is_name(0) {
                self.bump();
            }
        } else if self.is_name(0) && !self.is(0, "set") {
            self.bump();
        }
        if self.accept("set") {
            self.scan(Stop::SET_LIST);
        }
        if self.accept("from") {
            self.source_list();
        }
    }

    /// `DELETE FROM [ONLY] name [*] [[AS] alias] [USING ...] ...`
    fn delete(&mut self) {
        self.bump();
        if !self.accept("from") {
            return;
        }
        self.accept("only");
        self.relation();
        self.star();
        self.alias(&["using", "where", "returning"]);
        if self.accept("using") {
            self.source_list();
        }
    }

    /// `MERGE INTO [ONLY] name [[AS] alias] USING item ON ... WHEN ...`
    fn merge(&mut self) {
        self.bump();
        if !self.accept("into") {
            return;
        }
        self.accept("only");
        self.write_target();
        self.star();
        self.alias(&["using"]);
        if self.accept("using") {
            self.source_item();
        }
    }

    /// The table an INSERT or MERGE writes. One in `pg_temp` would be the session's, but no
    /// statement the guard admits creates one, so on a shared connection such a write fails
    /// (and PostgreSQL creates no temporary schema for it).
    fn write_target(&mut self) {
        self.relation();
    }

    /// `WITH [RECURSIVE] name [(columns)] AS [[NOT] MATERIALIZED] (query) [SEARCH ...]
    /// [CYCLE ...], ...`: a name before its column list here is no call.
    fn with_list(&mut self) {
        self.accept("recursive");
        loop {
            if !self.is_name(0) {
                return;
            }
            self.bump();
            if self.kind(0) == Some(Kind::Open) {
                // The exception holds only for the whole shape, `name (names) AS ... (query`:
                // anything else reads as the call it would be elsewhere.
                match self.names_list(0) {
                    Some(len) if self.cte_body_at(len) => {
                        self.exempt(self.i - 1);
                        for _ in 0..len {
                            self.bump();
                        }
                    }
                    _ => self.parenthesised(),
                }
            }
            if !self.accept("as") {
                return;
            }
            if self.accept("not") && !self.is(0, "materialized") {
                return;
            }
            self.accept("materialized");
            if self.kind(0) != Some(Kind::Open) {
                return;
            }
            self.bump();
            self.query(Level::Nested);
            if self.kind(0) != Some(Kind::Close) {
                return;
            }
            self.bump();
            // SEARCH {BREADTH|DEPTH} FIRST BY names SET name; CYCLE names SET name
            // [TO value DEFAULT value] USING name: names and constants, read for calls.
            if self.accept("search") {
                self.scan(Stop {
                    words: &["set"],
                    comma: false,
                    when: false,
                });
                self.accept("set");
                self.name_token();
            }
            if self.accept("cycle") {
                self.scan(Stop {
                    words: &["set"],
                    comma: false,
                    when: false,
                });
                self.accept("set");
                self.name_token();
                self.scan(Stop {
                    words: &["using"],
                    comma: false,
                    when: false,
                });
                self.accept("using");
                self.name_token();
            }
            if self.kind(0) != Some(Kind::Comma) {
                return;
            }
            self.bump();
        }
    }

    /// The length in tokens of a list of names in parentheses at token `k`, `(a, "B", c)`.
    fn names_list(&self, k: usize) -> Option<usize> {
        if self.kind(k) != Some(Kind::Open) {
            return None;
        }
        let mut j = k + 1;
        loop {
            if !self.is_name(j) {
                return None;
            }
            match self.kind(j + 1) {
                Some(Kind::Comma) => j += 2,
                Some(Kind::Close) => return Some(j + 2 - k),
                _ => return None,
            }
        }
    }

    /// Whether a CTE's body starts at token `k`: `AS [[NOT] MATERIALIZED] (` and a query.
    fn cte_body_at(&self, mut k: usize) -> bool {
        if !self.is(k, "as") {
            return false;
        }
        k += 1;
        if self.is(k, "not") {
            k += 1;
            if !self.is(k, "materialized") {
                return false;
            }
        }
        if self.is(k, "materialized") {
            k += 1;
        }
        self.kind(k) == Some(Kind::Open) && self.query_starts(k + 1)
    }

    fn name_token(&mut self) {
        if self.is_name(0) {
            self.bump();
        }
    }

    // ---- FROM ----------------------------------------------------------------------------

    /// Items separated by commas, each with its joins.
    fn source_list(&mut self) {
        if !self.descend() {
            return;
        }
        loop {
            self.source_item();
            loop {
                while self.is_any(
                    0,
                    &[
                        "natural", "inner", "left", "right", "full", "outer", "cross",
                    ],
                ) {
                    self.bump();
                }
                if !self.accept("join") {
                    break;
                }
                self.source_item();
                if self.accept("on") {
                    self.scan(Stop::JOIN_ON);
                } else if self.accept("using") {
                    self.parenthesised();
                    if self.accept("as") {
                        self.name_token();
                    }
                }
            }
            if self.kind(0) != Some(Kind::Comma) {
                break;
            }
            self.bump();
        }
        self.depth -= 1;
    }

    /// `[LATERAL] {(query) | (joined items) | ROWS FROM (...) | [ONLY] name [*] | f(...)}`
    /// with its alias: the alias before its column list is no call.
    fn source_item(&mut self) {
        self.accept("lateral");
        match self.kind(0) {
            Some(Kind::Open) if self.query_starts(1) => {
                self.bump();
                self.query(Level::Nested);
                if self.kind(0) == Some(Kind::Close) {
                    self.bump();
                }
            }
            Some(Kind::Open) => {
                self.bump();
                self.source_list();
                if self.kind(0) == Some(Kind::Close) {
                    self.bump();
                }
            }
            _ if self.is(0, "rows") && self.is(1, "from") => {
                self.bump();
                self.bump();
                self.parenthesised();
            }
            _ if self.is_name(0) && (!self.is(0, "only") || self.item_name_at(1)) => {
                self.accept("only");
                if !self.item_name_at(0) {
                    self.scan(Stop::JOIN_ON);
                    return;
                }
                self.name_chain();
                if self.kind(0) == Some(Kind::Open) {
                    // A function: its name is a call.
                    self.parenthesised();
                } else {
                    // A relation. Its parts after a dot get no exception: were this place
                    // misread, `v.f` (PostgreSQL's `f(v)`) would pass for a table's name.
                    self.star();
                }
            }
            _ => {
                // Not an item this reader follows: read on without exceptions.
                self.scan(Stop::JOIN_ON);
                return;
            }
        }
        if self.is(0, "with") && self.is(1, "ordinality") {
            self.bump();
            self.bump();
        }
        self.alias(&[]);
        if self.accept("tablesample") {
            // The sampling method is a function: a call like any other.
            self.name_chain();
            if self.kind(0) == Some(Kind::Open) {
                self.parenthesised();
            }
            if self.accept("repeatable") {
                self.parenthesised();
            }
        }
    }

    /// Whether token `k` can start a FROM item's name: a name, but no keyword that cannot
    /// name a table unless a function's `(` follows it (`left(...)`, but never `user`).
    fn item_name_at(&self, k: usize) -> bool {
        match self.tok(k) {
            Some(t) if t.kind == Kind::Word => {
                !cannot_name_table(&self.sql[t.start()..t.end()])
                    || self.kind(k + 1) == Some(Kind::Open)
            }
            Some(t) => matches!(t.kind, Kind::Quoted | Kind::Escaped),
            None => false,
        }
    }

    /// `[AS] alias [(columns)]` or `AS (column definitions)`; `not` are further words an
    /// alias cannot be here.
    fn alias(&mut self, not: &[&str]) {
        let with_as = self.accept("as");
        let named = match self.tok(0) {
            Some(t) if t.kind == Kind::Quoted => true,
            Some(t) if t.kind == Kind::Word => {
                let w = &self.sql[t.start()..t.end()];
                (with_as
                    || !(cannot_name_table(w)
                        || FOLLOWS_ITEM
                            .iter()
                            .any(|k| w.eq_ignore_ascii_case(k.as_bytes()))))
                    && !not.iter().any(|k| eq(self.sql, t, k))
            }
            _ => false,
        };
        if named {
            self.bump();
        }
        if (named || with_as) && self.kind(0) == Some(Kind::Open) {
            if named {
                self.exempt(self.i - 1);
            }
            self.parenthesised();
        }
    }

    /// A relation's name, `[db.][schema.]name`. Returns whether `pg_temp[_N]` is among its
    /// qualifiers. Its parts after a dot are checked as calls like any `.name`: a table named
    /// like a refused function and qualified (`s.lastval`) costs a false refusal, where an
    /// exception would let a misread `v.f` through.
    fn relation(&mut self) -> bool {
        let start = self.i;
        let last = self.relation_name();
        let mut pg_temp = false;
        for t in &self.toks[start..self.i] {
            // Only a part that could spell `pg_temp` is built into a name.
            let could = match t.kind {
                Kind::Word => t.end() - t.start() >= 7 && self.sql[t.start()] | 0x20 == b'p',
                Kind::Quoted => true,
                _ => false,
            };
            if Some(*t) != last && could && is_pg_temp(Name::of(self.sql, *t).as_bytes()) {
                pg_temp = true;
                break;
            }
        }
        pg_temp
    }

    /// A dotted name, taken whole; its last part.
    fn relation_name(&mut self) -> Option<Token> {
        let mut last = None;
        while self.is_name(0) {
            last = self.tok(0);
            self.bump();
            if self.kind(0) != Some(Kind::Dot) || !self.is_name(1) {
                break;
            }
            self.bump();
        }
        last
    }

    /// A dotted name, taken whole.
    fn name_chain(&mut self) {
        self.relation_name();
    }

    /// The parts after a `.` of the dotted name read from token `start` are no calls (a type's
    /// schema-qualified name). Its last part before a `(` keeps no exception from this: that is
    /// granted only where the grammar allows it.
    fn exempt_parts(&mut self, start: usize) {
        for j in start + 1..self.i {
            if self.toks[j - 1].kind == Kind::Dot {
                self.exempt(j);
            }
        }
    }

    /// `*` after a table's name (its inheritors too).
    fn star(&mut self) {
        if let Some(t) = self.tok(0) {
            if t.kind == Kind::Op && &self.sql[t.start()..t.end()] == b"*" {
                self.bump();
            }
        }
    }

    /// `( ... )`: a query, or expressions; the closing parenthesis is taken.
    fn parenthesised(&mut self) {
        if self.kind(0) != Some(Kind::Open) {
            return;
        }
        self.bump();
        if self.query_starts(0) {
            self.query(Level::Nested);
        } else {
            self.scan(Stop::NONE);
        }
        if self.kind(0) == Some(Kind::Close) {
            self.bump();
        }
    }

    // ---- expressions ---------------------------------------------------------------------

    /// Reads expressions up to a `)` it did not open, the end, or (at its own depth) a word of
    /// `stop`: every `name (` a call, every `.name` after a value a call, subqueries read as
    /// queries, a type's name after `::` or CAST's `AS` no call.
    fn scan(&mut self, stop: Stop) {
        // The parentheses this stretch opened.
        let mut parens: Vec<Paren> = Vec::new();
        let mut cases = 0u32;
        while let Some(t) = self.tok(0) {
            let top = parens.is_empty();
            match t.kind {
                Kind::Close if top => return,
                Kind::Close => {
                    parens.pop();
                    self.bump();
                }
                Kind::Open => {
                    self.bump();
                    if self.query_starts(0) {
                        self.query(Level::Nested);
                        if self.kind(0) == Some(Kind::Close) {
                            self.bump();
                        }
                    } else {
                        parens.push(Paren::Plain);
                    }
                }
                Kind::Comma if top && stop.comma => return,
                Kind::Cast => {
                    self.bump();
                    if self.type_name() {
                        parens.push(Paren::Plain);
                    }
                }
                Kind::Word if top && self.stops(t, stop, cases) => return,
                Kind::Word => {
                    // A label after AS is a name, whatever keyword it spells (`AS into`).
                    if self.i > 0 && eq(self.sql, self.toks[self.i - 1], "as") {
                        self.bump();
                        continue;
                    }
                    if eq(self.sql, t, "case") {
                        cases += 1;
                    } else if eq(self.sql, t, "end") {
                        cases = cases.saturating_sub(1);
                    } else if eq(self.sql, t, "as") && parens.last() == Some(&Paren::Cast) {
                        self.bump();
                        if self.type_name() {
                            parens.push(Paren::Plain);
                        }
                        continue;
                    } else if eq(self.sql, t, "into") {
                        // An INTO no statement's structure took (INSERT's and MERGE's are
                        // theirs, SELECT's is read with its SELECT): wherever it stands it is
                        // judged as the statement's own, which costs nothing where the server
                        // would reject it and closes any place the reader misread.
                        self.bump();
                        self.select_into(Level::Top);
                        continue;
                    }
                    let cast = (eq(self.sql, t, "cast") || eq(self.sql, t, "treat"))
                        && self.kind(1) == Some(Kind::Open)
                        && (self.i == 0 || self.toks[self.i - 1].kind != Kind::Dot);
                    self.bump();
                    if cast {
                        // CAST's parenthesis: its AS is followed by a type.
                        self.bump();
                        parens.push(Paren::Cast);
                    }
                }
                _ => self.bump(),
            }
        }
    }

    /// Whether the word `t` ends a stretch read with `stop` (`FROM` after `IS [NOT]
    /// DISTINCT` is an operator's, `WHEN` inside a CASE the CASE's).
    fn stops(&self, t: Token, stop: Stop, cases: u32) -> bool {
        if stop.when && cases == 0 && eq(self.sql, t, "when") {
            return true;
        }
        if !stop.words.iter().any(|w| eq(self.sql, t, w)) {
            return false;
        }
        let before = |k: usize| self.i.checked_sub(k).map(|j| self.toks[j]);
        let after = |word: &str| before(1).is_some_and(|p| eq(self.sql, p, word));
        // A keyword after AS is a column's label (`SELECT 1 AS from`); GROUP after WITHIN and
        // FOR after COLLATION belong to an expression.
        if after("as")
            || (eq(self.sql, t, "group") && after("within"))
            || (eq(self.sql, t, "for") && after("collation"))
        {
            return false;
        }
        if eq(self.sql, t, "from") {
            let distinct = before(1).is_some_and(|p| eq(self.sql, p, "distinct"));
            let is = before(2).is_some_and(|p| eq(self.sql, p, "is"))
                || (before(2).is_some_and(|p| eq(self.sql, p, "not"))
                    && before(3).is_some_and(|p| eq(self.sql, p, "is")));
            return !(distinct && is);
        }
        true
    }

    /// A type's name after `::` or CAST's `AS`: the parts of its qualified name, and its name
    /// before the parenthesis of its modifiers, are no calls (PostgreSQL takes only constants
    /// there, and reads them as it reads any expression). Returns whether it opened that
    /// parenthesis, which the caller's reading then closes: no recursion, however many casts
    /// nest.
    fn type_name(&mut self) -> bool {
        self.accept("setof");
        let start = self.i;
        self.relation_name();
        self.exempt_parts(start);
        let open = self.i > start && self.kind(0) == Some(Kind::Open);
        if open {
            self.exempt(self.i - 1);
            self.bump();
        }
        open
    }
}

/// Words that may follow a FROM item and so are never its alias without AS (beside the
/// reserved keywords, which cannot be one).
const FOLLOWS_ITEM: &[&str] = &[
    "cross",
    "full",
    "inner",
    "join",
    "left",
    "natural",
    "on",
    "outer",
    "repeatable",
    "returning",
    "right",
    "set",
    "tablesample",
    "then",
    "using",
    "when",
    "where",
    "with",
];

/// An argument count not known: `VARIADIC`, or an aggregate's `ORDER BY` (whose commas are not
/// the arguments'). Every overload matches it.
const UNKNOWN: u16 = u16::MAX;

/// The number of arguments in each parenthesis, by the index of its `(` token (0 elsewhere):
/// the commas at its own depth (brackets and inner parentheses are deeper), plus one unless it
/// is empty or `(*)`. One pass with a stack.
fn arguments(sql: &[u8], toks: &[Token]) -> Vec<u16> {
    struct Open {
        at: usize,
        commas: u16,
        tokens: u32,
        star: bool,
        unknown: bool,
        paren: bool,
    }
    let mut counts = vec![0u16; toks.len()];
    let mut stack: Vec<Open> = Vec::new();
    for (j, t) in toks.iter().enumerate() {
        if let Some(top) = stack.last_mut() {
            top.tokens += 1;
            match t.kind {
                Kind::Comma => top.commas = top.commas.saturating_add(1),
                Kind::Op if &sql[t.start()..t.end()] == b"*" => top.star = true,
                Kind::Word if eq(sql, *t, "variadic") || eq(sql, *t, "order") => top.unknown = true,
                _ => {}
            }
        }
        match t.kind {
            Kind::Open | Kind::OpenBracket => stack.push(Open {
                at: j,
                commas: 0,
                tokens: 0,
                star: false,
                unknown: false,
                paren: t.kind == Kind::Open,
            }),
            Kind::Close | Kind::CloseBracket => {
                if let Some(o) = stack.pop() {
                    // The closing token itself was counted in.
                    let inner = o.tokens.saturating_sub(1);
                    counts[o.at] = match (o.paren, o.unknown, inner) {
                        (false, _, _) => 0,
                        (true, true, _) => UNKNOWN,
                        (true, false, 0) => 0,
                        (true, false, 1) if o.star => 0,
                        (true, false, _) => o.commas.saturating_add(1),
                    };
                }
            }
            _ => {}
        }
    }
    // Parentheses left open: their counts are not known.
    for o in stack {
        counts[o.at] = UNKNOWN;
    }
    counts
}

/// `pg_temp` or `pg_temp_<digits>`.
fn is_pg_temp(name: &[u8]) -> bool {
    match name.strip_prefix(b"pg_temp") {
        Some([]) => true,
        Some([b'_', digits @ ..]) => !digits.is_empty() && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}
