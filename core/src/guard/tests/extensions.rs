//! Extension routines from the catalog: matched by exact name, schema and overload.

use super::*;

pub(super) fn routine(
    schema: &str,
    name: &str,
    args: u16,
    defaults: u16,
    variadic: bool,
) -> Routine {
    Routine {
        schema: schema.into(),
        name: name.into(),
        args,
        defaults,
        variadic,
    }
}

#[test]
fn extension_functions_from_the_catalog() {
    let ext = std::sync::Arc::new(ExtensionFunctions::new(&["Allowed_Fn".to_owned()]));
    let guard = Guard::with_extensions(Mode::Default, ext.clone());
    let sql = "SELECT keeps_state()";
    // Before any connection read the catalog: the fixed list only.
    assert!(guard.check(sql).is_ok());
    ext.publish([
        routine("public", "keeps_state", 0, 0, false),
        routine("public", "uuid_generate_v4", 0, 0, false),
        routine("public", "allowed_fn", 0, 0, false),
        routine("public", "set_limit", 1, 0, false),
        routine("ext", "Odd Name", 1, 0, false),
        routine("ext", "two_or_three", 3, 1, false),
        routine("ext", "many", 2, 0, true),
    ]);
    // The cached verdict went with the new set.
    let refusal = guard.check(sql).unwrap_err();
    assert_eq!(
        refusal.reason,
        Reason::ExtensionFunction("keeps_state".into())
    );
    assert_eq!(refusal.kind(), RefusalKind::NotProvablyNeutral);
    assert!(refusal
        .advice()
        .contains("guard_allow_functions=keeps_state"));
    for sql in [
        "SELECT * FROM keeps_state()",
        "SELECT public.\"keeps_state\"()",
        "SELECT KEEPS_STATE()",
        // Exact names: quoted, with a space and a capital.
        "SELECT \"Odd Name\"(1)",
        "SELECT ext.\"Odd Name\"(1)",
        "SELECT (1).\"Odd Name\"",
        // Overloads by argument count: defaults and variadic.
        "SELECT two_or_three(1, 2)",
        "SELECT two_or_three(1, 2, 3)",
        "SELECT many(1)",
        "SELECT many(1, 2, 3, 4)",
        // Counts not known: every overload could be the one.
        "SELECT two_or_three(VARIADIC ARRAY[1, 2, 3, 4])",
        "SELECT two_or_three(a, b, c, d ORDER BY e) FROM t",
    ] {
        assert!(guard.check(sql).is_err(), "{sql}");
    }
    for sql in [
        "SELECT uuid_generate_v4()",
        "SELECT allowed_fn()",
        "WITH keeps_state(v) AS (SELECT 1) SELECT v FROM keeps_state",
        "SELECT my_keeps_state()",
        // Another function: another name, another schema, another argument count.
        "SELECT \"KEEPS_STATE\"()",
        "SELECT \"odd name\"(1)",
        "SELECT app.keeps_state()",
        "SELECT keeps_state(1)",
        "SELECT two_or_three(1)",
        "SELECT two_or_three(ARRAY[1, 2, 3])",
        "SELECT two_or_three(f(1, 2, 3))",
        "SELECT keeps_state((SELECT 1, 2))",
    ] {
        assert!(guard.check(sql).is_ok(), "{sql}");
    }
    // Beyond 63 bytes the server cuts a name: so does the guard.
    let long = "n".repeat(63);
    ext.publish([routine("public", &long, 0, 0, false)]);
    assert!(guard.check(&format!("SELECT {long}xyz()")).is_err());
    // A listed function keeps its own reason.
    ext.publish([routine("public", "set_limit", 1, 0, false)]);
    assert_eq!(
        guard.check("SELECT set_limit(0.5)").unwrap_err().reason,
        Reason::ForbiddenCall("set_limit")
    );
    // The same set again keeps the cache; a new one without it admits it again.
    let generation = ext.current().generation;
    ext.publish([routine("public", "set_limit", 1, 0, false)]);
    assert_eq!(ext.current().generation, generation);
    ext.publish([]);
    assert!(guard.check(sql).is_ok());
    // `*` admits them all: nothing to ask.
    assert!(ExtensionFunctions::new(&["*".to_owned()]).all_allowed());
}
