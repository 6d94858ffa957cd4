//! Kubernetes resource quantities ("52", "1500m", "2Gi", "1e3") as plain integers.
//!
//! NodeResourceTopology objects, pod requests and kubelet reports carry amounts as
//! quantity strings. The scheduler and the node agent only ever need them as integers
//! in one of two units, so this module parses a quantity straight to:
//!
//! - [`parse_milli`]: thousandths of the unit (CPU millicores: `"1500m"` → `1500`);
//! - [`parse_value`]: whole units (bytes, devices: `"2Gi"` → `2147483648`).
//!
//! Both round a value that does not land exactly on the unit *away from zero*, the way
//! Kubernetes' `Quantity.MilliValue()` / `Quantity.Value()` do (`"1500m"` → `2`,
//! `"-1500m"` → `-2`), so a request is never under-counted. The arithmetic is exact:
//! any number of digits is accepted and a result that does not fit in an `i64` is an
//! [`QuantityError::Overflow`], never a wrap-around or a panic.
//!
//! Accepted grammar (case-sensitive, no whitespace):
//! `[+-]? (digits | digits. | digits.digits | .digits) suffix`, where `suffix` is one of
//! the binary `Ki Mi Gi Ti Pi Ei`, the decimal `n u m k M G T P E` or none, or a decimal
//! exponent `e`/`E` followed by a signed integer (`"1e3"`, `"5E-1"`). A bare `E` is exa.
//!
//! Negative quantities parse (Kubernetes allows them); callers that need a non-negative
//! amount check the sign themselves.

/// Longest slice of a bad input repeated in an error message.
const MAX_SHOWN_CHARS: usize = 64;

/// Largest decimal exponent magnitude accepted after `e`/`E`.
const MAX_EXPONENT: i64 = 1_000_000;

/// Why a string is not a usable quantity. Every variant but `Empty` names the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string was empty.
    #[error("quantity is empty")]
    Empty,
    /// The string is not a Kubernetes quantity.
    #[error("invalid quantity {input:?}: {reason}")]
    Invalid {
        /// The offending input (cut short when very long).
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The quantity is valid but does not fit in a signed 64-bit integer in the
    /// requested unit.
    #[error("quantity {input:?} does not fit in a 64-bit integer{unit}")]
    Overflow {
        /// The offending input (cut short when very long).
        input: String,
        /// `" of milli-units"` when the overflow happened in milli-units, else empty.
        unit: &'static str,
    },
}

/// Parses a quantity into milli-units, rounding away from zero.
///
/// `"1500m"` → `1500`, `"2"` → `2000`, `"0.1m"` → `1`, `"-1"` → `-1000`.
pub fn parse_milli(input: &str) -> Result<i64, QuantityError> {
    parse_scaled(input, 3)
}

/// Parses a quantity into whole units, rounding away from zero like Kubernetes'
/// `Quantity.Value()`.
///
/// `"2Gi"` → `2147483648`, `"100M"` → `100000000`, `"1500m"` → `2`, `"1e3"` → `1000`.
pub fn parse_value(input: &str) -> Result<i64, QuantityError> {
    parse_scaled(input, 0)
}

/// Formats whole units as the canonical integer quantity string (`52` → `"52"`).
///
/// The result always parses back with [`parse_value`] to the same number.
pub fn format_value(value: i64) -> String {
    value.to_string()
}

/// Formats milli-units as a quantity string: whole numbers without a suffix
/// (`2000` → `"2"`), anything else with the `m` suffix (`1500` → `"1500m"`).
///
/// The result always parses back with [`parse_milli`] to the same number.
pub fn format_milli(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// Decimal SI suffixes and their powers of ten.
#[rustfmt::skip]
const DECIMAL_SUFFIXES: [(&str, i64); 9] = [
    ("n", -9), ("u", -6), ("m", -3), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18),
];
/// Binary SI suffixes: the i-th is 1024^(i+1).
const BINARY_SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// A quantity split into its parts, before any arithmetic.
struct Parts<'a> {
    negative: bool,
    int_digits: &'a str,
    frac_digits: &'a str,
    /// Power of ten from a decimal suffix or exponent.
    exp10: i64,
    /// Power of 1024 from a binary suffix.
    exp1024: usize,
}

/// Returns the value of `input` times `10^scale`, rounded away from zero.
fn parse_scaled(input: &str, scale: i64) -> Result<i64, QuantityError> {
    let parts = split(input)?;
    let overflow = || QuantityError::Overflow {
        input: shown(input),
        unit: if scale == 0 { "" } else { " of milli-units" },
    };

    // Little-endian decimal digits of the mantissa without its decimal point: the value
    // is `mantissa * 1024^exp1024 * 10^(exp10 - frac_len)`.
    let mut digits: Vec<u8> = parts
        .int_digits
        .bytes()
        .chain(parts.frac_digits.bytes())
        .rev()
        .map(|b| b - b'0')
        .collect();
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        return Ok(0);
    }
    for _ in 0..parts.exp1024 {
        multiply_small(&mut digits, 1024);
    }

    // Both terms are bounded (input length, MAX_EXPONENT), so this cannot overflow.
    let frac_len = i64::try_from(parts.frac_digits.len()).map_err(|_| overflow())?;
    let shift = parts.exp10 - frac_len + scale;

    let (integer_digits, round_up) = if shift >= 0 {
        // i64 has 19 digits at most: anything longer is out of range.
        if digits.len() as i64 + shift > 19 {
            return Err(overflow());
        }
        (&digits[..], false)
    } else {
        let fraction_len = usize::try_from(-shift)
            .unwrap_or(usize::MAX)
            .min(digits.len());
        let (fraction, integer) = digits.split_at(fraction_len);
        (integer, fraction.iter().any(|&d| d != 0))
    };
    if integer_digits.len() > 19 {
        return Err(overflow());
    }

    let mut magnitude: i128 = integer_digits
        .iter()
        .rev()
        .fold(0, |acc, &d| acc * 10 + i128::from(d));
    for _ in 0..shift.max(0) {
        magnitude *= 10;
    }
    if round_up {
        magnitude += 1;
    }
    let signed = if parts.negative {
        -magnitude
    } else {
        magnitude
    };
    i64::try_from(signed).map_err(|_| overflow())
}

/// Multiplies a little-endian decimal digit vector in place by a small factor.
fn multiply_small(digits: &mut Vec<u8>, factor: u32) {
    let mut carry: u32 = 0;
    for d in digits.iter_mut() {
        let product = u32::from(*d) * factor + carry;
        *d = (product % 10) as u8;
        carry = product / 10;
    }
    while carry > 0 {
        digits.push((carry % 10) as u8);
        carry /= 10;
    }
}

/// Splits `input` into sign, digits and suffix, rejecting anything malformed.
fn split(input: &str) -> Result<Parts<'_>, QuantityError> {
    if input.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid = |reason| QuantityError::Invalid {
        input: shown(input),
        reason,
    };

    let (negative, rest) = split_sign(input);
    let (int_digits, rest) = take_digits(rest);
    let (frac_digits, suffix) = match rest.strip_prefix('.') {
        Some(after_point) => take_digits(after_point),
        None => ("", rest),
    };
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(invalid("expected a number"));
    }

    let (exp10, exp1024) = if suffix.is_empty() {
        (0, 0)
    } else if let Some(power) = BINARY_SUFFIXES.iter().position(|&b| b == suffix) {
        (0, power + 1)
    } else if let Some(&(_, power)) = DECIMAL_SUFFIXES.iter().find(|&&(d, _)| d == suffix) {
        (power, 0)
    } else if let Some(exponent) = suffix.strip_prefix(['e', 'E']) {
        (
            parse_exponent(exponent).ok_or_else(|| invalid("bad exponent"))?,
            0,
        )
    } else {
        return Err(invalid("unknown suffix"));
    };
    Ok(Parts {
        negative,
        int_digits,
        frac_digits,
        exp10,
        exp1024,
    })
}

/// Parses a signed decimal integer exponent within ±[`MAX_EXPONENT`].
fn parse_exponent(text: &str) -> Option<i64> {
    let (negative, digits) = split_sign(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    if digits.len() > 7 {
        return None;
    }
    let magnitude: i64 = digits.parse().unwrap_or(0);
    (magnitude <= MAX_EXPONENT).then_some(if negative { -magnitude } else { magnitude })
}

/// Splits an optional leading `+` or `-` off `text`; `true` means negative.
fn split_sign(text: &str) -> (bool, &str) {
    match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    }
}

/// Splits the leading ASCII digits off `text`.
fn take_digits(text: &str) -> (&str, &str) {
    let end = text.bytes().take_while(u8::is_ascii_digit).count();
    text.split_at(end)
}

/// The input as repeated in an error: cut at [`MAX_SHOWN_CHARS`] characters.
fn shown(input: &str) -> String {
    let mut out: String = input.chars().take(MAX_SHOWN_CHARS).collect();
    if out.len() < input.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[rustfmt::skip]
    const CASES: &[(&str, i64, i64)] = &[
        // (input, milli, value)
        ("52", 52_000, 52), ("0", 0, 0), ("-0", 0, 0), ("007", 7000, 7),
        ("1500m", 1500, 2), ("-1500m", -1500, -2), ("0.1m", 1, 1), ("-0.1m", -1, -1),
        ("2Gi", 2_147_483_648_000, 2_147_483_648), ("1.5Gi", 1_610_612_736_000, 1_610_612_736),
        ("+1Ki", 1_024_000, 1024), ("100M", 100_000_000_000, 100_000_000),
        ("1k", 1_000_000, 1000), ("1n", 1, 1), ("1u", 1, 1),
        ("1P", 1_000_000_000_000_000_000, 1_000_000_000_000_000),
        ("1e3", 1_000_000, 1000), ("1E3", 1_000_000, 1000), ("1e+3", 1_000_000, 1000),
        ("10e-1", 1000, 1), ("1e-3", 1, 1), ("1e-1000000", 1, 1), ("0e1000000", 0, 0),
        ("0.5", 500, 1), (".5", 500, 1), ("5.", 5000, 5),
        ("0.000000000000000000000000000001", 1, 1),
        ("1.000000000000000000000000000000000000000", 1000, 1),
    ];

    #[test]
    fn parses_like_kubernetes() {
        for &(input, milli, value) in CASES {
            assert_eq!(parse_milli(input), Ok(milli), "milli of {input}");
            assert_eq!(parse_value(input), Ok(value), "value of {input}");
        }
    }

    #[test]
    fn every_binary_and_decimal_suffix() {
        #[rustfmt::skip]
        let cases = [
            ("Ki", 3 << 10), ("Mi", 3 << 20), ("Gi", 3 << 30), ("Ti", 3 << 40), ("Pi", 3 << 50),
            ("Ei", 3 << 60), ("k", 3_000), ("M", 3_000_000), ("G", 3_000_000_000),
            ("T", 3 * 10_i64.pow(12)), ("P", 3 * 10_i64.pow(15)), ("E", 3 * 10_i64.pow(18)),
        ];
        for (suffix, expected) in cases {
            assert_eq!(parse_value(&format!("3{suffix}")), Ok(expected), "{suffix}");
        }
    }

    #[test]
    fn the_i64_limits() {
        assert_eq!(parse_value("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_value("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_value("7Ei"), Ok(7 << 60));
        assert_eq!(parse_value("1E"), Ok(1_000_000_000_000_000_000));
        assert_eq!(parse_milli("9223372036854775807m"), Ok(i64::MAX));
        assert_eq!(parse_milli("9223372036854775.807"), Ok(i64::MAX));
        #[rustfmt::skip]
        let too_big = [
            "9223372036854775808", "-9223372036854775809", "8Ei", "10E", "1e19",
            "99999999999999999999999999999999999999999999",
        ];
        for input in too_big {
            let overflow = parse_value(input);
            assert!(
                matches!(overflow, Err(QuantityError::Overflow { .. })),
                "{input}"
            );
        }
        let err = parse_milli("9223372036854775807").unwrap_err();
        assert!(matches!(err, QuantityError::Overflow { .. }));
        assert!(err.to_string().contains("milli"), "{err}");
        assert!(err.to_string().contains("9223372036854775807"), "{err}");
    }

    #[test]
    fn rejects_garbage_naming_it() {
        assert_eq!(parse_value(""), Err(QuantityError::Empty));
        #[rustfmt::skip]
        let garbage = [
            "abc", "1.2.3", "1 ", " 1", "1Ki2", "1e", "1e1.5", "1e+", "1ki", "1K", "K", ".", "+",
            "-", "--1", "+-1", "1KiB", "1ee3", "0x10", "1_000", "１", "1Gі", "1e99999999", "Ki", "m",
        ];
        for input in garbage {
            match parse_milli(input) {
                Err(QuantityError::Invalid { input: shown, .. }) => assert_eq!(shown, input),
                other => panic!("{input:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn long_garbage_is_cut_in_the_message() {
        let input = "x".repeat(10_000);
        let message = parse_value(&input).unwrap_err().to_string();
        assert!(message.len() < 200, "{message}");
    }

    #[test]
    fn formats_canonically() {
        assert_eq!(format_value(52), "52");
        assert_eq!(format_value(-3), "-3");
        assert_eq!(format_milli(2000), "2");
        assert_eq!(format_milli(1500), "1500m");
        assert_eq!(format_milli(-500), "-500m");
    }

    proptest! {
        #[test]
        fn arbitrary_strings_never_panic(input in ".{0,64}") {
            let _ = parse_milli(&input);
            let _ = parse_value(&input);
        }

        #[test]
        fn quantity_shaped_strings_never_panic(
            input in "[+-]?[0-9]{0,30}(\\.[0-9]{0,30})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,8})?"
        ) {
            let _ = parse_milli(&input);
            let _ = parse_value(&input);
        }

        #[test]
        fn format_value_round_trips(value in any::<i64>()) {
            prop_assert_eq!(parse_value(&format_value(value)), Ok(value));
        }

        #[test]
        fn format_milli_round_trips(milli in any::<i64>()) {
            prop_assert_eq!(parse_milli(&format_milli(milli)), Ok(milli));
        }

        #[test]
        fn value_is_milli_rounded_away_from_zero(milli in -1_000_000_000_000_i64..1_000_000_000_000) {
            let input = format!("{milli}m");
            let rounded = if milli >= 0 { (milli + 999) / 1000 } else { (milli - 999) / 1000 };
            prop_assert_eq!(parse_value(&input), Ok(rounded));
        }
    }
}
