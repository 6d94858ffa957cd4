//! What the benchmark's integration tests share.

use std::path::PathBuf;

/// `tas-scheduler` of the same build as this test (`target/<profile>/`).
pub fn tas_scheduler() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let found = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("tas-scheduler"))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "no tas-scheduler next to {}: build it with `cargo build -p tas-scheduler`",
            exe.display()
        )
    })
}
