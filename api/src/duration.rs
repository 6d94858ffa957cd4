//! Go-style durations (`10s`, `1m30s`, `500ms`, `1.5h`) as used in the CRD and config
//! files, parsed without panicking.

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

    #[test]
    fn format_round_trips() {
        for ms in [0u64, 200, 1_000, 90_000, 3_600_000, 3_725_000] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse(&format(d)).unwrap(), d, "{}", format(d));
        }
    }
}
