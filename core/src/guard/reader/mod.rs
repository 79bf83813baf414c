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

mod sources;
mod statements;

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
}
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
