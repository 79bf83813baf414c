//! The web service alone: `pgpipe-web serve --variant NAME --url URL [--addr 127.0.0.1:8080]`
//! (see `pgpipe_web::server::parse_serve_args` for every flag). The database must hold the
//! `world` and `fortune` tables: `pgpipe-web load --url URL` (re)creates them.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => pgpipe_web::server::parse_serve_args(&args[1..])
            .and_then(pgpipe_web::server::serve_forever),
        Some("load") => match (args.get(1).map(String::as_str), args.get(2)) {
            (Some("--url"), Some(url)) => pgpipe_web::schema::load(url),
            _ => Err("usage: web load --url URL".into()),
        },
        _ => Err(
            "usage: web serve --variant NAME [--url URL] [--addr IP:PORT] [--threads N] \
                  [--connections N] [--max-connections N] | web load --url URL"
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(2);
    }
}
