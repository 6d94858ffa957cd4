//! Unit tests of the DRA core, one file per concern; objects come from [`builders`].

mod builders;
mod cel_cases;
mod evaluation_cases;
mod pool_cases;
mod props;
mod request_cases;
mod search_cases;
mod zone_cases;
