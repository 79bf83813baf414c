//! The workspace's shape, checked rather than promised: every crate's modules depend one way
//! (no import cycle among the children of any module: core, the adapters, the benchmark and
//! its binaries, the simulation, the harness, the examples), no source file in the workspace grows past
//! [`MAX_LINES`], and `docs/DESIGN.md`'s rule map names files that exist and every file of the
//! core.
//!
//! Imports are read from the source text: every `crate::`, `super::` path outside comments,
//! with `use` groups expanded and the crate root's re-exports (`crate::Client`) resolved to the
//! module that defines them. A dependency between two files counts between the two children of
//! their nearest common module: `driver/task/mod.rs` naming `crate::driver::shared::Token` is
//! an edge `task -> shared` under `driver`; naming `crate::rt::Runtime` is `driver -> rt`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The longest a source file may be: a reader should find their room in it.
const MAX_LINES: usize = 650;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, skipping build output and hidden directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    rust_files_but(dir, &[], out);
}

/// [`rust_files`] without the directories named in `skip` (another crate's root, as `bin`
/// under a library's `src`).
fn rust_files_but(dir: &Path, skip: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && !skip.contains(&name.as_str()) {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under a crate's root directory (`driver/task/mod.rs` ->
/// `[driver, task]`; `lib.rs` and `main.rs` are the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_owned());
    }
    parts
}

/// The text with `//` comments blanked (doc links are not imports); line breaks are kept.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tiny reader of path trees: `a::b::{c, d::e}` -> `[a,b,c]`, `[a,b,d,e]`.
struct Paths<'a> {
    s: &'a [u8],
    i: usize,
}

impl Paths<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn ident(&mut self) -> Option<String> {
        self.skip_ws();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
        {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.s[self.i..].starts_with(tok.as_bytes()) {
            self.i += tok.len();
            true
        } else {
            false
        }
    }

    /// Reads one tree after a prefix, appending each leaf path to `out`.
    fn tree(&mut self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.eat("{") {
            loop {
                if self.eat("}") {
                    break;
                }
                let depth = prefix.len();
                self.tree(prefix, out);
                prefix.truncate(depth);
                if !self.eat(",") {
                    self.eat("}");
                    break;
                }
            }
            return;
        }
        match self.ident() {
            Some(id) if id == "self" => out.push(prefix.clone()),
            Some(id) => {
                prefix.push(id);
                if self.eat("::") {
                    self.tree(prefix, out);
                } else {
                    out.push(prefix.clone());
                }
            }
            None => out.push(prefix.clone()),
        }
    }
}

/// Every absolute path a file's code names, with the line it is on: `crate::` paths as they
/// are, `super::` paths resolved against the file's module.
fn paths_in(code: &str, module: &[String]) -> Vec<(Vec<String>, usize)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let boundary = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':');
        let (base, skip) = if boundary && rest.starts_with(b"crate::") {
            (Vec::new(), "crate::".len())
        } else if boundary && rest.starts_with(b"super::") {
            // `super` of `a/b.rs` (module a::b) is `a`; several `super::` climb further.
            let mut base = module.to_vec();
            let mut skip = 0;
            while bytes[i + skip..].starts_with(b"super::") {
                base.pop();
                skip += "super::".len();
            }
            (base, skip)
        } else {
            i += 1;
            continue;
        };
        let line = code[..i].matches('\n').count() + 1;
        let mut p = Paths {
            s: bytes,
            i: i + skip,
        };
        let mut leaves = Vec::new();
        let mut prefix = base;
        p.tree(&mut prefix, &mut leaves);
        for leaf in leaves {
            found.push((leaf, line));
        }
        i = p.i.max(i + 1);
    }
    found
}

/// The crate root's `pub use` re-exports: name -> the path it stands for.
fn root_reexports(lib: &str) -> BTreeMap<String, Vec<String>> {
    let mut map = BTreeMap::new();
    let code = code_of(lib);
    for (n, _) in code.match_indices("pub use ") {
        let mut p = Paths {
            s: code.as_bytes(),
            i: n + "pub use ".len(),
        };
        let mut leaves = Vec::new();
        p.tree(&mut Vec::new(), &mut leaves);
        for leaf in leaves {
            let skip = usize::from(leaf.first().is_some_and(|f| f == "crate"));
            let leaf = leaf[skip..].to_vec();
            if let Some(name) = leaf.last() {
                map.insert(name.clone(), leaf.clone());
            }
        }
    }
    map
}

/// Edges between sibling modules, grouped by their parent: parent -> (from, to) -> where.
type Edges = BTreeMap<Vec<String>, BTreeMap<(String, String), Vec<String>>>;

fn core_edges() -> Edges {
    crate_edges(&CRATES[0])
}

/// A crate of the workspace: its root directory, its root file, and the directories under the
/// root that are other crates.
struct Crate {
    dir: &'static str,
    root: &'static str,
    skip: &'static [&'static str],
}

/// Every crate whose modules must depend one way (the adapters are one file each).
const CRATES: [Crate; 7] = [
    Crate {
        dir: "core/src",
        root: "lib.rs",
        skip: &[],
    },
    Crate {
        dir: "bench/src",
        root: "lib.rs",
        skip: &["bin"],
    },
    Crate {
        dir: "bench/src/bin/pgpipe-bench",
        root: "main.rs",
        skip: &[],
    },
    Crate {
        dir: "bench/src/bin/pgpipe-icount",
        root: "main.rs",
        skip: &[],
    },
    Crate {
        dir: "sim/src",
        root: "lib.rs",
        skip: &[],
    },
    Crate {
        dir: "tests/src",
        root: "lib.rs",
        skip: &[],
    },
    Crate {
        dir: "examples/web/src",
        root: "lib.rs",
        skip: &["bin"],
    },
];

fn crate_edges(krate: &Crate) -> Edges {
    let src = workspace().join(krate.dir);
    let mut files = Vec::new();
    rust_files_but(&src, krate.skip, &mut files);
    files.sort();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
    let lib = fs::read_to_string(src.join(krate.root)).expect("the crate's root file");
    let reexports = root_reexports(&lib);
    let mut edges = Edges::new();
    for file in &files {
        let from = module_of(&src, file);
        if from.is_empty() {
            continue; // the crate root only declares and re-exports
        }
        let text = fs::read_to_string(file).expect("readable source");
        for (mut path, line) in paths_in(&code_of(&text), &from) {
            if let Some(target) = path.first().and_then(|f| reexports.get(f)) {
                if !modules.contains(&path[..1]) {
                    let mut resolved = target.clone();
                    resolved.extend(path.drain(1..));
                    path = resolved;
                }
            }
            // The longest prefix of the path that is a module.
            let to = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| modules.contains(m));
            let Some(to) = to else { continue };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common >= from.len() || common >= to.len() {
                continue; // a module naming its own descendants or ancestors
            }
            let at = format!(
                "{}:{line}",
                file.strip_prefix(workspace()).unwrap_or(file).display()
            );
            edges
                .entry(from[..common].to_vec())
                .or_default()
                .entry((from[common].clone(), to[common].clone()))
                .or_default()
                .push(at);
        }
    }
    edges
}

/// The strongly connected components with more than one member (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(next) = s.graph.get(v) {
            for w in next {
                if !s.index.contains_key(w.as_str()) {
                    visit(s, w);
                    let lw = s.low[w.as_str()];
                    let lv = s.low[v].min(lw);
                    s.low.insert(v, lv);
                } else if s.on.contains(w.as_str()) {
                    let lv = s.low[v].min(s.index[w.as_str()]);
                    s.low.insert(v, lv);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The import cycles among the children of any module of `edges`' crate, with the lines that
/// make them.
fn cycle_report(edges: &Edges) -> String {
    let mut report = String::new();
    for (parent, pairs) in edges {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs.keys() {
            graph.entry(from.clone()).or_default().insert(to.clone());
        }
        for cycle in cycles(&graph) {
            let parent = match parent.is_empty() {
                true => "the crate".to_owned(),
                false => parent.join("::"),
            };
            report.push_str(&format!("cycle under {parent}: {}\n", cycle.join(" <-> ")));
            for ((from, to), at) in pairs {
                if cycle.contains(from) && cycle.contains(to) {
                    report.push_str(&format!("  {from} -> {to}: {}\n", at.join(", ")));
                }
            }
        }
    }
    report
}

#[test]
fn core_modules_depend_one_way() {
    let edges = core_edges();
    let report = cycle_report(&edges);
    assert!(report.is_empty(), "import cycles in core:\n{report}");
    // The check sees the dependencies it must see (a reader that found nothing would pass).
    let top = &edges[&Vec::new()];
    assert!(top.contains_key(&("driver".to_owned(), "proto".to_owned())));
    assert!(top.contains_key(&("client".to_owned(), "driver".to_owned())));
    assert!(
        edges[&vec!["driver".to_owned()]].contains_key(&("task".to_owned(), "shared".to_owned()))
    );
}

/// The cycles outside core not untangled yet, each by its crate and members: a new cycle fails
/// the check below, and so does one of these once it is gone (strike it off here).
/// - the simulation: its executor is also its `Runtime`, whose socket type is the network's,
///   and a connect on the network starts a server task on the executor.
const KNOWN_CYCLES: &[(&str, &str)] = &[("sim/src", "executor <-> net <-> server")];

#[test]
fn every_crates_modules_depend_one_way() {
    let mut report = String::new();
    let mut seen = Vec::new();
    for krate in &CRATES[1..] {
        let edges = crate_edges(krate);
        assert!(!edges.is_empty(), "no imports read in {}", krate.dir);
        // A cycle's line, then the lines of the imports that make it.
        let mut unknown = false;
        for line in cycle_report(&edges).lines() {
            if line.starts_with("cycle") {
                let members = line.split(": ").nth(1).unwrap_or_default();
                unknown = !KNOWN_CYCLES.contains(&(krate.dir, members));
                if !unknown {
                    seen.push((krate.dir, members.to_owned()));
                }
            }
            if unknown {
                report.push_str(&format!("{}: {line}\n", krate.dir));
            }
        }
    }
    assert!(report.is_empty(), "import cycles:\n{report}");
    for (dir, members) in KNOWN_CYCLES {
        assert!(
            seen.iter().any(|s| s.0 == *dir && s.1 == *members),
            "{dir}: {members} is gone: strike it off KNOWN_CYCLES"
        );
    }
}

#[test]
fn the_cycle_check_resolves_groups_super_and_reexports() {
    let module = vec!["driver".to_owned(), "task".to_owned()];
    let code =
        "use crate::{Client, driver::{shared::Token, open}};\nlet x = super::health::check();";
    let paths: Vec<Vec<String>> = paths_in(code, &module)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let p = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        paths,
        vec![
            p("Client"),
            p("driver::shared::Token"),
            p("driver::open"),
            p("driver::health::check")
        ]
    );
    let lib = "pub use client::{Adapter, Client};\npub use driver::Notification;";
    let map = root_reexports(lib);
    assert_eq!(map["Client"], p("client::Client"));
    assert_eq!(map["Notification"], p("driver::Notification"));
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["c".to_owned()]));
    graph.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    graph.insert("d".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(
        cycles(&graph),
        vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]
    );
}

#[test]
fn no_source_file_is_over_the_limit() {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut long: Vec<(usize, String)> = files
        .iter()
        .filter_map(|f| {
            let n = fs::read_to_string(f).ok()?.lines().count();
            let name = f.strip_prefix(&root).unwrap_or(f).display().to_string();
            (n > MAX_LINES).then_some((n, name))
        })
        .collect();
    long.sort();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

/// The paths `docs/DESIGN.md`'s rule map names (code spans with a `/` and no space).
fn rule_map_paths() -> Vec<String> {
    let design = fs::read_to_string(workspace().join("docs/DESIGN.md")).expect("docs/DESIGN.md");
    let map = design
        .split("## Where each rule lives")
        .nth(1)
        .expect("DESIGN.md has its rule map");
    let map = map.split("\n## ").next().unwrap_or(map);
    map.split('`')
        .skip(1)
        .step_by(2)
        .filter(|cell| cell.contains('/') && !cell.contains(' '))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_file_the_rule_map_names_exists() {
    let root = workspace();
    let named = rule_map_paths();
    assert!(
        named.len() > 20,
        "the rule map names only {} files",
        named.len()
    );
    let missing: Vec<&String> = named
        .iter()
        .filter(|cell| !root.join(cell.trim_end_matches('/')).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "DESIGN.md names files that do not exist: {missing:?}"
    );
}

/// Whether a core file needs no row of its own: tests, the crate root, and a `mod.rs` that
/// only declares its children and re-exports (its directory's files have the rows).
fn needs_no_row(rel: &str, text: &str) -> bool {
    if rel == "core/src/lib.rs" || rel.ends_with("/tests.rs") || rel.contains("/tests/") {
        return true;
    }
    rel.ends_with("/mod.rs")
        && code_of(text).lines().map(str::trim).all(|l| {
            l.is_empty()
                || l.starts_with("#")
                || l.starts_with("mod ")
                || l.starts_with("pub mod ")
                || l.starts_with("pub(crate) mod ")
                || l.starts_with("pub use ")
        })
}

#[test]
fn every_core_file_has_a_row_in_the_rule_map() {
    let root = workspace();
    let named = rule_map_paths();
    let mut files = Vec::new();
    rust_files(&root.join("core/src"), &mut files);
    let mut unmapped: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let rel = f
                .strip_prefix(&root)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let text = fs::read_to_string(f).ok()?;
            let mapped = named
                .iter()
                .any(|n| *n == rel || (n.ends_with('/') && rel.starts_with(n.as_str())));
            (!mapped && !needs_no_row(&rel, &text)).then_some(rel)
        })
        .collect();
    unmapped.sort();
    assert!(
        files.len() > 50,
        "found only {} core files; is the walk broken?",
        files.len()
    );
    assert!(
        unmapped.is_empty(),
        "core files without a row in DESIGN.md's rule map: {unmapped:?}"
    );
}

/// The files that may give `Client` public methods: the client's own module, atomic batches,
/// and sessions (which build on the client, so the client does not know their types).
const CLIENT_API_FILES: [&str; 3] = [
    "core/src/client/mod.rs",
    "core/src/client/batch.rs",
    "core/src/session/mod.rs",
];

/// The public methods of every inherent `impl ... Client<R>` block in `text`.
fn public_client_methods(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in code_of(text).lines() {
        if line.starts_with("impl<") && line.trim_end().ends_with("Client<R> {") {
            inside = !line.contains(" for ");
        } else if line.starts_with('}') {
            inside = false;
        } else if inside {
            let l = line.trim_start();
            let indent = line.len() - l.len();
            if indent == 4 && (l.starts_with("pub fn ") || l.starts_with("pub async fn ")) {
                out.push(l.split('(').next().unwrap_or(l).to_owned());
            }
        }
    }
    out
}

#[test]
fn clients_public_methods_live_where_a_reader_looks() {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root.join("core/src"), &mut files);
    let mut found = 0;
    let mut elsewhere = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .expect("under the workspace")
            .to_string_lossy()
            .replace('\\', "/");
        let text = fs::read_to_string(f).expect("a readable source file");
        let methods = public_client_methods(&text);
        found += methods.len();
        if !CLIENT_API_FILES.contains(&rel.as_str()) {
            elsewhere.extend(methods.into_iter().map(|m| format!("{rel}: {m}")));
        }
    }
    assert!(found >= 15, "found only {found} public Client methods");
    assert!(
        elsewhere.is_empty(),
        "public Client methods outside {CLIENT_API_FILES:?}: {elsewhere:?}"
    );
}
