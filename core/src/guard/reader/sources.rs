//! FROM items, their aliases and relation names, and type names: the reader's exceptions for
//! a name before a parenthesis that the grammar reads as an alias's columns or a type's
//! modifiers.

use super::*;

impl Reader<'_> {
    // ---- FROM ----------------------------------------------------------------------------

    /// Items separated by commas, each with its joins.
    pub(super) fn source_list(&mut self) {
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
    pub(super) fn source_item(&mut self) {
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
    pub(super) fn item_name_at(&self, k: usize) -> bool {
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
    pub(super) fn alias(&mut self, not: &[&str]) {
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
    pub(super) fn relation(&mut self) -> bool {
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
    pub(super) fn relation_name(&mut self) -> Option<Token> {
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
    pub(super) fn name_chain(&mut self) {
        self.relation_name();
    }

    /// The parts after a `.` of the dotted name read from token `start` are no calls (a type's
    /// schema-qualified name). Its last part before a `(` keeps no exception from this: that is
    /// granted only where the grammar allows it.
    pub(super) fn exempt_parts(&mut self, start: usize) {
        for j in start + 1..self.i {
            if self.toks[j - 1].kind == Kind::Dot {
                self.exempt(j);
            }
        }
    }

    /// `*` after a table's name (its inheritors too).
    pub(super) fn star(&mut self) {
        if let Some(t) = self.tok(0) {
            if t.kind == Kind::Op && &self.sql[t.start()..t.end()] == b"*" {
                self.bump();
            }
        }
    }

    /// `( ... )`: a query, or expressions; the closing parenthesis is taken.
    pub(super) fn parenthesised(&mut self) {
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

    /// A type's name after `::` or CAST's `AS`: the parts of its qualified name, and its name
    /// before the parenthesis of its modifiers, are no calls (PostgreSQL takes only constants
    /// there, and reads them as it reads any expression). Returns whether it opened that
    /// parenthesis, which the caller's reading then closes: no recursion, however many casts
    /// nest.
    pub(super) fn type_name(&mut self) -> bool {
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
