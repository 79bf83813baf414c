//! Runs the simulation over many seeds (`PGPIPE_SIM_SEEDS`, default 10,000), or one seed
//! (`PGPIPE_SIM_SEED`), plus the regression seeds; and checks that a seed replays exactly.

use pgpipe_sim::{run_seed, REGRESSION_SEEDS};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}"))
    })
}

#[test]
fn seeds() {
    let seeds: Vec<u64> = match env_u64("PGPIPE_SIM_SEED") {
        Some(one) => vec![one],
        None => {
            let n = env_u64("PGPIPE_SIM_SEEDS").unwrap_or(10_000);
            REGRESSION_SEEDS.iter().copied().chain(0..n).collect()
        }
    };
    let started = std::time::Instant::now();
    let (mut units, mut ok, mut lost, mut conns) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for &seed in &seeds {
        match run_seed(seed) {
            Ok(r) => {
                units += r.units;
                ok += r.ok;
                lost += r.lost;
                conns += r.connections as usize;
            }
            Err(e) => {
                eprintln!("{e}\n  reproduce: PGPIPE_SIM_SEED={seed} cargo test -p pgpipe-sim");
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{} seeds in {:?}: {units} units, {ok} returned their value, {lost} lost with a \
         connection, {conns} connections",
        seeds.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}

#[test]
fn a_seed_replays_bit_for_bit() {
    for seed in [1, 7, 42, 1234, 99_999] {
        let a = run_seed(seed).expect("passes");
        let b = run_seed(seed).expect("passes");
        assert_eq!(a, b, "seed {seed} ran differently twice");
    }
}
