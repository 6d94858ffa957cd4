//! The fuzz targets' entry points (`fuzz_targets/*.rs` call one each).
//!
//! Kept apart from the targets so that the workspace's corpus replay test, which builds
//! on stable without libFuzzer, runs exactly the same code over the committed corpus.

pub mod entries;
