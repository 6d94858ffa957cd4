//! Tallies of the differential test: per view, policy and scope; the classes of
//! disagreement; the smallest failing case of each kind.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

/// The NRT views the scheduler is judged on.
pub const VIEWS: [&str; 2] = ["updater NRT (podresources)", "true state (managers)"];

/// How the scheduler's verdict compares with the kubelet's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    FalseAdmit,
    FalseReject,
    ZoneMismatch,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::FalseAdmit => "false-admit",
            Self::FalseReject => "false-reject",
            Self::ZoneMismatch => "zone mismatch",
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Row {
    attempts: u64,
    false_admits: u64,
    false_rejects: u64,
    zone_mismatches: u64,
}

impl Row {
    fn count(&mut self, kind: Kind) {
        match kind {
            Kind::FalseAdmit => self.false_admits += 1,
            Kind::FalseReject => self.false_rejects += 1,
            Kind::ZoneMismatch => self.zone_mismatches += 1,
        }
    }

    /// `attempts  false-admits  false-rejects (share)  zone-mismatches`.
    fn line(&self, label: &str) -> String {
        let share = if self.attempts == 0 {
            0.0
        } else {
            100.0 * self.false_rejects as f64 / self.attempts as f64
        };
        format!(
            "{label:<29} {:>8} {:>12} {:>7} ({share:.2} %) {:>15}",
            self.attempts, self.false_admits, self.false_rejects, self.zone_mismatches
        )
    }
}

/// A disagreement, with what reproduces it.
#[derive(Debug)]
pub struct Failure {
    pub view: usize,
    pub kind: Kind,
    /// Whether the node's cores have two threads.
    pub smt: bool,
    pub policy: String,
    pub scope: String,
    /// The kubelet's reason and message, or the scheduler's reason, digits blanked.
    pub class: String,
    /// Smaller is simpler: zones, pods already on the node, containers.
    pub size: (usize, usize, usize),
    pub case: Value,
}

#[derive(Debug, Default)]
pub struct Report {
    rows: [BTreeMap<(String, String), Row>; 2],
    /// Per view, machines without SMT then with it.
    by_smt: [[Row; 2]; 2],
    classes: BTreeMap<(usize, Kind, String, String), u64>,
    smallest: BTreeMap<(usize, Kind, String), Failure>,
}

impl Report {
    /// Counts one attempt seen through `view`.
    pub fn attempt(&mut self, view: usize, policy: &str, scope: &str, smt: bool) {
        self.row(view, policy, scope).attempts += 1;
        self.by_smt[view][usize::from(smt)].attempts += 1;
    }

    /// Counts one disagreement and keeps it when it is the smallest of its kind and policy.
    pub fn failure(&mut self, f: Failure) {
        self.row(f.view, &f.policy, &f.scope).count(f.kind);
        self.by_smt[f.view][usize::from(f.smt)].count(f.kind);
        if let Ok(dir) = std::env::var("TAS_DIFF_CASES") {
            // Every failing case, one file each, for study: `TAS_DIFF_CASES=DIR`.
            let n = self.classes.values().sum::<u64>();
            let path = std::path::Path::new(&dir).join(format!(
                "v{}-{}-{}-{}-{n}.json",
                f.view,
                f.kind.name().replace(' ', "_"),
                f.policy,
                f.scope
            ));
            let text = serde_json::to_string_pretty(&f.case).unwrap_or_default();
            if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text))
            {
                println!("cannot write {}: {e}", path.display());
            }
        }
        *self
            .classes
            .entry((f.view, f.kind, f.policy.clone(), f.class.clone()))
            .or_default() += 1;
        let key = (f.view, f.kind, f.policy.clone());
        if self.smallest.get(&key).is_none_or(|s| f.size < s.size) {
            self.smallest.insert(key, f);
        }
    }

    /// False-admits on the given view.
    pub fn false_admits(&self, view: usize) -> u64 {
        self.rows[view].values().map(|r| r.false_admits).sum()
    }

    /// False-rejects seen through `view`, on machines without SMT and with it.
    pub fn false_rejects(&self, view: usize) -> [u64; 2] {
        self.by_smt[view].map(|r| r.false_rejects)
    }

    fn row(&mut self, view: usize, policy: &str, scope: &str) -> &mut Row {
        self.rows[view]
            .entry((policy.to_owned(), scope.to_owned()))
            .or_default()
    }

    /// The tables, the classes and the smallest cases.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (view, rows) in self.rows.iter().enumerate() {
            let _ = writeln!(out, "\n=== NRT view: {} ===", VIEWS[view]);
            let _ = writeln!(
                out,
                "{:<18} {:<10} {:>8} {:>12} {:>13} {:>15}",
                "policy", "scope", "attempts", "false-admits", "false-rejects", "zone-mismatches"
            );
            let mut total = Row::default();
            for ((policy, scope), r) in rows {
                let _ = writeln!(
                    out,
                    "{policy:<18} {scope:<10} {:>8} {:>12} {:>13} {:>15}",
                    r.attempts, r.false_admits, r.false_rejects, r.zone_mismatches
                );
                total.attempts += r.attempts;
                total.false_admits += r.false_admits;
                total.false_rejects += r.false_rejects;
                total.zone_mismatches += r.zone_mismatches;
            }
            let _ = writeln!(
                out,
                "{:<18} {:<10} {:>8} {:>12} {:>13} {:>15}",
                "total",
                "",
                total.attempts,
                total.false_admits,
                total.false_rejects,
                total.zone_mismatches
            );
        }
        let _ = writeln!(
            out,
            "\n=== by machine: cores with one thread or two (SMT) ===\n{:<29} {:>8} {:>12} {:>18} {:>15}",
            "view, machines", "attempts", "false-admits", "false-rejects", "zone-mismatches"
        );
        for (view, split) in self.by_smt.iter().enumerate() {
            for (smt, row) in split.iter().enumerate() {
                let label = format!(
                    "{}, {}",
                    ["updater", "true state"][view],
                    ["no SMT", "SMT"][smt]
                );
                let _ = writeln!(out, "{}", row.line(&label));
            }
        }
        let _ = writeln!(
            out,
            "\n=== classes (view, kind, policy: kubelet or scheduler reason) ==="
        );
        for ((view, kind, policy, class), n) in &self.classes {
            let _ = writeln!(
                out,
                "[view {}] {:<13} {policy:<17} {n:>4}  {class}",
                view + 1,
                kind.name()
            );
        }
        let _ = writeln!(
            out,
            "\n=== smallest failing case per view, kind and policy ==="
        );
        for ((view, kind, policy), f) in &self.smallest {
            let _ = writeln!(
                out,
                "--- [view {}] {} under {policy}/{} ({})\n{}",
                view + 1,
                kind.name(),
                f.scope,
                f.class,
                serde_json::to_string_pretty(&f.case).unwrap_or_default()
            );
        }
        out
    }
}

/// A message with digits blanked, so messages that differ only in ids group together.
pub fn class_of(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    if s.len() > 140 {
        let mut end = 140;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}
