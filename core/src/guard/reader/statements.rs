//! The statements the reader follows (queries, set operations, SELECT INTO, INSERT, UPDATE,
//! DELETE, MERGE, WITH lists): where each puts a name before a parenthesis that is not a call.

use super::*;

impl Reader<'_> {
    // ---- queries -------------------------------------------------------------------------

    /// `[WITH ...] operand {UNION|INTERSECT|EXCEPT operand} [ORDER BY ...] [LIMIT ...] ...`
    pub(super) fn query(&mut self, level: Level) {
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
    pub(super) fn operand(&mut self, level: Level) {
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
    pub(super) fn select(&mut self, level: Level) {
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
    pub(super) fn select_into(&mut self, level: Level) {
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
    pub(super) fn insert(&mut self) {
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
    pub(super) fn update(&mut self, level: Level) {
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
    pub(super) fn delete(&mut self) {
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
    pub(super) fn merge(&mut self) {
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
    pub(super) fn write_target(&mut self) {
        self.relation();
    }

    /// `WITH [RECURSIVE] name [(columns)] AS [[NOT] MATERIALIZED] (query) [SEARCH ...]
    /// [CYCLE ...], ...`: a name before its column list here is no call.
    pub(super) fn with_list(&mut self) {
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
    pub(super) fn names_list(&self, k: usize) -> Option<usize> {
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
    pub(super) fn cte_body_at(&self, mut k: usize) -> bool {
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

    pub(super) fn name_token(&mut self) {
        if self.is_name(0) {
            self.bump();
        }
    }
}
