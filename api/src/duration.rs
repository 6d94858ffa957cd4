//! Go-style durations (`10s`, `1m30s`, `500ms`, `1.5h`) as used in the CRD and config
//! files, parsed without panicking.
//!
//! Why not `kube::core::Duration` (tested in `tests::kube_core_duration_does_not_fit`):
//! - it panics on input: `100000000000000000000h` overflows `std::time::Duration` in
//!   `mul_f64`, so a typo in a config file or a flag would crash the process instead of
//!   naming the bad value;
//! - it accepts what the CRD's CEL rules refuse: the empty string (as zero) and negative
//!   durations (`-1s`), so an operand would run with values `kubectl apply` rejects;
//! - it writes `std::time::Duration`'s debug form (`1m30s` becomes `90s`, `1.5h`
//!   becomes `5400s`), so typed CR fields would change the strings the operator copies
//!   into the scheduler's ConfigMap;
//! - its errors do not name the input, which the scheduler's config errors and the
//!   updater's flag errors rely on.
//!
//! The schema is not the obstacle: it is `{type: string}`, like the `String` fields the
//! CRD uses now, whose pattern lives in the CEL rules.

use std::time::Duration;

/// A duration string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (examples: '10s', '1m30s', '500ms')")]
pub struct DurationError {
    /// The offending input.
    pub input: String,
    /// What was wrong.
    pub reason: &'static str,
}

/// Parse a non-negative Go-style duration: one or more `<number><unit>` with units `ns`,
/// `us`, `ms`, `s`, `m`, `h`; `0` alone is zero.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.chars().take(64).collect(),
        reason,
    };
    let s = input.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err("unknown unit")),
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(err("too large"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// Format a duration the way [`parse`] reads it back (`1m30s`, `200ms`, `0s`).
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("10s", 10_000),
            ("1m30s", 90_000),
            ("500ms", 500),
            ("1.5h", 5_400_000),
            ("2m", 120_000),
            ("0", 0),
            ("0s", 0),
        ];
        for (input, ms) in cases {
            assert_eq!(parse(input).unwrap(), Duration::from_millis(ms), "{input}");
        }
    }

    #[test]
    fn garbage_is_an_error_naming_the_input() {
        for bad in ["", "10", "s", "10x", "-1s", "1..5s", "ten seconds"] {
            let e = parse(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    /// The differences that keep this parser (see the module documentation).
    #[test]
    fn kube_core_duration_does_not_fit() {
        use kube::core::Duration as KubeDuration;

        // The same schema as a plain string field.
        let mut generator = schemars::SchemaGenerator::default();
        assert_eq!(
            generator.subschema_for::<KubeDuration>(),
            generator.subschema_for::<String>()
        );
        // Agrees on well-formed input.
        for ok in ["10s", "1m30s", "500ms", "1.5h", "0"] {
            let theirs: Duration = ok.parse::<KubeDuration>().unwrap().into();
            assert_eq!(theirs, parse(ok).unwrap(), "{ok}");
        }
        // Panics where this parser reports an error.
        let huge = "100000000000000000000h";
        assert!(std::panic::catch_unwind(|| huge.parse::<KubeDuration>()).is_err());
        assert_eq!(parse(huge).unwrap_err().reason, "too large");
        // Accepts what the CEL rules refuse.
        for refused in ["", "-1s"] {
            assert!(refused.parse::<KubeDuration>().is_ok(), "{refused:?}");
            assert!(parse(refused).is_err(), "{refused:?}");
        }
        // Writes another form than it read.
        let written = serde_json::to_value("1m30s".parse::<KubeDuration>().unwrap()).unwrap();
        assert_eq!(written, "90s");
        assert_eq!(format(parse("1m30s").unwrap()), "1m30s");
        // Errors without the input.
        let err = "10x".parse::<KubeDuration>().unwrap_err().to_string();
        assert!(!err.contains("10x"), "{err}");
        assert!(parse("10x").unwrap_err().to_string().contains("\"10x\""));
    }

    #[test]
    fn format_round_trips() {
        for ms in [0u64, 200, 1_000, 90_000, 3_600_000, 3_725_000] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse(&format(d)).unwrap(), d, "{}", format(d));
        }
    }
}
