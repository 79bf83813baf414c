//! The extension routines the guard refuses: what the catalog lists (read by each shared
//! connection as it opens, `proto::catalog`), less the contrib functions known to keep no
//! session state and those the configuration allows, matched by exact name, schema and an
//! overload that takes the call's argument count.

use super::lexer::Name;
use super::names::is_listed;
use super::Reason;

/// A volatile routine of an extension, as the catalog lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Routine {
    /// Its schema, exactly.
    pub(crate) schema: String,
    /// Its name, exactly (the catalog's bytes, at most 63).
    pub(crate) name: String,
    /// How many arguments it declares.
    pub(crate) args: u16,
    /// How many of them have defaults (a call may leave them out).
    pub(crate) defaults: u16,
    /// Whether its last argument is variadic (a call may pass any number there).
    pub(crate) variadic: bool,
}

/// Volatile functions of PostgreSQL 15's contrib extensions that keep no session state: the
/// catalog rule (below) refuses every other volatile extension function. A conformance test
/// installs every contrib extension and checks that each of its volatile functions is here or
/// in [`FUNCTIONS`]. Sorted, lower case.
const NEUTRAL_EXTENSION_FUNCTIONS: &[&str] = &[
    "autoprewarm_dump_now", // pg_prewarm: the shared buffers, not the session
    "autoprewarm_start_worker",
    "brin_metapage_info", // pageinspect: reads pages
    "brin_page_items",
    "brin_page_type",
    "brin_revmap_data",
    "bt_index_check", // amcheck: verifies an index
    "bt_index_parent_check",
    "bt_metap",
    "bt_page_items",
    "bt_page_stats",
    "dblink", // a connection per call, closed at its end
    "dblink_build_sql_delete",
    "dblink_build_sql_insert",
    "dblink_build_sql_update",
    "dblink_current_query",
    "dblink_exec",
    "dblink_fdw_validator",
    "dblink_get_pkey",
    "file_fdw_validator",
    "fsm_page_contents",
    "gen_random_bytes", // pgcrypto: random bytes, salts and encryption with random padding
    "gen_random_uuid",
    "gen_salt",
    "get_raw_page",
    "gin_leafpage_items",
    "gin_metapage_info",
    "gin_page_opaque_info",
    "gist_page_items",
    "gist_page_items_bytea",
    "gist_page_opaque_info",
    "hash_bitmap_info",
    "hash_metapage_info",
    "hash_page_items",
    "hash_page_stats",
    "hash_page_type",
    "heap_force_freeze", // pg_surgery: changes the table, not the session
    "heap_force_kill",
    "heap_page_item_attrs",
    "heap_page_items",
    "heap_tuple_infomask_flags",
    "int_agg_final_array", // intagg
    "int_array_aggregate", // intagg: an aggregate over a volatile state function
    "normal_rand",         // tablefunc: random numbers
    "page_checksum",
    "page_header",
    "pg_buffercache_pages",
    "pg_check_frozen", // pg_visibility
    "pg_check_visible",
    "pg_file_rename", // adminpack: files of the server
    "pg_file_sync",
    "pg_file_unlink",
    "pg_file_write",
    "pg_freespace",
    "pg_get_wal_record_info", // pg_walinspect
    "pg_get_wal_records_info",
    "pg_get_wal_records_info_till_end_of_wal",
    "pg_get_wal_stats",
    "pg_get_wal_stats_till_end_of_wal",
    "pg_logdir_ls",
    "pg_old_snapshot_time_mapping",
    "pg_prewarm",
    "pg_relpages",        // pgstattuple
    "pg_stat_statements", // pg_stat_statements: server-wide
    "pg_stat_statements_info",
    "pg_stat_statements_reset",
    "pg_truncate_visibility_map",
    "pg_visibility",
    "pg_visibility_map",
    "pg_visibility_map_summary",
    "pgp_pub_encrypt",
    "pgp_pub_encrypt_bytea",
    "pgp_sym_encrypt",
    "pgp_sym_encrypt_bytea",
    "pgrowlocks",
    "pgstatginindex",
    "pgstathashindex",
    "pgstatindex",
    "pgstattuple",
    "pgstattuple_approx",
    "plpgsql_inline_handler", // takes `internal`: SQL cannot call them
    "plpgsql_validator",
    "postgres_fdw_validator",
    "ssl_cipher", // sslinfo: reads the connection's TLS facts
    "ssl_client_cert_present",
    "ssl_client_dn",
    "ssl_client_dn_field",
    "ssl_client_serial",
    "ssl_extension_info",
    "ssl_is_used",
    "ssl_issuer_dn",
    "ssl_issuer_field",
    "ssl_version",
    "tuple_data_split",
    "uuid_generate_v1", // uuid-ossp
    "uuid_generate_v1mc",
    "uuid_generate_v4",
    "verify_heapam",
    "xslt_process", // xml2
];

/// Whether `name` (lower case) is a volatile contrib function known to keep no session state.
pub(crate) fn is_neutral_extension_function(name: &str) -> bool {
    NEUTRAL_EXTENSION_FUNCTIONS.binary_search(&name).is_ok()
}

/// The extension routines a guard refuses, one generation of them.
#[derive(Debug, Default)]
pub(crate) struct ExtensionNames {
    /// Sorted by name (exact bytes), then schema.
    routines: Vec<Routine>,
    /// For each first byte (ASCII letters folded to lower case), a bit per name length: a word
    /// is compared with the names only when its first byte and length occur.
    lengths_by_first: Vec<u64>,
    /// Whether some name holds a byte that cannot continue an unquoted identifier (a space, a
    /// quote): such a name is only ever written quoted.
    unusual: bool,
    /// The names folded to lower case, sorted: what any spelling of a word may call.
    folded: Vec<Box<[u8]>>,
    /// Their first letters, a bit each; whether one starts with `_` or a non-ASCII byte.
    letters: u32,
    others: bool,
    /// Which publication this is (0: none yet).
    pub(crate) generation: u64,
}

impl ExtensionNames {
    /// Whether there are none: a check then needs no argument counts.
    pub(super) fn is_empty(&self) -> bool {
        self.routines.is_empty()
    }

    /// No names (no catalog read yet, or a guard without one).
    pub(crate) const fn none() -> ExtensionNames {
        ExtensionNames {
            routines: Vec::new(),
            lengths_by_first: Vec::new(),
            unusual: false,
            folded: Vec::new(),
            letters: 0,
            others: false,
            generation: 0,
        }
    }

    /// Whether a word (any case) whose first byte is `first` and whose length is `len` (cut to
    /// 63) could name one of these routines.
    #[inline]
    pub(super) fn may_name(&self, first: u8, len: usize) -> bool {
        self.lengths_by_first
            .get(first.to_ascii_lowercase() as usize)
            .is_some_and(|bits| bits & (1u64 << len.min(63)) != 0)
    }

    /// Whether `lower` (a word folded to lower case) may call one of these routines: the same
    /// name in any case, since a quoted spelling is exact.
    pub(super) fn may_call(&self, lower: &[u8]) -> bool {
        self.folded.binary_search_by(|n| (**n).cmp(lower)).is_ok()
    }

    /// The first letters of the names (folded), a bit each (`a` is bit 0).
    pub(super) fn first_letters(&self) -> u32 {
        self.letters
    }

    /// Whether some name starts with `_` or a non-ASCII byte.
    pub(super) fn starts_otherwise(&self) -> bool {
        self.others
    }

    /// Whether some name can only be written quoted (it holds a space, a quote ...): a text
    /// with a quoted name must then be read.
    pub(super) fn has_unusual_names(&self) -> bool {
        self.unusual
    }

    /// The refusal for calling `name` (qualified by `schema`, if it was) with `args` arguments
    /// (`None`: not known), if one of these routines could be the one called: the same name
    /// exactly, the same schema when one is given, and an overload that takes that many
    /// arguments.
    pub(super) fn refuses(
        &self,
        schema: Option<&Name>,
        name: &Name,
        args: Option<u16>,
    ) -> Option<Reason> {
        if self.routines.is_empty() {
            return None;
        }
        let name = name.as_bytes();
        let from = self.routines.partition_point(|r| r.name.as_bytes() < name);
        let hit = self.routines[from..]
            .iter()
            .take_while(|r| r.name.as_bytes() == name)
            .find(|r| {
                schema.is_none_or(|s| s.as_bytes() == r.schema.as_bytes())
                    && args.is_none_or(|k| takes(r, k))
            })?;
        Some(Reason::ExtensionFunction(hit.name.clone()))
    }
}

/// Whether `r` accepts a call with `k` arguments: between its count less its defaults and its
/// count, or, variadic, any number from its count less one (and less its defaults).
fn takes(r: &Routine, k: u16) -> bool {
    let least = r.args.saturating_sub(r.defaults);
    (least..=r.args).contains(&k) || (r.variadic && k >= least.saturating_sub(1))
}

/// A client's extension routines to refuse, shared by its guard and its connections: each
/// shared connection that opens reads the catalog (`proto::catalog`) and publishes what it
/// found, so an extension created later is refused once a connection opens after it.
#[derive(Debug, Default)]
pub(crate) struct ExtensionFunctions {
    current: std::sync::RwLock<std::sync::Arc<ExtensionNames>>,
    /// `current`'s generation, read without the lock by every check (a cache hit needs
    /// nothing else).
    generation: std::sync::atomic::AtomicU64,
    /// Names the configuration allows (`guard_allow_functions`), as given.
    allowed: Vec<String>,
}

impl ExtensionFunctions {
    /// Refusing what the catalog says except `allowed`.
    pub(crate) fn new(allowed: &[String]) -> ExtensionFunctions {
        ExtensionFunctions {
            current: Default::default(),
            generation: Default::default(),
            allowed: allowed.to_vec(),
        }
    }

    /// Whether every extension function is allowed (`guard_allow_functions=*`): nothing to ask.
    pub(crate) fn all_allowed(&self) -> bool {
        self.allowed.iter().any(|a| a == "*")
    }

    /// Whether the configuration allows `name`: given as it is, or folded as an unquoted name
    /// in SQL would be.
    fn allows(&self, name: &str) -> bool {
        self.allowed
            .iter()
            .any(|a| a == name || a.to_ascii_lowercase() == name)
    }

    /// The generation of the names in force now.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The names in force now.
    pub(crate) fn current(&self) -> std::sync::Arc<ExtensionNames> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The volatile extension routines a connection found in the catalog: those neither
    /// listed, known neutral nor allowed become the routines refused. Verdicts cached before are
    /// dropped only when the set changed.
    pub(crate) fn publish(&self, found: impl IntoIterator<Item = Routine>) {
        let mut routines: Vec<Routine> = found
            .into_iter()
            .filter(|r| !is_listed(&r.name) && !is_neutral_extension_function(&r.name))
            .filter(|r| !self.allows(&r.name))
            .collect();
        let key = |r: &Routine| {
            (
                r.name.clone(),
                r.schema.clone(),
                r.args,
                r.defaults,
                r.variadic,
            )
        };
        routines.sort_by_cached_key(key);
        routines.dedup();
        let mut current = match self.current.write() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if current.generation > 0 && current.routines == routines {
            return;
        }
        let generation = current.generation + 1;
        let mut lengths_by_first = vec![0u64; 256];
        let (mut unusual, mut letters, mut others) = (false, 0u32, false);
        for r in &routines {
            let name = r.name.as_bytes();
            let Some(&first) = name.first() else {
                continue;
            };
            lengths_by_first[first.to_ascii_lowercase() as usize] |= 1u64 << name.len().min(63);
            if first.is_ascii_alphabetic() {
                letters |= 1 << (first.to_ascii_lowercase() - b'a');
            } else {
                others = true;
            }
            // Not the shape of an unquoted name: only ever written quoted.
            unusual |=
                !super::lex::is_word_start(first) || !name.iter().all(|&b| super::lex::is_ident(b));
        }
        let mut folded: Vec<Box<[u8]>> = routines
            .iter()
            .map(|r| r.name.to_ascii_lowercase().into_bytes().into_boxed_slice())
            .collect();
        folded.sort();
        folded.dedup();
        *current = std::sync::Arc::new(ExtensionNames {
            routines,
            lengths_by_first,
            unusual,
            folded,
            letters,
            others,
            generation,
        });
        self.generation
            .store(generation, std::sync::atomic::Ordering::Release);
    }
}
