//! Replays every committed fuzz corpus input (`fuzz/corpus/<target>/`) through the fuzz
//! targets' own entry points, on the stable toolchain: the corpus holds the inputs that
//! reached new code, and any of them panicking again is a regression. `make fuzz`
//! (nightly) searches for new inputs; this only re-runs the known ones.

#[path = "../../fuzz/src/entries.rs"]
mod entries;

use std::path::Path;

#[test]
fn every_corpus_input_runs_through_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for (target, entry) in entries::TARGETS {
        let dir = corpus.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: no corpus", dir.display());
        for file in files {
            let data = std::fs::read(&file).expect("corpus file");
            let run = std::panic::catch_unwind(|| entry(&data));
            assert!(run.is_ok(), "{target}: {} panics", file.display());
        }
    }
}
