//! TAS test harness.
