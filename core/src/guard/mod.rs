//! The session-neutrality guard: only statements that leave no session state behind may share a
//! connection with other callers.
//!
//! The guard is a conservative filter, not a security boundary. It keeps one caller's session
//! state (settings, temp tables, advisory locks, sequence state, large-object descriptors,
//! dblink connections) from leaking into a stranger's statements; anything it refuses belongs in
//! `session()` or `transaction()`.
//!
//! A check cuts the text into tokens the way the server's lexer does (`lexer`), reads the
//! statement's structure where the rules need it (`reader`: which `name (` is a call, where an
//! INTO or an UPDATE's target stands) and applies the rules in a fixed order (`rules`). What the
//! reader does not follow gets no exception, so an unknown construct costs a false refusal,
//! never a bypass. `docs/GUARD.md` lists each rule and why it exists.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which rule set a [`Guard`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Refuse statements that change session state; sequence calls (`nextval`, `setval`) are
    /// allowed because their effect is meant to be global.
    #[default]
    Default,
    /// Also refuse `nextval`, `setval` (they set the session's `currval`/`lastval`) and
    /// `pg_export_snapshot` (the snapshot lives as long as the exporting transaction's session).
    Strict,
}

/// Why a statement was refused. Machine-readable; [`fmt::Display`] gives a human sentence.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Nothing but whitespace and comments, or no word after them and any opening parentheses
    /// (for example `(1)`).
    Empty,
    /// The first keyword (lower-cased) is not SELECT, INSERT, UPDATE, DELETE, MERGE, VALUES,
    /// WITH or TABLE.
    LeadingKeyword(String),
    /// Something other than whitespace follows the first `;`.
    MultipleStatements,
    /// A call of a function that changes session state (or reads state another caller left),
    /// in any call syntax, `f(x)` or `(x).f`; the canonical lower-case name.
    ForbiddenCall(&'static str),
    /// A call of a built-in that runs SQL given to it as text (`query_to_xml`, `ts_stat`,
    /// `crosstab` ...): that text could call anything, and no lexical rule can read it when it
    /// is computed. The canonical lower-case name.
    SqlTextCall(&'static str),
    /// `INTO [GLOBAL|LOCAL] TEMP|TEMPORARY`: `SELECT ... INTO` creating a temporary table.
    IntoTemp,
    /// `SELECT ... INTO [TABLE] [db.]pg_temp[_N].name`: creating a table in the session's temp
    /// schema.
    IntoPgTemp,
    /// A `U&"..."` identifier with escapes: they could spell any name.
    UnicodeEscapedIdentifier,
    /// `UESCAPE` together with a `U&` literal or identifier.
    Uescape,
    /// A statement that is an UPDATE of `pg_settings` (`UPDATE [ONLY] [(] [[db.]schema.]
    /// pg_settings`): the same as SET (and for parameters the server does not report, such as
    /// `search_path`, invisible to the ParameterStatus backstop).
    UpdatePgSettings,
    /// A call of a volatile routine of an installed extension (an aggregate counts as volatile
    /// when one of its support functions is) that pgpipe does not know to leave no session
    /// state, with an overload that takes the call's argument count (the client reads them
    /// from the catalog, `docs/GUARD.md`); its name, exactly.
    ExtensionFunction(String),
    /// A view that shows the connection's session state (`pg_prepared_statements`,
    /// `pg_cursors`, `pg_backend_memory_contexts`): on a shared connection, other callers'
    /// statements, literals included. The view's name.
    SessionView(&'static str),
    /// Queries nested deeper than the guard reads (200 levels of subqueries or parenthesised
    /// FROM lists), or a text past 4 GiB (which no message could carry): what it has not read
    /// it cannot prove neutral.
    TooDeep,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Empty => {
                f.write_str("no statement keyword (empty, or not starting with a word)")
            }
            Reason::LeadingKeyword(k) => write!(
                f,
                "leading keyword `{k}` is not SELECT, INSERT, UPDATE, DELETE, MERGE, VALUES, WITH \
                 or TABLE"
            ),
            Reason::MultipleStatements => f.write_str("more than one statement"),
            Reason::ForbiddenCall(name) => write!(f, "call of session-state function `{name}`"),
            Reason::SqlTextCall(name) => write!(
                f,
                "call of `{name}`, which runs SQL given as text that the guard cannot check"
            ),
            Reason::IntoTemp => f.write_str("INTO a temporary table"),
            Reason::IntoPgTemp => f.write_str("INTO a table in the session's pg_temp schema"),
            Reason::UnicodeEscapedIdentifier => f.write_str("U&\"...\" identifier with escapes"),
            Reason::Uescape => f.write_str("UESCAPE with a U& literal or identifier"),
            Reason::UpdatePgSettings => f.write_str("UPDATE of pg_settings (equivalent to SET)"),
            Reason::ExtensionFunction(name) => write!(
                f,
                "call of `{name}`, a volatile function of an installed extension that may keep \
                 session state"
            ),
            Reason::TooDeep => f.write_str("queries nested deeper than the guard reads"),
            Reason::SessionView(name) => write!(
                f,
                "read of `{name}`, which shows the connection's session state (other callers' \
                 statements)"
            ),
        }
    }
}

/// Default number of verdicts a [`Guard`] remembers.
pub const DEFAULT_CACHE_CAPACITY: usize = 2048;

/// Longer texts are checked every time rather than cached. The cache bounds entries, not bytes:
/// without this, 2,048 unique multi-megabyte statements (inline bulk INSERTs) would all be kept.
/// Checking costs about as much per byte as hashing, so a long text gains little from the cache.
pub const MAX_CACHED_LEN: usize = 16 * 1024;

/// Checks statements for the shared path and remembers its verdicts.
///
/// `Send + Sync`; [`Guard::check`] takes `&self` (the verdict cache sits behind a mutex that is
/// never held while a statement is being analysed).
pub struct Guard {
    mode: Mode,
    cache: Mutex<Cache>,
    /// The database's extension functions to refuse, when the guard belongs to a client.
    extensions: Option<Arc<ExtensionFunctions>>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cache = self.lock();
        f.debug_struct("Guard")
            .field("mode", &self.mode)
            .field("cached", &cache.map.len())
            .field("capacity", &cache.cap)
            .finish()
    }
}

impl Default for Guard {
    fn default() -> Guard {
        Guard::new(Mode::Default)
    }
}

impl Guard {
    /// A guard with the default cache capacity ([`DEFAULT_CACHE_CAPACITY`]).
    pub fn new(mode: Mode) -> Guard {
        Guard::with_cache_capacity(mode, DEFAULT_CACHE_CAPACITY)
    }

    /// A guard remembering at most `capacity` verdicts (0 disables the cache). Texts longer than
    /// [`MAX_CACHED_LEN`] are never cached.
    pub fn with_cache_capacity(mode: Mode, capacity: usize) -> Guard {
        Guard {
            mode,
            cache: Mutex::new(Cache::new(capacity)),
            extensions: None,
        }
    }

    /// A guard that also refuses the extension functions `extensions` holds (a client's, kept
    /// current by its connections).
    pub(crate) fn with_extensions(mode: Mode, extensions: Arc<ExtensionFunctions>) -> Guard {
        Guard {
            extensions: Some(extensions),
            ..Guard::new(mode)
        }
    }

    /// The rule set this guard applies.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `Ok(())` if `sql` may run on a shared connection, otherwise the rule that refuses it.
    ///
    /// A cache hit for an allowed statement does not allocate; a refusal allocates its message.
    pub fn check(&self, sql: &str) -> Result<(), Refusal> {
        let cached = {
            let mut cache = self.lock();
            // Verdicts taken before the extension functions changed may be wrong now.
            if let Some(ext) = &self.extensions {
                cache.follow(ext.generation());
            }
            cache.get(sql)
        };
        let verdict = match cached {
            Some(v) => v,
            None => {
                // No allocation for a guard without extension functions.
                static NONE: ExtensionNames = ExtensionNames::none();
                let current;
                let names: &ExtensionNames = match &self.extensions {
                    Some(ext) => {
                        current = ext.current();
                        &current
                    }
                    None => &NONE,
                };
                let v = rules::verdict_with(sql, self.mode, names);
                let mut cache = self.lock();
                // Names published meanwhile: this verdict may be stale, so it is not kept.
                if names.generation == 0 || cache.follows(names.generation) {
                    cache.insert(sql, v.clone());
                }
                v
            }
        };
        match verdict {
            None => Ok(()),
            Some(reason) => Err(Refusal::new(reason, sql)),
        }
    }

    /// [`Guard::check`] for a simple-protocol text of one or more `;`-separated statements:
    /// `Ok(())` only if every statement may run on a shared connection, otherwise the first
    /// refusal (naming the statement it refuses). The statements are cut where the guard's
    /// lexer finds a `;` outside literals, quoted names and comments; a `;` the server would
    /// not end a statement at (inside parentheses, or a `BEGIN ATOMIC` body) makes the server
    /// refuse the whole text before running any of it, or cuts a `CREATE`, which is refused.
    pub fn check_script(&self, sql: &str) -> Result<(), Refusal> {
        let ends = lexer::Lexer::new(sql)
            .filter(|t| t.kind == lexer::Kind::Semicolon)
            .map(|t| t.start())
            .chain([sql.len()]);
        let (mut start, mut statements) = (0, 0);
        for end in ends {
            let statement = sql[start..end].trim();
            start = end + 1;
            if lexer::Lexer::new(statement).next().is_some() {
                statements += 1;
                self.check(statement)?;
            }
        }
        match statements {
            // Nothing but blanks and `;`: the single-statement rules say why.
            0 => self.check(sql),
            _ => Ok(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        // The cache is consistent after every operation, so a poisoned lock is still usable.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    fn cached_len(&self) -> usize {
        self.lock().map.len()
    }
}

mod cache;
mod extensions;
mod lex;
mod lexer;
mod mask;
mod names;
mod read_only;
mod reader;
mod refusal;
mod rules;
mod shape;
#[cfg(test)]
mod tests;

use cache::Cache;
use extensions::ExtensionNames;
pub(crate) use extensions::{ExtensionFunctions, Routine};
pub use mask::{mask, needs_masking};
pub use read_only::is_read_only;
pub use refusal::{Refusal, RefusalKind, SHOWN_CHARS};
pub(crate) use shape::{command_verb, placeholders};
