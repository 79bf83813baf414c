//! What the examples share: where their database comes from.

use pgpipe_tests::Cluster;

/// The database an example uses: `DATABASE_URL` if set, otherwise a throwaway PostgreSQL
/// cluster started here (removed when the returned `Cluster` is dropped). Exits the process
/// with a message if no cluster can be started.
pub fn database() -> (Option<Cluster>, String) {
    match std::env::var("DATABASE_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            eprintln!("no DATABASE_URL: starting a throwaway PostgreSQL cluster...");
            let c = Cluster::start().unwrap_or_else(|e| {
                eprintln!("cannot start PostgreSQL: {e}");
                std::process::exit(1)
            });
            let url = c.url();
            (Some(c), url)
        }
    }
}
