//! The benchmark binary's hidden sampler command (`--sample-host-memory`) speaks the protocol
//! `MemorySampler` reads: started as the benchmark starts it, it chases until stopped.

use std::process::Command;
use std::time::Duration;

use pgpipe_tests::host_speed::{MemorySampler, SAMPLE_EVERY};

#[test]
fn the_benchmark_binary_runs_as_a_memory_sampler() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pgpipe-bench"));
    cmd.arg("__host-memory-sampler");
    let sampler = MemorySampler::start(cmd).expect("the sampler says ready");
    std::thread::sleep(SAMPLE_EVERY * 10 + Duration::from_millis(200));
    let (ns, chases) = sampler.finish().expect("it made chases");
    assert!(chases >= 3, "{chases} chases in over half a second");
    // A dependent load through 64 MiB is a cache miss: well over a nanosecond, well under
    // a millisecond, however loaded the machine.
    assert!(ns > 1.0 && ns < 1e6, "{ns} ns per load");
}
