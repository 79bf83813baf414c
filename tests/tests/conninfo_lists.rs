//! Host, hostaddr and port lists that libpq refuses are refused here too, with libpq's own
//! message: each string is given to `Config::parse` and to libpq (through psql), and both must
//! fail saying the same thing.

use pgpipe::Config;

#[test]
fn list_mismatches_are_refused_as_libpq_refuses_them() {
    for (conninfo, message) in [
        (
            "host=localhost port=5432,5433",
            "could not match 2 port numbers to 1 hosts",
        ),
        (
            "host=a,b,c port=1,2",
            "could not match 2 port numbers to 3 hosts",
        ),
        (
            "hostaddr=127.0.0.1,127.0.0.2 host=localhost",
            "could not match 1 host names to 2 hostaddr values",
        ),
        (
            "host=a,b hostaddr=10.0.0.1,10.0.0.2,10.0.0.3",
            "could not match 2 host names to 3 hostaddr values",
        ),
        (
            "hostaddr=127.0.0.1,127.0.0.2 port=1,2,3",
            "could not match 3 port numbers to 2 hosts",
        ),
    ] {
        let ours = Config::parse_with_env(conninfo, |_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("{conninfo}: pgpipe accepted it"));
        assert!(ours.contains(message), "{conninfo}: pgpipe said {ours:?}");
        let theirs = pgpipe_tests::libpq_connects(conninfo)
            .err()
            .unwrap_or_else(|| panic!("{conninfo}: libpq accepted it"));
        assert!(
            theirs.contains(message),
            "{conninfo}: libpq said {theirs:?}"
        );
    }
    // What libpq accepts, pgpipe accepts.
    for conninfo in [
        "host=a,b port=5432",
        "host=a,b port=1,2",
        "host=a,b hostaddr=10.0.0.1,10.0.0.2 port=1,2",
        "hostaddr=10.0.0.1,10.0.0.2 port=1,2",
    ] {
        assert!(
            Config::parse_with_env(conninfo, |_| None).is_ok(),
            "{conninfo}"
        );
    }
}
