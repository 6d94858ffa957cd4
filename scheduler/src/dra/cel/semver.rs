//! `semver("1.2.3")` and its methods, as the Kubernetes CEL semver library names them:
//! `version` attributes of devices are semantic versions.
//!
//! Parsing is strict Semantic Versioning 2.0.0 (`MAJOR.MINOR.PATCH`, optional
//! `-prerelease` and `+build`, no leading zeros, no `v` prefix); ordering follows the
//! specification's precedence rules, build metadata ignored. The two-argument
//! `semver(text, normalize)` form is not offered.

use std::cmp::Ordering;

use ::cel::common::types::{CelBool, CelInt, STRING_TYPE, Type};
use ::cel::common::value::CowVal;
use ::cel::{DeclarationError, Env, ExecutionError};

use super::ordered;

/// The CEL type of versions, named as in Kubernetes.
static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// One dot-separated identifier of a pre-release.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identifier {
    Numeric(u64),
    Text(String),
}

impl Ord for Identifier {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Numeric(a), Self::Numeric(b)) => a.cmp(b),
            (Self::Numeric(_), Self::Text(_)) => Ordering::Less,
            (Self::Text(_), Self::Numeric(_)) => Ordering::Greater,
            (Self::Text(a), Self::Text(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Identifier {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A semantic version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Identifier>,
}

/// Why a string is not a semantic version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a semantic version: {reason}")]
pub struct SemverError {
    text: String,
    reason: &'static str,
}

impl Semver {
    /// Parses a Semantic Versioning 2.0.0 string.
    pub fn parse(text: &str) -> Result<Self, SemverError> {
        let fail = |reason| SemverError {
            text: text.chars().take(64).collect(),
            reason,
        };
        let (rest, build) = match text.split_once('+') {
            Some((rest, build)) => (rest, Some(build)),
            None => (text, None),
        };
        if let Some(build) = build
            && build.split('.').any(|id| !is_identifier(id))
        {
            return Err(fail("invalid build metadata"));
        }
        let (core, pre) = match rest.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (rest, None),
        };
        let mut numbers = core.split('.').map(numeric);
        let (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) = (
            numbers.next(),
            numbers.next(),
            numbers.next(),
            numbers.next(),
        ) else {
            return Err(fail("expected MAJOR.MINOR.PATCH without leading zeros"));
        };
        let pre = match pre {
            None => Vec::new(),
            Some(pre) => pre
                .split('.')
                .map(|id| {
                    if !is_identifier(id) {
                        None
                    } else if id.bytes().all(|b| b.is_ascii_digit()) {
                        numeric(id).map(Identifier::Numeric)
                    } else {
                        Some(Identifier::Text(id.to_owned()))
                    }
                })
                .collect::<Option<_>>()
                .ok_or_else(|| fail("invalid pre-release"))?,
        };
        Ok(Self {
            major,
            minor,
            patch,
            pre,
        })
    }
}

/// A non-empty run of `[0-9A-Za-z-]`.
fn is_identifier(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A decimal number without leading zeros.
fn numeric(text: &str) -> Option<u64> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    if digits && !leading_zero {
        text.parse().ok()
    } else {
        None
    }
}

impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        let core =
            (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        core.then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
            // A release ranks above its pre-releases.
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => self.pre.cmp(&other.pre),
        })
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

ordered::impl_val!(Semver, SEMVER_TYPE);

/// Registers `semver`, `isSemver` and the version methods on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("semver", "dra_semver", vec![STRING_TYPE], parse)?;
    env.add_overload("isSemver", "dra_is_semver", vec![STRING_TYPE], is_semver)?;
    ordered::register::<Semver>(env, &SEMVER_TYPE, "dra_semver")?;
    let v = || SEMVER_TYPE.to_owned();
    env.add_member_overload("major", "dra_semver_major", v(), vec![], major)?;
    env.add_member_overload("minor", "dra_semver_minor", v(), vec![], minor)?;
    env.add_member_overload("patch", "dra_semver_patch", v(), vec![], patch)?;
    Ok(())
}

fn parse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let parsed = Semver::parse(ordered::text("semver", &args)?)
        .map_err(|e| ExecutionError::function_error("semver", e))?;
    Ok(CowVal::owned(parsed))
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let valid = Semver::parse(ordered::text("isSemver", &args)?).is_ok();
    Ok(CowVal::owned(CelBool::from(valid)))
}

/// Version part `part` of argument 0 as a CEL `int` (past `i64::MAX` it saturates).
fn part<'b, 'v>(
    function: &str,
    args: &[CowVal<'_, '_>],
    part: fn(&Semver) -> u64,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let n = part(ordered::operand::<Semver>(function, args, 0)?);
    Ok(CowVal::owned(CelInt::from(
        i64::try_from(n).unwrap_or(i64::MAX),
    )))
}

fn major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    part("major", &args, |v| v.major)
}

fn minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    part("minor", &args, |v| v.minor)
}

fn patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    part("patch", &args, |v| v.patch)
}
