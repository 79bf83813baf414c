//! The public API, as a checked-in listing: `api/<crate>.txt` holds one line per public item of
//! each published crate (paths, signatures, fields, variants, trait implementations, auto traits
//! included), made from rustdoc's JSON output. Any change to what the crates promise changes a
//! listing, so it shows in review; this test fails until the listing is regenerated with
//! `PGPIPE_BLESS=1 cargo test -p pgpipe-adopt --test api`.
//!
//! rustdoc's JSON needs a nightly toolchain (`cargo +nightly`). Without one the test says so and
//! passes; `PGPIPE_REQUIRE_NIGHTLY=1` (CI) makes that a failure.

use pgpipe_adopt::root;
use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

/// The published crates and their library names.
const CRATES: &[(&str, &str)] = &[
    ("pgpipe", "pgpipe"),
    ("pgpipe-smol", "pgpipe_smol"),
    ("pgpipe-tokio", "pgpipe_tokio"),
    ("pgpipe-glommio", "pgpipe_glommio"),
];

#[test]
fn the_public_api_listing_is_current() {
    let target = root().join("target/api");
    let mut stale = Vec::new();
    for (package, lib) in CRATES {
        let out = Command::new("cargo")
            .current_dir(root())
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("RUSTC")
            .env_remove("RUSTDOC")
            .env("CARGO_TARGET_DIR", &target)
            .args(["+nightly", "rustdoc", "-q", "--lib", "-p", package])
            .args(["--", "-Z", "unstable-options", "--output-format", "json"])
            .output();
        let ok = matches!(&out, Ok(o) if o.status.success());
        if !ok {
            let why = match &out {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            assert!(
                std::env::var_os("PGPIPE_REQUIRE_NIGHTLY").is_none(),
                "rustdoc JSON of {package} (cargo +nightly): {why}"
            );
            // Past the test harness's capture, so a run without nightly says what it skipped.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED the API listing check: no nightly toolchain (cargo +nightly): {why}"
            );
            return;
        }
        let json = std::fs::read_to_string(target.join(format!("doc/{lib}.json")))
            .expect("rustdoc's JSON");
        let doc: Value = serde_json::from_str(&json).expect("rustdoc JSON parses");
        let listing = listing(&doc);
        let path = root().join(format!("api/{package}.txt"));
        if std::env::var_os("PGPIPE_BLESS").is_some() {
            std::fs::create_dir_all(root().join("api")).expect("api/");
            std::fs::write(&path, &listing).expect("write the listing");
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        if checked_in != listing {
            let old: BTreeSet<&str> = checked_in.lines().collect();
            let new: BTreeSet<&str> = listing.lines().collect();
            let mut diff: Vec<String> = new.difference(&old).map(|l| format!("+ {l}")).collect();
            diff.extend(old.difference(&new).map(|l| format!("- {l}")));
            stale.push(format!("api/{package}.txt:\n{}", diff.join("\n")));
        }
    }
    assert!(
        stale.is_empty(),
        "the public API changed; review it, then regenerate the listings with \
         PGPIPE_BLESS=1 cargo test -p pgpipe-adopt --test api\n{}",
        stale.join("\n")
    );
}

/// One sorted line per public item of the crate `doc` describes.
fn listing(doc: &Value) -> String {
    let index = &doc["index"];
    let paths = doc["paths"].as_object().expect("paths");
    let path_of = |id: &Value| -> Option<String> {
        let p = paths.get(&id.to_string())?;
        Some(strs(&p["path"]).join("::"))
    };
    let mut lines = BTreeSet::new();
    for (id, p) in paths {
        if p["crate_id"] != 0 {
            continue;
        }
        let Some(item) = index.get(id) else { continue };
        if item["visibility"] != "public" {
            continue;
        }
        let path = strs(&p["path"]).join("::");
        let Some((kind, inner)) = item["inner"].as_object().and_then(|o| o.iter().next()) else {
            continue;
        };
        match kind.as_str() {
            "function" => {
                lines.insert(format!("{}fn {path}{}", header(inner), sig(&inner["sig"])));
            }
            "struct" | "enum" | "union" | "trait" => {
                lines.insert(format!("{kind} {path}{}", generics(&inner["generics"])));
                let members = inner["kind"]["plain"]["fields"]
                    .as_array()
                    .into_iter()
                    .chain(inner["variants"].as_array())
                    .chain(inner["items"].as_array())
                    .flatten();
                for m in members {
                    if let Some(line) = member(index, &path, &index[m.to_string()]) {
                        lines.insert(line);
                    }
                }
                for imp in inner["impls"].as_array().into_iter().flatten() {
                    let imp = &index[imp.to_string()]["inner"]["impl"];
                    if !imp["blanket_impl"].is_null() {
                        continue;
                    }
                    match imp["trait"].as_object() {
                        Some(t) => {
                            let name = t["path"].as_str().unwrap_or("_");
                            let neg = if imp["is_negative"] == true { "!" } else { "" };
                            lines.insert(format!(
                                "impl {neg}{name}{} for {}",
                                args(&t["args"]),
                                ty(&imp["for"])
                            ));
                        }
                        None => {
                            for m in imp["items"].as_array().into_iter().flatten() {
                                if let Some(line) = member(index, &path, &index[m.to_string()]) {
                                    lines.insert(line);
                                }
                            }
                        }
                    }
                }
            }
            "constant" => {
                lines.insert(format!("const {path}: {}", ty(&inner["type"])));
            }
            "static" => {
                lines.insert(format!("static {path}: {}", ty(&inner["type"])));
            }
            "type_alias" => {
                lines.insert(format!(
                    "type {path}{} = {}",
                    generics(&inner["generics"]),
                    ty(&inner["type"])
                ));
            }
            other => {
                lines.insert(format!("{other} {path}"));
            }
        }
    }
    // Re-exports (`pub use`): what an adapter hands on from the core.
    for item in index.as_object().into_iter().flat_map(|o| o.values()) {
        if item["crate_id"] == 0 && item["visibility"] == "public" {
            if let Some(u) = item["inner"].get("use") {
                let to = path_of(&u["id"])
                    .unwrap_or_else(|| u["source"].as_str().unwrap_or("_").to_owned());
                let glob = if u["is_glob"] == true { "::*" } else { "" };
                lines.insert(format!(
                    "use {}{glob} as {}",
                    to,
                    u["name"].as_str().unwrap_or("_")
                ));
            }
        }
    }
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// A field, variant, method or associated item of `owner`, if public (trait items always are).
fn member(index: &Value, owner: &str, item: &Value) -> Option<String> {
    let name = item["name"].as_str()?;
    let (kind, inner) = item["inner"].as_object()?.iter().next()?;
    let public = item["visibility"] == "public" || item["visibility"] == "default";
    Some(match kind.as_str() {
        "struct_field" if public => format!("field {owner}.{name}: {}", ty(inner)),
        "variant" => {
            let fields = match &inner["kind"] {
                Value::Object(k) if k.contains_key("tuple") => {
                    let f: Vec<String> = strs_ids(&k["tuple"])
                        .map(|id| ty(&index[id]["inner"]["struct_field"]))
                        .collect();
                    format!("({})", f.join(", "))
                }
                Value::Object(k) if k.contains_key("struct") => {
                    let f: Vec<String> = strs_ids(&k["struct"]["fields"])
                        .map(|id| {
                            let f = &index[id];
                            format!(
                                "{}: {}",
                                f["name"].as_str().unwrap_or("_"),
                                ty(&f["inner"]["struct_field"])
                            )
                        })
                        .collect();
                    format!(" {{ {} }}", f.join(", "))
                }
                _ => String::new(),
            };
            format!("variant {owner}::{name}{fields}")
        }
        "function" if public => {
            format!("{}fn {owner}::{name}{}", header(inner), sig(&inner["sig"]))
        }
        "assoc_const" | "constant" if public => {
            format!("const {owner}::{name}: {}", ty(&inner["type"]))
        }
        "assoc_type" => format!("type {owner}::{name}{}", generics(&inner["generics"])),
        _ => return None,
    })
}

/// `const `, `async `, `unsafe ` as the function is declared.
fn header(f: &Value) -> String {
    ["const", "async", "unsafe"]
        .iter()
        .filter(|q| f["header"][format!("is_{q}")] == true)
        .map(|q| format!("{q} "))
        .collect()
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The ids in a list of (possibly stripped, `null`) item ids, as index keys.
fn strs_ids(v: &Value) -> impl Iterator<Item = String> + '_ {
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|v| !v.is_null())
        .map(Value::to_string)
}

fn sig(s: &Value) -> String {
    let inputs: Vec<String> = s["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{}: {}", p[0].as_str().unwrap_or("_"), ty(&p[1])))
        .collect();
    let out = match &s["output"] {
        Value::Null => String::new(),
        t => format!(" -> {}", ty(t)),
    };
    format!("({}){out}", inputs.join(", "))
}

fn generics(g: &Value) -> String {
    let params: Vec<String> = g["params"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            p["kind"].get("lifetime").is_some() || p["kind"]["type"]["is_synthetic"] != true
        })
        .map(|p| {
            let name = p["name"].as_str().unwrap_or("_").to_owned();
            match p["kind"]["type"]["bounds"].as_array() {
                Some(b) if !b.is_empty() => format!("{name}: {}", bounds(b)),
                _ => name,
            }
        })
        .collect();
    if params.is_empty() {
        String::new()
    } else {
        format!("<{}>", params.join(", "))
    }
}

fn bounds(b: &[Value]) -> String {
    b.iter()
        .map(|b| match b.get("trait_bound") {
            Some(t) => format!(
                "{}{}",
                t["trait"]["path"].as_str().unwrap_or("_"),
                args(&t["trait"]["args"])
            ),
            None => b["outlives"].as_str().unwrap_or("_").to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

fn args(a: &Value) -> String {
    if let Some(ab) = a.get("angle_bracketed") {
        let mut parts: Vec<String> = ab["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| match x.as_object().and_then(|o| o.iter().next()) {
                Some((k, v)) if k == "type" => ty(v),
                Some((_, v)) => v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                None => "_".to_owned(),
            })
            .collect();
        for c in ab["constraints"].as_array().into_iter().flatten() {
            let rhs = match c["binding"].get("equality") {
                Some(e) => format!(" = {}", ty(&e["type"])),
                None => String::new(),
            };
            parts.push(format!("{}{rhs}", c["name"].as_str().unwrap_or("_")));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("<{}>", parts.join(", "))
        }
    } else if let Some(p) = a.get("parenthesized") {
        let inputs: Vec<String> = p["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(ty)
            .collect();
        let out = match &p["output"] {
            Value::Null => String::new(),
            t => format!(" -> {}", ty(t)),
        };
        format!("({}){out}", inputs.join(", "))
    } else {
        String::new()
    }
}

/// A type as Rust spells it, near enough to see a change.
fn ty(t: &Value) -> String {
    let Some((kind, v)) = t.as_object().and_then(|o| o.iter().next()) else {
        return "_".to_owned();
    };
    match kind.as_str() {
        "resolved_path" => format!("{}{}", v["path"].as_str().unwrap_or("_"), args(&v["args"])),
        "generic" | "primitive" => v.as_str().unwrap_or("_").to_owned(),
        "borrowed_ref" => {
            let lt = v["lifetime"]
                .as_str()
                .map(|l| format!("{l} "))
                .unwrap_or_default();
            let m = if v["is_mutable"] == true { "mut " } else { "" };
            format!("&{lt}{m}{}", ty(&v["type"]))
        }
        "raw_pointer" => {
            let m = if v["is_mutable"] == true {
                "mut"
            } else {
                "const"
            };
            format!("*{m} {}", ty(&v["type"]))
        }
        "slice" => format!("[{}]", ty(v)),
        "array" => format!("[{}; {}]", ty(&v["type"]), v["len"].as_str().unwrap_or("_")),
        "tuple" => {
            let parts: Vec<String> = v.as_array().into_iter().flatten().map(ty).collect();
            format!("({})", parts.join(", "))
        }
        "impl_trait" => format!("impl {}", bounds(v.as_array().map_or(&[], Vec::as_slice))),
        "dyn_trait" => {
            let traits: Vec<String> = v["traits"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    format!(
                        "{}{}",
                        t["trait"]["path"].as_str().unwrap_or("_"),
                        args(&t["trait"]["args"])
                    )
                })
                .collect();
            format!("dyn {}", traits.join(" + "))
        }
        "qualified_path" => format!(
            "<{} as {}>::{}",
            ty(&v["self_type"]),
            v["trait"]["path"].as_str().unwrap_or("_"),
            v["name"].as_str().unwrap_or("_")
        ),
        "function_pointer" => format!("fn{}", sig(&v["sig"])),
        other => other.to_owned(),
    }
}
