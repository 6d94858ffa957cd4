//! Tallies of the DRA differential test and the table it prints.

use std::collections::BTreeMap;
use std::fmt;

/// A difference between TAS and kube-scheduler that is understood and documented in
/// the test's module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Known {
    /// kube-scheduler v1.34 lets `distinctAttribute` through on equal values.
    KubeDistinctByAddress,
    /// kube-scheduler v1.34 matches an `All` subrequest after the first by the
    /// previous subrequest's cached selector results.
    KubeSubrequestCacheKey,
}

impl Known {
    fn name(self) -> &'static str {
        match self {
            Self::KubeDistinctByAddress => "kube v1.34's distinctAttribute accepts equal values",
            Self::KubeSubrequestCacheKey => {
                "kube v1.34 matches an `All` subrequest by the previous one's cache"
            }
        }
    }
}

/// How one case came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    BothAllocate,
    /// Both refused; whether each refused with an error rather than "does not fit",
    /// and TAS's reason (its error's kind).
    BothRefuse {
        referee_error: bool,
        tas_error: bool,
        reason: String,
    },
    /// The first answers differed; asked again, the referee answered as TAS did (its
    /// pools are tried in Go map order, so an error it meets depends on the order).
    Reordered,
    Known(Known),
    /// The referee's time limit: no verdict to compare (kube-scheduler calls the
    /// node unschedulable; TAS's search bound is a refusal like any other).
    Inconclusive,
    /// TAS allocated, the referee refused every time it was asked.
    TasOnly,
    /// The referee allocated, TAS refused, not explained by a known difference.
    RefereeOnly,
    /// TAS's allocation breaks a rule of the API.
    TasInvalid,
    /// The referee's allocation fails the test's own check: the check is wrong.
    RefereeInvalid,
}

impl Outcome {
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Self::TasOnly | Self::RefereeOnly | Self::TasInvalid | Self::RefereeInvalid
        )
    }
}

/// A failing case, with what reproduces it.
#[derive(Debug)]
pub struct Failure {
    pub case: u64,
    pub outcome: Outcome,
    pub detail: String,
}

#[derive(Debug, Default)]
pub struct Report {
    pub seed: u64,
    cases: u64,
    both_allocate: u64,
    both_refuse: u64,
    both_error: u64,
    /// Both refused, by TAS's reason.
    reasons: BTreeMap<String, u64>,
    reordered: u64,
    inconclusive: u64,
    tas_only: u64,
    referee_only: u64,
    invalid: u64,
    /// Cases where the referee's first answer was an error.
    referee_errors: u64,
    known: BTreeMap<Known, u64>,
    pub failures: Vec<Failure>,
}

impl Report {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            ..Self::default()
        }
    }

    pub fn add(&mut self, case: u64, outcome: Outcome, referee_error: bool, detail: String) {
        self.cases += 1;
        self.referee_errors += u64::from(referee_error);
        match &outcome {
            Outcome::BothAllocate => self.both_allocate += 1,
            Outcome::BothRefuse {
                referee_error,
                tas_error,
                reason,
            } => {
                self.both_refuse += 1;
                self.both_error += u64::from(*referee_error && *tas_error);
                *self.reasons.entry(reason.clone()).or_default() += 1;
            }
            Outcome::Reordered => self.reordered += 1,
            Outcome::Known(k) => *self.known.entry(*k).or_default() += 1,
            Outcome::Inconclusive => self.inconclusive += 1,
            Outcome::TasOnly => self.tas_only += 1,
            Outcome::RefereeOnly => self.referee_only += 1,
            Outcome::TasInvalid | Outcome::RefereeInvalid => self.invalid += 1,
        }
        if outcome.is_failure() {
            self.failures.push(Failure {
                case,
                outcome,
                detail,
            });
        }
    }

    /// Cases whose verdict differed in a known way, per difference.
    pub fn known(&self, which: Known) -> u64 {
        self.known.get(&which).copied().unwrap_or(0)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "DRA differential, seed {}:", self.seed)?;
        writeln!(
            f,
            "| cases | both allocate | both refuse | TAS only | referee only | errors |"
        )?;
        writeln!(f, "|---:|---:|---:|---:|---:|---:|")?;
        writeln!(
            f,
            "| {} | {} | {} | {} | {} | {} |",
            self.cases,
            self.both_allocate,
            self.both_refuse,
            self.tas_only,
            self.referee_only,
            self.referee_errors
        )?;
        writeln!(
            f,
            "errors: the referee's first answer was an error (CEL runtime error, invalid pool, \
             `All` on an incomplete pool); both refused with an error: {}",
            self.both_error
        )?;
        let reasons: Vec<String> = self
            .reasons
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        writeln!(f, "both refused, by TAS's reason: {}", reasons.join(", "))?;
        writeln!(
            f,
            "agreed once the referee was asked again (Go map order of pools): {}",
            self.reordered
        )?;
        for (known, n) in &self.known {
            writeln!(f, "known difference, {}: {n}", known.name())?;
        }
        writeln!(
            f,
            "inconclusive (the referee's time limit): {}",
            self.inconclusive
        )?;
        writeln!(f, "invalid allocations: {}", self.invalid)?;
        for failure in self.failures.iter().take(10) {
            writeln!(
                f,
                "case {} ({:?}): {}",
                failure.case, failure.outcome, failure.detail
            )?;
        }
        Ok(())
    }
}
