//! Unit tests of the DRA core.
